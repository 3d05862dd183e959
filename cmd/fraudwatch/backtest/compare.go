package backtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

// Difference is what changing the rules does to the alerts sent: those
// sent under the new rules only, under the old only, those that moved, and
// each rule's totals under both.
type Difference struct {
	Added   []Alert      `json:"added"`
	Removed []Alert      `json:"removed"`
	Moved   []Move       `json:"moved"`
	Totals  []RuleTotals `json:"totals"`
}

// Move is an alert of one rule and group sent under both rule sets, but
// for another order or event, at another time or value.
type Move struct {
	Rule  string `json:"rule"`
	Group string `json:"group"`
	Old   Alert  `json:"old"`
	New   Alert  `json:"new"`
}

// RuleTotals is one rule's counts under the old rules and the new (nil
// where the rule is not one of that set), and how many of its alerts were
// added, removed and moved.
type RuleTotals struct {
	Rule    string  `json:"rule"`
	Old     *Counts `json:"old"`
	New     *Counts `json:"new"`
	Added   int     `json:"added"`
	Removed int     `json:"removed"`
	Moved   int     `json:"moved"`
}

// groupKey is a rule and a group of it: the alerts a comparison pairs.
type groupKey struct{ rule, group string }

// Compare pairs the alerts sent under old and new: those of one rule and
// group, in time order, the first with the first. A pair whose order,
// event, time or value differ moved; an alert without a pair was added
// (new) or removed (old). Added and moved are in new's order, removed in
// old's.
func Compare(old, new *Report) Difference {
	d := Difference{Added: []Alert{}, Removed: []Alert{}, Moved: []Move{}}
	olds := map[groupKey][]Alert{}
	for _, a := range old.Alerts {
		if a.Outcome == dispatch.OutcomeSent {
			k := groupKey{a.Rule, a.Group}
			olds[k] = append(olds[k], a)
		}
	}
	paired := map[groupKey]int{}
	for _, a := range new.Alerts {
		if a.Outcome != dispatch.OutcomeSent {
			continue
		}
		k := groupKey{a.Rule, a.Group}
		i := paired[k]
		paired[k]++
		switch {
		case i >= len(olds[k]):
			d.Added = append(d.Added, a)
		case moved(olds[k][i], a):
			d.Moved = append(d.Moved, Move{Rule: a.Rule, Group: a.Group, Old: olds[k][i], New: a})
		}
	}
	seen := map[groupKey]int{}
	for _, a := range old.Alerts {
		k := groupKey{a.Rule, a.Group}
		if a.Outcome == dispatch.OutcomeSent {
			if seen[k]++; seen[k] > paired[k] {
				d.Removed = append(d.Removed, a)
			}
		}
	}
	d.Totals = totals(old, new, d)
	return d
}

// moved says whether two paired alerts differ.
func moved(old, new Alert) bool {
	return old.Order != new.Order || old.Event != new.Event || !old.At.Equal(new.At) || old.Value != new.Value
}

// totals lists every rule of new, then those of old alone, each with its
// counts under both and its changes.
func totals(old, new *Report, d Difference) []RuleTotals {
	var out []RuleTotals
	index := map[string]int{}
	add := func(r Rule, isOld bool) {
		i, ok := index[r.Name]
		if !ok {
			i = len(out)
			index[r.Name] = i
			out = append(out, RuleTotals{Rule: r.Name})
		}
		counts := r.Counts
		if isOld {
			out[i].Old = &counts
		} else {
			out[i].New = &counts
		}
	}
	for _, r := range new.Rules {
		add(r, false)
	}
	for _, r := range old.Rules {
		add(r, true)
	}
	// A rule's alerts are all under its own name, in one set or the other.
	for _, a := range d.Added {
		out[index[a.Rule]].Added++
	}
	for _, a := range d.Removed {
		out[index[a.Rule]].Removed++
	}
	for _, m := range d.Moved {
		out[index[m.Rule]].Moved++
	}
	return out
}

// writeDifference prints d, of the rules against those from: a line of
// counts, each rule's totals old → new, and the alerts added (+), removed
// (-) and moved (~).
func writeDifference(w io.Writer, from string, d Difference) error {
	fmt.Fprintf(w, "\nagainst %s, alerts: %d added, %d removed, %d moved\n\n", from, len(d.Added), len(d.Removed), len(d.Moved))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tCROSSINGS\tALERTS\tCOOLDOWN\tSHADOW\tCHANGES")
	for _, t := range d.Totals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Rule,
			change(t, func(c Counts) int { return c.Crossings }), change(t, func(c Counts) int { return c.Sent }),
			change(t, func(c Counts) int { return c.Cooldown }), change(t, func(c Counts) int { return c.Shadow }),
			changes(t))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Added)+len(d.Removed) > 0 {
		fmt.Fprintf(w, "\nadded (+) and removed (-): time, rule, group, value, order\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, l := range []struct {
			mark   string
			alerts []Alert
		}{{"+", d.Added}, {"-", d.Removed}} {
			for _, a := range l.alerts {
				fmt.Fprintf(tw, "%s %s\t%s\t%s\t%d\t%s\n", l.mark, stamp(a.At), a.Rule, a.Group, a.Value, a.Order)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(d.Moved) > 0 {
		fmt.Fprintf(w, "\nmoved (~): rule, group, old time, value, order → new time, value, order\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, m := range d.Moved {
			fmt.Fprintf(tw, "~ %s\t%s\t%s\t%d\t%s\t→ %s\t%d\t%s\n", m.Rule, m.Group,
				stamp(m.Old.At), m.Old.Value, m.Old.Order, stamp(m.New.At), m.New.Value, m.New.Order)
		}
		return tw.Flush()
	}
	return nil
}

// change is one count of a rule, old → new; "-" where the rule is not one
// of that set.
func change(t RuleTotals, count func(Counts) int) string {
	side := func(c *Counts) string {
		if c == nil {
			return "-"
		}
		return fmt.Sprint(count(*c))
	}
	return side(t.Old) + " → " + side(t.New)
}

// changes says what became of a rule's alerts.
func changes(t RuleTotals) string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{t.Added, "added"}, {t.Removed, "removed"}, {t.Moved, "moved"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	switch {
	case len(parts) > 0:
	case t.Old != nil && t.New != nil && *t.Old == *t.New:
		return "none"
	default:
		return "alerts unchanged" // a shadow rule's crossings, or suppressions, changed
	}
	return strings.Join(parts, ", ")
}

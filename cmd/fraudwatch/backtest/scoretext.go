package backtest

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// writeOutcomes says what outcomes were read, and of the input's orders.
func writeOutcomes(w io.Writer, s Scores) {
	c := s.Outcomes
	fmt.Fprintf(w, "outcomes: %s", plural(c.Read, "record"))
	var notes []string
	if len(c.Refused) > 0 {
		total := 0
		var parts []string
		for _, r := range slices.Sorted(maps.Keys(c.Refused)) {
			total += c.Refused[r]
			parts = append(parts, fmt.Sprintf("%s %d", r, c.Refused[r]))
		}
		notes = append(notes, fmt.Sprintf("%d refused: %s", total, strings.Join(parts, ", ")))
	}
	if c.Replaced > 0 {
		notes = append(notes, fmt.Sprintf("%d replaced by a later outcome of their order", c.Replaced))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(notes, "; "))
	}
	fmt.Fprintf(w, ", %s with one; %s in the input", plural(c.Orders, "order"), plural(s.FraudOrders, "fraud order"))
	if c.NotInInput > 0 {
		fmt.Fprintf(w, ", %d fraud not in it (not in recall)", c.NotInInput)
	}
	fmt.Fprintln(w)
}

// scoreHead is the head of a table of scores, after its first column.
const scoreHead = "ALERTS\tA DAY\tFRAUD\tLEGIT\tUNCLEAR\tPRECISION\tCAUGHT\tRECALL"

// scoreCells are a rule's figures under scoreHead.
func scoreCells(r RuleScore) []string {
	return []string{fmt.Sprint(r.Alerts), decimal(r.AlertsPerDay), fmt.Sprint(r.FraudAlerts), fmt.Sprint(r.LegitAlerts),
		fmt.Sprint(r.UnclearAlerts), percent(r.Precision), fmt.Sprint(r.FraudOrdersCaught), percent(r.Recall)}
}

// ruleName is a rule's name in a table of scores; a shadow rule's row
// says how many of its alerts are crossings it did not send.
func ruleName(r RuleScore) string {
	if r.ShadowCrossings > 0 {
		return fmt.Sprintf("%s (%d shadow)", r.Rule, r.ShadowCrossings)
	}
	return r.Rule
}

// writeScores writes each rule's figures and the fraud orders no rule
// caught.
func writeScores(w io.Writer, s Scores) error {
	fmt.Fprintf(w, "\nscores (docs/outcomes.md):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\t"+scoreHead)
	for _, r := range s.Rules {
		fmt.Fprintf(tw, "%s\t%s\n", ruleName(r), strings.Join(scoreCells(r), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeMissed(w, s)
	return nil
}

// writeMissed names the fraud orders no rule caught.
func writeMissed(w io.Writer, s Scores) {
	fmt.Fprintf(w, "fraud orders no rule caught: %d of %d", s.Missed, s.FraudOrders)
	if s.Missed > 0 {
		more := ""
		if s.Missed > len(s.MissedOrders) {
			more = ", …"
		}
		fmt.Fprintf(w, " (%s%s)", strings.Join(s.MissedOrders, ", "), more)
	}
	fmt.Fprintln(w)
}

// writeScoresCompare sets two rule sets' scores side by side, old → new,
// every rule of new, then those of old alone ("-" where a set has no such
// rule).
func writeScoresCompare(w io.Writer, from string, old, new Scores) error {
	fmt.Fprintf(w, "\nscores against %s, old → new:\n", from)
	var names []string
	olds, news := map[string]RuleScore{}, map[string]RuleScore{}
	for _, r := range new.Rules {
		names, news[r.Rule] = append(names, r.Rule), r
	}
	for _, r := range old.Rules {
		if _, ok := news[r.Rule]; !ok {
			names = append(names, r.Rule)
		}
		olds[r.Rule] = r
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\t"+scoreHead)
	for _, name := range names {
		o, inOld := olds[name]
		n, inNew := news[name]
		oc, nc := scoreCells(o), scoreCells(n)
		cells := make([]string, len(oc))
		for i := range cells {
			cells[i] = side(inOld, oc[i]) + " → " + side(inNew, nc[i])
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "fraud orders no rule caught: %d → %d of %d\n", old.Missed, new.Missed, new.FraudOrders)
	return nil
}

func side(in bool, cell string) string {
	if !in {
		return "-"
	}
	return cell
}

// decimal is v to a tenth; "-" for none.
func decimal(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}

// percent is a ratio as a percentage to a tenth; "-" for none.
func percent(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100**v)
}

package backtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// compareInput is a fixed input for comparisons: per card, orders whose
// amounts pass 700 one order before they pass 1,000 (k1, k2), or pass 700
// alone (k3); and an invalid line.
func compareInput() string {
	var lines []string
	add := func(customer, card string, amount int64, ats ...time.Duration) {
		for _, at := range ats {
			lines = append(lines, line(fmt.Sprint(customer, len(lines)), "", customer, card, amount, at))
		}
	}
	add("a", "k1", 400, 0, 10*time.Second, 20*time.Second)
	add("b", "k2", 300, 30*time.Second, 31*time.Second, 32*time.Second, 33*time.Second)
	add("c", "k3", 800, 40*time.Second)
	return strings.Join(append(lines, "{"), "\n")
}

// compareRules are an amount rule of the given threshold and mode, and
// burst, which crosses at a2 and b5 whatever the threshold; without
// amount, burst alone.
func compareRules(t *testing.T, amount int, mode string) Options {
	rule := ""
	if amount > 0 {
		rule = fmt.Sprintf("  - {name: amount-per-card, metric: amount, group_by: [card_fingerprint], window: 10m, threshold: %d, mode: %s}\n",
			amount, cmp.Or(mode, "alert"))
	}
	return parseRules(t, "rules:\n"+rule+"  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 3}\n")
}

// compareJSON is the JSON of a comparison, each alert as the text has it.
type compareJSON struct {
	Old, New replayJSON
	Compare  struct {
		Added, Removed []Alert
		Moved          []Move
		Totals         []RuleTotals
	}
}

func TestCompare(t *testing.T) {
	const k1Moved = "amount-per-card card_fingerprint=k1 20s 1200 o-a2 → 10s 800 o-a1"
	const k2Moved = "amount-per-card card_fingerprint=k2 33s 1200 o-b6 → 32s 900 o-b5"
	tests := []struct {
		name     string
		old, new int    // amount's threshold, 0 for no such rule
		mode     string // amount's
		added    []string
		removed  []string
		moved    []string
		totals   []string // rule, crossings, alerts, cooldown and shadow old → new, changes
		headline string
	}{{
		name: "a lowered threshold moves every alert earlier", old: 1000, new: 700,
		added: []string{"40s amount-per-card card_fingerprint=k3 800 o-c7"},
		moved: []string{k1Moved, k2Moved},
		totals: []string{"amount-per-card  2 → 3  2 → 3  0 → 0  0 → 0  1 added, 2 moved",
			"burst  2 → 2  2 → 2  0 → 0  0 → 0  none"},
		headline: "alerts: 1 added, 0 removed, 2 moved",
	}, {
		name: "a raised threshold moves them back", old: 700, new: 1000,
		removed: []string{"40s amount-per-card card_fingerprint=k3 800 o-c7"},
		moved: []string{"amount-per-card card_fingerprint=k1 10s 800 o-a1 → 20s 1200 o-a2",
			"amount-per-card card_fingerprint=k2 32s 900 o-b5 → 33s 1200 o-b6"},
		totals: []string{"amount-per-card  3 → 2  3 → 2  0 → 0  0 → 0  1 removed, 2 moved",
			"burst  2 → 2  2 → 2  0 → 0  0 → 0  none"},
		headline: "alerts: 0 added, 1 removed, 2 moved",
	}, {
		name: "the same rules change nothing", old: 1000, new: 1000,
		totals: []string{"amount-per-card  2 → 2  2 → 2  0 → 0  0 → 0  none",
			"burst  2 → 2  2 → 2  0 → 0  0 → 0  none"},
		headline: "alerts: 0 added, 0 removed, 0 moved",
	}, {
		name: "a shadow rule's crossings move, its alerts do not", old: 1000, new: 700, mode: "shadow",
		totals: []string{"amount-per-card  2 → 3  0 → 0  0 → 0  2 → 3  alerts unchanged",
			"burst  2 → 2  2 → 2  0 → 0  0 → 0  none"},
		headline: "alerts: 0 added, 0 removed, 0 moved",
	}, {
		name: "a rule gone removes its alerts", old: 1000, new: 0,
		removed: []string{"20s amount-per-card card_fingerprint=k1 1200 o-a2", "33s amount-per-card card_fingerprint=k2 1200 o-b6"},
		totals: []string{"burst  2 → 2  2 → 2  0 → 0  0 → 0  none",
			"amount-per-card  2 → -  2 → -  0 → -  0 → -  2 removed"},
		headline: "alerts: 0 added, 2 removed, 0 moved",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := compareRules(t, tt.new, tt.mode)
			o.Compare, o.CompareFrom = compareRules(t, tt.old, tt.mode).Rules, "old.yaml"
			text := run(t, o, compareInput())
			o.Format = "json"
			var got compareJSON
			if err := json.Unmarshal([]byte(run(t, o, compareInput())), &got); err != nil {
				t.Fatal(err)
			}
			d := got.Compare
			check := func(what string, got, want []string) {
				t.Helper()
				if !slices.Equal(got, want) && len(got)+len(want) > 0 {
					t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			check("added", alertTexts(d.Added), tt.added)
			check("removed", alertTexts(d.Removed), tt.removed)
			var moved, totals []string
			for _, m := range d.Moved {
				moved = append(moved, fmt.Sprintf("%s %s %v %d %s → %v %d %s", m.Rule, m.Group,
					m.Old.At.Sub(t0), m.Old.Value, m.Old.Order, m.New.At.Sub(t0), m.New.Value, m.New.Order))
				if m.Old.Rule != m.Rule || m.New.Rule != m.Rule || m.Old.Group != m.Group || m.New.Group != m.Group {
					t.Errorf("a move of %s %s pairs %+v with %+v", m.Rule, m.Group, m.Old, m.New)
				}
			}
			check("moved", moved, tt.moved)
			for _, r := range d.Totals {
				totals = append(totals, totalsText(r))
			}
			check("totals", totals, tt.totals)

			// The text says the same, aligned.
			if !strings.Contains(text, "\nagainst old.yaml, "+tt.headline+"\n") {
				t.Errorf("text does not say %q:\n%s", tt.headline, text)
			}
			for prefix, lines := range map[string][]string{"": tt.totals, "+ ": tt.added, "- ": tt.removed, "~ ": tt.moved} {
				for _, want := range lines {
					if textLine(text, prefix, want) == "" {
						t.Errorf("text has no line %q%s:\n%s", prefix, want, text)
					}
				}
			}
			// The totals' columns start where the first row's do.
			first := textLine(text, "", tt.totals[0])
			for _, want := range tt.totals[1:] {
				if row := textLine(text, "", want); strings.Index(row, "→") != strings.Index(first, "→") {
					t.Errorf("totals not aligned:\n%s\n%s", first, row)
				}
			}
		})
	}
}

// alertTexts are alerts as the tests write them: time after t0, rule,
// group, value, order.
func alertTexts(alerts []Alert) []string {
	var out []string
	for _, a := range alerts {
		out = append(out, fmt.Sprintf("%v %s %s %d %s", a.At.Sub(t0), a.Rule, a.Group, a.Value, a.Order))
	}
	return out
}

func totalsText(r RuleTotals) string {
	side := func(c *Counts, n func(Counts) int) string {
		if c == nil {
			return "-"
		}
		return fmt.Sprint(n(*c))
	}
	var cells []string
	for _, n := range []func(Counts) int{
		func(c Counts) int { return c.Crossings }, func(c Counts) int { return c.Sent },
		func(c Counts) int { return c.Cooldown }, func(c Counts) int { return c.Shadow },
	} {
		cells = append(cells, side(r.Old, n)+" → "+side(r.New, n))
	}
	return fmt.Sprintf("%s  %s  %s", r.Rule, strings.Join(cells, "  "), changes(r))
}

// textLine is the line of text of prefix and want's words, in order,
// apart by spaces, with times after t0 printed as stamps; "" if none.
func textLine(text, prefix, want string) string {
	var words []string
	for _, w := range strings.Fields(want) {
		if d, err := time.ParseDuration(w); err == nil && strings.HasSuffix(w, "s") {
			w = stamp(t0.Add(d))
		}
		words = append(words, regexp.QuoteMeta(w))
	}
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + strings.Join(words, ` +`) + `$`).FindString(text)
}

// With --compare, the JSON holds both replays, old and new, each as a
// plain backtest's JSON has it, and the comparison, whose lists are [] when
// empty.
func TestCompareJSON(t *testing.T) {
	fields := func(data []byte) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	keys := func(data []byte) []string { return slices.Sorted(maps.Keys(fields(data))) }
	o := compareRules(t, 700, "")
	o.Format = "json"
	plain := keys([]byte(run(t, o, compareInput())))
	for _, old := range []struct {
		threshold, crossings int // amount's
	}{{1000, 2}, {700, 3}} {
		o.Compare, o.CompareFrom = compareRules(t, old.threshold, "").Rules, "old.yaml"
		out := []byte(run(t, o, compareInput()))
		got := fields(out)
		for _, c := range []struct {
			what      string
			got, want []string
		}{
			{"the comparison's", keys(out), []string{"compare", "new", "old"}},
			{"old's", keys(got["old"]), plain},
			{"new's", keys(got["new"]), plain},
			{"compare's", keys(got["compare"]), []string{"added", "moved", "removed", "totals"}},
		} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("against %d: %s fields %v, want %v", old.threshold, c.what, c.got, c.want)
			}
		}
		for k, v := range fields(got["compare"]) {
			if string(v) == "null" {
				t.Errorf("against %d: compare.%s is null", old.threshold, k)
			}
		}
		var both compareJSON
		if err := json.Unmarshal(out, &both); err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			r         replayJSON
			from      string
			crossings int
		}{{both.Old, "old.yaml", old.crossings}, {both.New, "rules.yaml", 3}} {
			if r.r.RulesFrom != r.from || r.r.Invalid["malformed_json"] != 1 || r.r.Orders != 8 ||
				len(r.r.Report.Rules) != 2 || r.r.Report.Rules[0].Crossings != r.crossings {
				t.Errorf("against %d: %s's replay: %+v", old.threshold, r.from, r.r)
			}
		}
	}
}

// A pair of alerts moved when any of order, event, time or value differ.
func TestMoved(t *testing.T) {
	a := Alert{At: t0, Rule: "r", Group: "g", Value: 5, Order: "o", Event: "e", Outcome: "sent"}
	tests := []struct {
		name  string
		other func(*Alert)
		moved bool
	}{
		{"the same", func(*Alert) {}, false},
		{"the same time in another zone", func(b *Alert) { b.At = t0.In(time.FixedZone("", 3600)) }, false},
		{"another order", func(b *Alert) { b.Order = "p" }, true},
		{"another event", func(b *Alert) { b.Event = "f" }, true},
		{"another time", func(b *Alert) { b.At = t0.Add(time.Millisecond) }, true},
		{"another value", func(b *Alert) { b.Value = 6 }, true},
	}
	for _, tt := range tests {
		b := a
		tt.other(&b)
		if got := moved(a, b); got != tt.moved {
			t.Errorf("%s: moved %v, want %v", tt.name, got, tt.moved)
		}
	}
}

package backtest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseSweep(t *testing.T) {
	tests := []struct {
		spec, values, err string
	}{
		{"burst:threshold=2..10", "2 3 4 5 6 7 8 9 10", ""},
		{"burst:threshold=2,4,8", "2 4 8", ""},
		{"burst:threshold=10..40/10", "10 20 30 40", ""},
		{"burst:threshold=5..5", "5", ""},
		{"burst:window=1m,5m,10m", "1m 5m 10m", ""},
		{"burst:window=1m..3m/30s", "1m 1m30s 2m 2m30s 3m", ""},
		{"burst:window=90s,1h", "1m30s 1h", ""},
		{"burst", "", "is not RULE:SETTING=VALUES"},
		{"burst:threshold", "", "is not RULE:SETTING=VALUES"},
		{"burst:threshold=", "", "is not RULE:SETTING=VALUES"},
		{"burst:cooldown=1m", "", "the setting is threshold or window"},
		{"burst:window=1m..10m", "", "needs a positive step"},
		{"burst:threshold=10..2", "", "ends before it starts"},
		{"burst:threshold=1..1000", "", "of more than 100 values"},
		{"burst:threshold=2,x", "", `a value "x"`},
		{"burst:window=1m..2m/0s", "", "needs a positive step"},
	}
	for _, tt := range tests {
		s, err := ParseSweep(tt.spec)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error saying %q", tt.spec, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.spec, err)
		case tt.err == "" && strings.Join(s.Values, " ") != tt.values:
			t.Errorf("%s: values %v, want %s", tt.spec, s.Values, tt.values)
		}
	}
}

// A value a rule cannot take is refused as its rules file would be.
func TestSweepRefusesWhatARuleCannotTake(t *testing.T) {
	o := parseRules(t, `rules:
  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 3}
  - {name: cards, metric: distinct, field: card_fingerprint, group_by: [customer_id], window: 1m, threshold: 3}
  - {name: late, metric: count, group_by: [customer_id], window_type: sliding, window: 10s, allowed_lateness: 10m, threshold: 3}
`)
	for spec, want := range map[string]string{
		"burst:threshold=0,3":   "threshold must be between 1 and",
		"cards:threshold=20000": "cards's threshold must be between 1 and 10000,",
		"burst:window=1500ms":   "must be a whole number of seconds",
		"late:window=5s":        "shorter than its allowed_lateness",
		"nobody:threshold=3":    `no rule "nobody"`,
	} {
		s, err := ParseSweep(spec)
		if err != nil {
			t.Fatal(err)
		}
		o.Sweep = s
		var out strings.Builder
		o.Input, o.Out, o.Now = strings.NewReader(line("a", "", "x", "k", 1, 0)), &out, now
		if err := Run(t.Context(), o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
}

// withSetting is everyKind with one setting of one rule changed, as a user
// would write it.
func withSetting(t *testing.T, rule, setting, value string) string {
	t.Helper()
	re := regexp.MustCompile(`\b` + setting + `: [^,}]+`)
	var out []string
	changed := false
	for _, l := range strings.Split(everyKind, "\n") {
		if strings.Contains(l, "name: "+rule+",") {
			l, changed = re.ReplaceAllString(l, setting+": "+value), true
		}
		out = append(out, l)
	}
	if !changed {
		t.Fatalf("no rule %s", rule)
	}
	return strings.Join(out, "\n")
}

// A sweep's rows are what backtests of rules files with each value give:
// each row against a separate, plain backtest of all the rules, with the
// setting written into the file.
func TestSweepEqualsSeparateBacktests(t *testing.T) {
	lines := randomHistory(2, 800, true)
	evs, err := Read(strings.NewReader(strings.Join(lines, "\n")), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range evs.list {
		if rec.order != "" && i%4 == 0 {
			lines = append(lines, fmt.Sprintf(`{"type":"outcome","order_id":%q,"outcome":%q,"source":"t","occurred_at":"2026-03-02T00:00:00Z"}`,
				rec.order, []string{"fraud", "legit", "fraud", "unclear"}[i%16/4]))
		}
	}
	input := strings.Join(lines, "\n")
	for _, spec := range []string{"count-fixed:threshold=2..10", "amount-fixed:window=30s..2m/30s", "count-sliding:window=30s,90s,3m",
		"cards-sliding:threshold=1,2,3", "shadow:threshold=2,3"} {
		s, err := ParseSweep(spec)
		if err != nil {
			t.Fatal(err)
		}
		o := parseRules(t, everyKind)
		o.Format, o.Now, o.Sweep = "json", now, s
		var got struct{ Sweep SweepReport }
		if err := json.Unmarshal([]byte(run(t, o, input)), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Sweep.Rows) != len(s.Values) {
			t.Fatalf("%s: %d rows, want %d", spec, len(got.Sweep.Rows), len(s.Values))
		}
		alerts := 0
		for i, row := range got.Sweep.Rows {
			separate := scoredRun(t, withSetting(t, s.Rule, s.Setting, s.Values[i]), Model, lines).Scores
			var want RuleScore
			for _, r := range separate.Rules {
				if r.Rule == s.Rule {
					want = r
				}
			}
			if row.Value != s.Values[i] || !reflect.DeepEqual(row.RuleScore, want) {
				t.Errorf("%s=%s: the sweep's row %+v\nthe backtest's %+v", spec, s.Values[i], row.RuleScore, want)
			}
			alerts += row.Alerts
		}
		if alerts == 0 || got.Sweep.FraudOrders == 0 {
			t.Errorf("%s: %d alerts, %d fraud orders: the input tests too little", spec, alerts, got.Sweep.FraudOrders)
		}
	}
}

// --max-alerts-per-day marks the rows within it and names the best recall
// among them.
func TestSweepBudget(t *testing.T) {
	s := time.Second
	// x's 5 orders cross at 1 to 5; at 1 every order starts its own window
	// (2 minutes apart), a day of event time.
	var lines []string
	for i, at := range []time.Duration{0, 10 * s, 20 * s, 30 * s, 40 * s} {
		lines = append(lines, orders("x", at)...)
		lines = append(lines, outcomeLine(fmt.Sprint("x", i*10), "fraud", 0))
	}
	lines = append(lines, orders("y", 24*time.Hour)...)
	for _, tt := range []struct {
		budget float64
		within string
		best   string
	}{
		// At 1, x's and y's first orders cross, 2 alerts a day; at 2 to 5,
		// x's alone, and every fraud order is caught: the fewest alerts a
		// day, then the first.
		{1, "false true true true true true", "2"},
		{0.5, "false false false false false true", "6"}, // no alert: recall 0
		{10, "true true true true true true", "2"},
	} {
		sw, err := ParseSweep("burst:threshold=1..6")
		if err != nil {
			t.Fatal(err)
		}
		o := parseRules(t, burstYAML)
		o.Format, o.Now, o.Sweep, o.MaxAlertsPerDay = "json", now, sw, &tt.budget
		var got struct{ Sweep SweepReport }
		if err := json.Unmarshal([]byte(run(t, o, strings.Join(lines, "\n"))), &got); err != nil {
			t.Fatal(err)
		}
		var within []string
		for _, r := range got.Sweep.Rows {
			within = append(within, fmt.Sprint(*r.WithinBudget))
		}
		best := ""
		if got.Sweep.Best != nil {
			best = *got.Sweep.Best
		}
		if strings.Join(within, " ") != tt.within || best != tt.best {
			t.Errorf("budget %v: within %v, best %q; want %s, %q", tt.budget, within, best, tt.within, tt.best)
		}
		o.Format = "text"
		text := run(t, o, strings.Join(lines, "\n"))
		if say := "best recall within"; (best != "") != strings.Contains(text, say+" "+decimal(&tt.budget)+" alerts a day: threshold="+best) {
			t.Errorf("budget %v: the text does not name the best, %q:\n%s", tt.budget, best, text)
		}
	}
}

// A sweep replays its rule under the rule sets a recording carries: here
// one its reload adds, which the first set lacks.
func TestSweepOfARuleAReloadAdds(t *testing.T) {
	input := strings.Join([]string{
		rulesLineAt(t, -time.Second, "v1", "rules:\n  - {name: other, metric: count, group_by: [ip], window: 1m, threshold: 9}\n"),
		line("a1", "", "a", "k", 1, 10*time.Second),
		line("a2", "", "a", "k", 1, 11*time.Second),
		rulesLineAt(t, 30*time.Second, "v2", rulesV2),
		line("b1", "", "b", "k", 1, 31*time.Second),
		line("b2", "", "b", "k", 1, 32*time.Second),
		outcomeLine("b1", "fraud", 0),
	}, "\n")
	s, err := ParseSweep("burst:threshold=1,2,3")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{InputName: "events.jsonl", Format: "json", Now: now, Sweep: s}
	var got struct{ Sweep SweepReport }
	if err := json.Unmarshal([]byte(run(t, o, input)), &got); err != nil {
		t.Fatal(err)
	}
	var alerts []int
	for _, r := range got.Sweep.Rows {
		alerts = append(alerts, r.Alerts)
	}
	// a's orders came before burst was in force; at 1, b1 crosses, at 2, b2.
	if fmt.Sprint(alerts) != "[1 1 0]" || *got.Sweep.Rows[1].Recall != 1 {
		t.Errorf("alerts %v, recall at 2 %v; want [1 1 0], 1", alerts, *got.Sweep.Rows[1].Recall)
	}
}

package backtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// outcomeLine is an outcome record of order o-id, at after t0 plus a day
// (chargebacks come later than their orders).
func outcomeLine(id, label string, at time.Duration) string {
	return fmt.Sprintf(`{"type":"outcome","order_id":"o-%s","outcome":%q,"source":"chargeback","occurred_at":%q}`,
		id, label, t0.Add(24*time.Hour+at).Format(time.RFC3339Nano))
}

// orders are orders of customer (and card) c, x-named by their times.
func orders(c string, ats ...time.Duration) []string {
	var out []string
	for _, at := range ats {
		out = append(out, line(fmt.Sprintf("%s%d", c, at/time.Second), "", c, "k-"+c, 100, at))
	}
	return out
}

// scoredRun is a scored backtest's JSON of lines under the rules.
func scoredRun(t *testing.T, yaml string, e Engine, lines []string) replayJSON {
	t.Helper()
	o := parseRules(t, yaml)
	o.Format, o.Engine, o.Now = "json", e, now
	var got replayJSON
	if err := json.Unmarshal([]byte(run(t, o, strings.Join(lines, "\n"))), &got); err != nil {
		t.Fatal(err)
	}
	if got.Scores == nil {
		t.Fatal("not scored")
	}
	return got
}

const burstYAML = `rules:
  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 3, cooldown: 5m}
`

// figures are a rule's figures as the definitions tests check them:
// alerts, fraud, legit and unclear alerts, fraud orders caught.
func figures(r RuleScore) string {
	return fmt.Sprintf("alerts %d, fraud %d, legit %d, unclear %d, caught %d", r.Alerts, r.FraudAlerts, r.LegitAlerts, r.UnclearAlerts, r.FraudOrdersCaught)
}

// The definitions of docs/outcomes.md, each on a hand-made input: x's
// orders at 0, 10 and 20 s cross burst (3 in a fixed minute) at 20 s.
func TestScoreDefinitions(t *testing.T) {
	s := time.Second
	crossing := orders("x", 0, 10*s, 20*s)
	tests := []struct {
		name     string
		yaml     string
		lines    []string
		want     string // burst's figures
		fraud    int    // fraud orders of the input
		missed   string // missed orders
		notInput int
	}{
		{"an alert is fraud when an order it lists is", burstYAML,
			slices.Concat(crossing, L(outcomeLine("x10", "fraud", 0), outcomeLine("x0", "legit", 0))),
			"alerts 1, fraud 1, legit 0, unclear 0, caught 1", 1, "", 0},
		{"legit when those with an outcome all are", burstYAML,
			slices.Concat(crossing, L(outcomeLine("x0", "legit", 0), outcomeLine("x20", "legit", 0))),
			"alerts 1, fraud 0, legit 1, unclear 0, caught 0", 0, "", 0},
		{"unclear otherwise", burstYAML,
			slices.Concat(crossing, L(outcomeLine("x0", "unclear", 0), outcomeLine("x20", "legit", 0))),
			"alerts 1, fraud 0, legit 0, unclear 1, caught 0", 0, "", 0},
		{"no verdict when no order it lists has an outcome", burstYAML,
			slices.Concat(crossing, orders("y", 5*s), L(outcomeLine("y5", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 0", 1, "o-y5", 0},
		{"a later outcome replaces the earlier", burstYAML,
			slices.Concat(crossing, L(outcomeLine("x0", "fraud", 0), outcomeLine("x0", "legit", time.Hour))),
			"alerts 1, fraud 0, legit 1, unclear 0, caught 0", 0, "", 0},
		{"by its time, not its line", burstYAML,
			slices.Concat(crossing, L(outcomeLine("x0", "legit", time.Hour), outcomeLine("x0", "fraud", 0))),
			"alerts 1, fraud 0, legit 1, unclear 0, caught 0", 0, "", 0},
		{"of one time, the first", burstYAML,
			slices.Concat(crossing, L(outcomeLine("x0", "legit", 0), outcomeLine("x0", "fraud", 0))),
			"alerts 1, fraud 0, legit 1, unclear 0, caught 0", 0, "", 0},
		{"a fraud outcome of an order not in the input is not in recall", burstYAML,
			slices.Concat(crossing, L(outcomeLine("gone", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 0", 0, "", 1},
		{"caught after the crossing, in its fixed window", burstYAML,
			slices.Concat(crossing, orders("x", 59*s), L(outcomeLine("x59", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 1", 1, "", 0},
		{"not once the fixed window ends, a minute after its first order", burstYAML,
			slices.Concat(crossing, orders("x", 60*s), L(outcomeLine("x60", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 0", 1, "o-x60", 0},
		{"a crossing in cooldown is no alert", burstYAML,
			slices.Concat(crossing, orders("x", 70*s, 80*s, 90*s), L(outcomeLine("x80", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 0", 1, "o-x80", 0},
		{"a new fixed window's alert lists its own orders only", burstYAML,
			slices.Concat(orders("x", 0, 10*s, 70*s, 80*s, 90*s), L(outcomeLine("x10", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 0", 1, "o-x10", 0},
		{"an alert lists the rule's evidence, not the whole window", `rules:
  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 3, evidence: 2}
`, slices.Concat(crossing, L(outcomeLine("x0", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 0", 1, "o-x0", 0},
		{"caught in a sliding window that holds the crossing", `rules:
  - {name: burst, metric: count, group_by: [customer_id], window_type: sliding, window: 1m, threshold: 3}
`, slices.Concat(crossing, orders("x", 79*s, 80*s), L(outcomeLine("x79", "fraud", 0), outcomeLine("x80", "fraud", 0))),
			"alerts 1, fraud 0, legit 0, unclear 0, caught 1", 2, "o-x80", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, e := range engines {
				got := scoredRun(t, tt.yaml, e.e, tt.lines).Scores
				if f := figures(got.Rules[0]); f != tt.want {
					t.Errorf("%s: %s, want %s", e.name, f, tt.want)
				}
				missed := strings.Join(got.MissedOrders, ",")
				if got.FraudOrders != tt.fraud || missed != tt.missed || got.Missed != len(got.MissedOrders) || got.Outcomes.NotInInput != tt.notInput {
					t.Errorf("%s: %d fraud orders, missed %q (%d), %d not in the input; want %d, %q, %d",
						e.name, got.FraudOrders, missed, got.Missed, got.Outcomes.NotInInput, tt.fraud, tt.missed, tt.notInput)
				}
			}
		})
	}
}

// Precision is over the alerts with a verdict, recall over the input's
// fraud orders; alerts a day over the input's span; a shadow rule's row
// scores its crossings.
func TestScoreRatios(t *testing.T) {
	s := time.Second
	yaml := burstYAML + "  - {name: big, metric: amount, group_by: [card_fingerprint], window: 1m, threshold: 250, mode: shadow}\n"
	lines := slices.Concat(orders("x", 0, 10*s, 20*s), orders("y", 30*s, 31*s, 32*s), orders("z", 40*s, 41*s, 42*s),
		orders("w", 12*time.Hour), L(outcomeLine("x10", "fraud", 0), outcomeLine("y31", "legit", 0), outcomeLine("w43200", "fraud", 0)))
	for _, e := range engines {
		got := scoredRun(t, yaml, e.e, lines).Scores
		burst, big := got.Rules[0], got.Rules[1]
		// x fraud, y legit, z no verdict; w's order, fraud, no rule caught.
		if figures(burst) != "alerts 3, fraud 1, legit 1, unclear 0, caught 1" || *burst.Precision != 0.5 || *burst.Recall != 0.5 ||
			*burst.AlertsPerDay != 6 || burst.ShadowCrossings != 0 {
			t.Errorf("%s: burst %s, precision %v, recall %v, %v a day", e.name, figures(burst), *burst.Precision, *burst.Recall, *burst.AlertsPerDay)
		}
		if figures(big) != "alerts 3, fraud 1, legit 1, unclear 0, caught 1" || big.ShadowCrossings != 3 {
			t.Errorf("%s: big %s, %d shadow crossings, want its 3 crossings scored", e.name, figures(big), big.ShadowCrossings)
		}
		if got.Days != 0.5 || got.FraudOrders != 2 || strings.Join(got.MissedOrders, ",") != "o-w43200" {
			t.Errorf("%s: %v days, %d fraud orders, missed %v", e.name, got.Days, got.FraudOrders, got.MissedOrders)
		}
	}
	// No verdict, no fraud order: neither ratio.
	got := scoredRun(t, burstYAML, Model, slices.Concat(orders("x", 0, 10*s, 20*s), L(outcomeLine("q", "legit", 0)))).Scores
	if r := got.Rules[0]; r.Alerts != 1 || r.Precision != nil || r.Recall != nil {
		t.Errorf("precision %v, recall %v, want none (null)", r.Precision, r.Recall)
	}
}

// L is its lines.
func L(lines ...string) []string { return lines }

// The JSON of a scored backtest has the names docs/backtest.md promises:
// what the demo and other tools read.
func TestScoresJSONShape(t *testing.T) {
	s := time.Second
	lines := slices.Concat(orders("x", 0, 10*s, 20*s), L(outcomeLine("x0", "fraud", 0), `{"type":"outcome","order_id":"o-x1"}`))
	keys := func(m map[string]any) string {
		return strings.Join(slices.Sorted(maps.Keys(m)), " ")
	}
	o := parseRules(t, burstYAML)
	o.Format, o.Now = "json", now
	var plain map[string]any
	if err := json.Unmarshal([]byte(run(t, o, strings.Join(lines, "\n"))), &plain); err != nil {
		t.Fatal(err)
	}
	scores := plain["scores"].(map[string]any)
	rule := scores["rules"].([]any)[0].(map[string]any)
	outcomes := scores["outcomes"].(map[string]any)
	alert := plain["report"].(map[string]any)["alerts"].([]any)[0].(map[string]any)
	for _, c := range []struct{ what, got, want string }{
		{"scores", keys(scores), "days fraud_orders missed missed_orders outcomes rules"},
		{"a rule's scores", keys(rule), "alerts alerts_per_day fraud_alerts fraud_orders_caught legit_alerts precision recall rule shadow_crossings unclear_alerts"},
		{"outcomes", keys(outcomes), "not_in_input orders read refused replaced"},
		{"refused", fmt.Sprint(outcomes["refused"]), "map[missing_field:1]"},
		{"an alert", keys(alert), "at event_id group listed_orders order_id outcome rule value"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}

	sw, err := ParseSweep("burst:threshold=3,4")
	if err != nil {
		t.Fatal(err)
	}
	o.Sweep, o.MaxAlertsPerDay = sw, new(float64)
	var swept map[string]any
	if err := json.Unmarshal([]byte(run(t, o, strings.Join(lines, "\n"))), &swept); err != nil {
		t.Fatal(err)
	}
	sweep := swept["sweep"].(map[string]any)
	row := sweep["rows"].([]any)[1].(map[string]any)
	for _, c := range []struct{ what, got, want string }{
		{"sweep", keys(sweep), "best days fraud_orders max_alerts_per_day outcomes rows rule setting"},
		{"a row", keys(row), "alerts alerts_per_day fraud_alerts fraud_orders_caught legit_alerts precision recall rule shadow_crossings unclear_alerts value within_budget"},
		{"a row's nulls", fmt.Sprintf("%v %v %v", row["precision"], row["value"], row["within_budget"]), "<nil> 4 true"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
}

// --compare scores both rule sets, side by side in the text, each in its
// replay's JSON.
func TestCompareScores(t *testing.T) {
	s := time.Second
	lines := slices.Concat(orders("x", 0, 10*s, 20*s, 30*s), L(outcomeLine("x30", "fraud", 0), outcomeLine("x0", "legit", 0)))
	o := parseRules(t, `rules:
  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 4}
`)
	old := parseRules(t, burstYAML)
	o.Compare, o.CompareFrom, o.Now = old.Rules, "old.yaml", now
	text := run(t, o, strings.Join(lines, "\n"))
	for _, want := range []string{
		"scores against old.yaml, old → new:",
		// At 3, x0 to x20 listed, legit; x30 caught after. At 4, x30 listed.
		`burst\s+1 → 1\s+2880\.0 → 2880\.0\s+0 → 1\s+1 → 0\s+0 → 0\s+0\.0% → 100\.0%\s+1 → 1\s+100\.0% → 100\.0%\n`,
		"fraud orders no rule caught: 0 → 0 of 1",
	} {
		if !regexpMatch(want, text) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	o.Format = "json"
	var got struct{ Old, New replayJSON }
	if err := json.Unmarshal([]byte(run(t, o, strings.Join(lines, "\n"))), &got); err != nil {
		t.Fatal(err)
	}
	if got.Old.Scores == nil || got.New.Scores == nil || got.Old.Scores.Rules[0].LegitAlerts != 1 || got.New.Scores.Rules[0].FraudAlerts != 1 {
		t.Errorf("old %+v, new %+v", got.Old.Scores, got.New.Scores)
	}
}

// A scored text report says what was read, each rule's figures and the
// fraud orders no rule caught.
func TestScoresText(t *testing.T) {
	s := time.Second
	lines := slices.Concat(orders("x", 0, 10*s, 20*s), orders("y", 12*time.Hour),
		L(outcomeLine("x0", "fraud", 0), outcomeLine("y43200", "fraud", 0), outcomeLine("x0", "fraud", time.Hour),
			outcomeLine("gone", "fraud", 0), `{"type":"outcome","order_id":"o-x1","outcome":"maybe","source":"t","occurred_at":"2026-03-01T00:00:00Z"}`))
	o := parseRules(t, burstYAML)
	o.Now = now
	text := run(t, o, strings.Join(lines, "\n"))
	for _, want := range []string{
		"outcomes: 5 records (1 refused: invalid_outcome 1; 1 replaced by a later outcome of their order), 3 orders with one; 2 fraud orders in the input, 1 fraud not in it (not in recall)\n",
		"RULE   ALERTS  A DAY  FRAUD  LEGIT  UNCLEAR  PRECISION  CAUGHT  RECALL\nburst  1       2.0    1      0      0        100.0%     1       50.0%\n",
		"fraud orders no rule caught: 1 of 2 (o-y43200)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
}

// docs/outcomes.md's worked example, figure for figure.
func TestWorkedExample(t *testing.T) {
	const rules = `rules:
  - {name: burst, metric: count, group_by: [customer_id], window: 10m, threshold: 3}
  - {name: big-card, metric: amount, group_by: [card_fingerprint], window_type: sliding, window: 1h, threshold: 100000}
`
	var lines []string
	order := func(id, customer, card string, amount int, at string) {
		lines = append(lines, fmt.Sprintf(`{"event_id":"e%s","type":"order","order_id":"%s","customer_id":"%s","card_fingerprint":"%s","amount":%d,"occurred_at":"2026-03-%sZ"}`,
			id, id, customer, card, amount, at))
	}
	label := func(id, outcome, source, at string) {
		lines = append(lines, fmt.Sprintf(`{"type":"outcome","order_id":"%s","outcome":"%s","source":"%s","occurred_at":"2026-03-%sZ"}`,
			id, outcome, source, at))
	}
	order("o1", "ann", "k1", 20000, "01T10:00:00")
	order("o2", "ann", "k1", 30000, "01T10:02:00")
	order("o3", "ann", "k1", 40000, "01T10:04:00")
	order("o4", "ann", "k1", 25000, "01T10:06:00")
	order("o9", "ann", "k1", 30000, "01T10:12:00")
	order("o5", "bob", "k2", 5000, "01T10:01:00")
	order("o6", "bob", "k2", 5000, "01T10:03:00")
	order("o7", "bob", "k2", 5000, "01T10:05:00")
	order("o10", "dee", "k4", 10000, "01T10:20:00")
	order("o11", "dee", "k4", 10000, "01T10:21:00")
	order("o12", "dee", "k4", 10000, "01T10:22:00")
	order("o8", "cy", "k3", 80000, "02T10:00:00")
	label("o1", "fraud", "chargeback", "20T00:00:00")
	label("o4", "fraud", "chargeback", "20T00:00:00")
	label("o9", "fraud", "chargeback", "21T00:00:00")
	label("o8", "fraud", "chargeback", "22T00:00:00")
	label("o0", "fraud", "chargeback", "05T00:00:00")
	label("o5", "unclear", "manual_review", "02T09:00:00")
	label("o5", "legit", "manual_review", "03T09:00:00")
	label("o6", "legit", "manual_review", "02T09:00:00")
	label("o11", "unclear", "manual_review", "02T09:00:00")
	o := parseRules(t, rules)
	o.Now = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	text := run(t, o, strings.Join(lines, "\n"))
	want := `scores (docs/outcomes.md):
RULE      ALERTS  A DAY  FRAUD  LEGIT  UNCLEAR  PRECISION  CAUGHT  RECALL
burst     3       3.0    1      1      1        50.0%      2       50.0%
big-card  1       1.0    1      0      0        100.0%     2       50.0%
fraud orders no rule caught: 1 of 4 (o8)
`
	outcomes := "outcomes: 9 records (1 replaced by a later outcome of their order), 8 orders with one; 4 fraud orders in the input, " +
		"1 fraud not in it (not in recall)\n"
	if !strings.Contains(text, want) || !strings.Contains(text, outcomes) {
		t.Errorf("the worked example gives:\n%s\nwant, as docs/outcomes.md says:\n%s", text, want)
	}
	// The same through ReplayScored, as a caller in Go has it.
	evs, err := Read(strings.NewReader(strings.Join(lines, "\n")), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	outs := NewOutcomes(o.Now)
	for _, l := range evs.OutcomeLines {
		outs.Add(l)
	}
	_, scores, err := ReplayScored(t.Context(), []RuleSet{{Rules: o.Rules}}, evs, outs, Model, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := figures(scores.Rules[1]); f != "alerts 1, fraud 1, legit 0, unclear 0, caught 2" || scores.Missed != 1 {
		t.Errorf("ReplayScored: big-card %s, %d missed", f, scores.Missed)
	}
}

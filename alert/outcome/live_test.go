package outcome_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
)

// Quality's figures on a hand-made example (docs/outcomes.md, Live
// quality), over 7 and 30 days:
//
//	alert  opened  lists    outcome
//	A/a1   2d      o1       fraud    (o1 fraud, labelled 2d ago)
//	A/a2   10d     o2       legit
//	A/a3   3d      o3       unclear
//	A/a4   20d     o4, o8   fraud    (o4 unclear, o8 fraud labelled 15d ago)
//	B/b1   1d      o1, o5   fraud    (o5 legit)
//	B/b2   40d     o6       fraud    (o6 fraud labelled 40d ago)
//	B/b3   35d     o1       fraud    (o1 caught by B twice: once)
//
// and o7, fraud labelled 5d ago, listed by no alert.
func TestQualityOnAHandMadeExample(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	ctx := t.Context()
	now := time.Now()
	ago := func(days int) time.Time { return now.Add(-time.Duration(days) * 24 * time.Hour) }
	for _, a := range []struct {
		rule, event string
		days        int
		orders      []string
	}{
		{"A", "a1", 2, []string{"o1"}}, {"A", "a2", 10, []string{"o2"}}, {"A", "a3", 3, []string{"o3"}},
		{"A", "a4", 20, []string{"o4", "o8"}}, {"B", "b1", 1, []string{"o1", "o5"}}, {"B", "b2", 40, []string{"o6"}},
		{"B", "b3", 35, []string{"o1"}},
	} {
		al := alert.Alert{Rule: a.rule, EventID: a.event, OrderID: a.orders[0]}
		for _, o := range a.orders[1:] {
			al.Evidence = append(al.Evidence, alert.Evidence{OrderID: o})
		}
		if err := outcome.OpenAt(ctx, e.s, al, alert.Ref{Rule: a.rule, Group: "g", EventID: a.event}, ago(a.days)); err != nil {
			t.Fatal(err)
		}
	}
	fraudAt := map[string]int{"o1": 2, "o8": 15, "o6": 40, "o7": 5}
	for o, l := range map[string]alert.Label{"o1": alert.LabelFraud, "o2": alert.LabelLegit, "o3": alert.LabelUnclear,
		"o4": alert.LabelUnclear, "o5": alert.LabelLegit, "o6": alert.LabelFraud, "o7": alert.LabelFraud, "o8": alert.LabelFraud} {
		e.record(t, o, l, day(1))
	}
	for o, days := range fraudAt { // labelled days ago
		e.rdb.ZAddXX(ctx, e.keys.Outcomes().Fraud(), redis.Z{Score: float64(ago(days).UnixMilli()), Member: o})
	}
	week, month := 7*24*time.Hour, 30*24*time.Hour
	got, err := e.s.QualityOf(ctx, now, []string{"C"}, week, month)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"A 168h0m0s: alerts 2 fraud 1 legit 0 unclear 1 with 1 precision 1.00 fraud orders 2 caught 1 missed 1",
		"A 720h0m0s: alerts 4 fraud 2 legit 1 unclear 1 with 3 precision 0.67 fraud orders 3 caught 2 missed 1",
		"B 168h0m0s: alerts 1 fraud 1 legit 0 unclear 0 with 1 precision 1.00 fraud orders 2 caught 1 missed 1",
		"B 720h0m0s: alerts 1 fraud 1 legit 0 unclear 0 with 1 precision 1.00 fraud orders 3 caught 1 missed 2",
		"C 168h0m0s: alerts 0 fraud 0 legit 0 unclear 0 with 0 precision - fraud orders 2 caught 0 missed 2",
		"C 720h0m0s: alerts 0 fraud 0 legit 0 unclear 0 with 0 precision - fraud orders 3 caught 0 missed 3",
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, q := range got {
		if s := qualityText(q); s != want[i] || q.Truncated {
			t.Errorf("row %d:\n got %s (truncated %v)\nwant %s", i, s, q.Truncated, want[i])
		}
	}
	// Read the newest 4 alerts only: the month reaches past them.
	cut, err := outcome.NewStore(outcome.StoreConfig{KeyPrefix: e.pfx, MaxRead: 4}, e.scripts, e.lives, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := cut.Quality(ctx, now, week, month)
	if err != nil || len(rows) != 4 || rows[0].Truncated || !rows[1].Truncated || rows[2].Truncated || !rows[3].Truncated {
		t.Errorf("read cut at 4: %+v, %v; want the months truncated, the weeks whole", rows, err)
	}
}

func qualityText(q outcome.RuleQuality) string {
	p := "-"
	if q.Precision != nil {
		p = fmt.Sprintf("%.2f", *q.Precision)
	}
	return fmt.Sprintf("%s %v: alerts %d fraud %d legit %d unclear %d with %d precision %s fraud orders %d caught %d missed %d",
		q.Rule, q.Period, q.Alerts, q.Fraud, q.Legit, q.Unclear, q.WithOutcome, p, q.FraudOrders, q.Caught, q.Missed)
}

package outcome_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/lua"
)

// day is a time of the test's outcomes from the topic.
func day(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }

// A click labels the alert and every order it lists; the same click
// again, or the same outcome again from the topic, counts nothing; a
// different label counts once more. The alert's outcome counts once a
// change, and its time to a first outcome once.
func TestARelabelCountsOnce(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	ctx := t.Context()
	a, ref := e.send(t, "burst", "cust-1", "evt-1", "o-1", "o-2")
	steps := []struct {
		op                 alert.Op
		who                string
		fraud, legit       float64 // fraudwatch_outcomes_recorded_total{via=slack}
		alertFraud, alertL float64 // fraudwatch_alert_outcomes_total
	}{
		{alert.OpLabelFraud, "slack:U1", 2, 0, 1, 0},
		{alert.OpLabelFraud, "slack:U1", 2, 0, 1, 0},
		{alert.OpLabelFraud, "slack:U2", 2, 0, 1, 0},
		{alert.OpLabelLegit, "slack:U2", 2, 2, 1, 1},
	}
	var recorded []time.Time // o-1's, after each step
	for i, st := range steps {
		time.Sleep(3 * time.Millisecond) // a write of each step has a time of its own
		state, err := e.s.Change(ctx, ref, st.op, st.who)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if want, _ := st.op.Label(); state.Label != want {
			t.Errorf("step %d: the state's label %q, want %q", i, state.Label, want)
		}
		got := []float64{
			e.counter(t, "fraudwatch_outcomes_recorded_total", "via", "slack", "outcome", "fraud"),
			e.counter(t, "fraudwatch_outcomes_recorded_total", "via", "slack", "outcome", "legit"),
			e.counter(t, "fraudwatch_alert_outcomes_total", "rule", "burst", "outcome", "fraud"),
			e.counter(t, "fraudwatch_alert_outcomes_total", "rule", "burst", "outcome", "legit"),
		}
		if want := []float64{st.fraud, st.legit, st.alertFraud, st.alertL}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("step %d (%s by %s): counted %v, want %v", i, st.op, st.who, got, want)
		}
		o, err := e.s.Order(ctx, "o-1")
		if err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, o.RecordedAt)
	}
	// The same click again writes nothing: the orders' outcomes take the
	// label's own time, which a repeat does not move.
	if !recorded[1].Equal(recorded[0]) || !recorded[2].Equal(recorded[0]) || recorded[3].Equal(recorded[0]) {
		t.Errorf("o-1 written at %v: want the repeats to write nothing", recorded)
	}
	if n := e.counter(t, "fraudwatch_alert_outcome_seconds", "rule", "burst"); n != 1 {
		t.Errorf("time to a first outcome observed %v times, want once", n)
	}
	if e.pub.count() != len(steps) {
		t.Errorf("said %d changes, want %d: the receivers show each label", e.pub.count(), len(steps))
	}
	o, err := e.s.Order(ctx, "o-2")
	if err != nil || o.Label != alert.LabelLegit || o.Via != outcome.ViaSlack || o.By != "slack:U2" || o.Source != "slack" ||
		len(o.Alerts) != 1 || o.Alerts[0] != a.ID {
		t.Errorf("o-2: %+v, %v", o, err)
	}
	// The orders' outcomes took the label's time by Redis's clock, as
	// every replica reads it.
	if got, err := e.lives.Get(ctx, ref); err != nil || !o.OccurredAt.Equal(got.State.LabelledAt) {
		t.Errorf("o-2 occurred at %v, the label was given at %v (%v)", o.OccurredAt, got.State.LabelledAt, err)
	}
	// The topic says the same of o-1 again, later: not counted.
	if e.record(t, "o-1", alert.LabelLegit, time.Now().Add(time.Hour)) {
		t.Error("the same label again, later, changed the order")
	}
	if got := e.counter(t, "fraudwatch_outcomes_recorded_total", "via", "topic", "outcome", "legit"); got != 0 {
		t.Errorf("topic legit counted %v, want 0", got)
	}
}

// An older outcome does not replace a newer one; a newer one does, and
// judges the alert again, whichever way in it came.
func TestAnOlderOutcomeDoesNotReplaceANewer(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	a, _ := e.send(t, "burst", "cust-1", "evt-1", "o-1")
	if !e.record(t, "o-1", alert.LabelFraud, day(20)) {
		t.Fatal("the first outcome changed nothing")
	}
	if e.record(t, "o-1", alert.LabelLegit, day(10)) {
		t.Error("an older outcome replaced a newer one")
	}
	if got := e.outcomeOf(t, a.ID); got != "fraud" {
		t.Errorf("the alert is %q, want fraud", got)
	}
	if !e.record(t, "o-1", alert.LabelLegit, day(25)) || e.outcomeOf(t, a.ID) != "legit" {
		t.Error("a newer outcome did not replace the older one")
	}
	if got := e.counter(t, "fraudwatch_outcomes_recorded_total", "via", "topic", "outcome", "legit"); got != 1 {
		t.Errorf("legit counted %v, want 1", got)
	}
}

// An alert opened while its order's outcome is being recorded is judged
// by it, whichever comes first: the two run interleaved, many times.
func TestAConcurrentlyOpenedAlertIsNotMissed(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	const n = 60
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		order := fmt.Sprint("o-", i)
		// Both alerts list the order: one opens before, one races.
		e.send(t, "early", fmt.Sprint("c-", i), fmt.Sprint("e-", i), order)
		a, ref := e.claim(t, "late", fmt.Sprint("c-", i), fmt.Sprint("l-", i), order)
		ids[i] = a.ID
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := e.s.Opened(t.Context(), a, ref); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := e.s.Record(t.Context(), outcome.Outcome{OrderID: order, Label: alert.LabelFraud, Source: "chargeback",
				OccurredAt: day(1)}, outcome.ViaTopic, ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if got := e.outcomeOf(t, id); got != "fraud" {
			t.Errorf("%s is %q, want fraud", id, got)
		}
	}
	for _, rule := range []string{"early", "late"} {
		if got := e.counter(t, "fraudwatch_alert_outcomes_total", "rule", rule, "outcome", "fraud"); got != n {
			t.Errorf("%s: %v alerts counted fraud, want %d, each once", rule, got, n)
		}
	}
}

// The orders kept stay within max_orders: the oldest written go first,
// counted.
func TestTheBoundsDropTheOldestAndCount(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{MaxOrders: 3})
	for i := range 5 {
		e.record(t, fmt.Sprint("o-", i), alert.LabelLegit, day(1+i))
		time.Sleep(2 * time.Millisecond) // a time of its own
	}
	if got := e.counter(t, "fraudwatch_outcomes_dropped_total"); got != 2 {
		t.Errorf("dropped %v, want 2", got)
	}
	list, err := e.s.List(t.Context(), outcome.ListOptions{})
	if err != nil || len(list) != 3 || list[0].OrderID != "o-4" || list[2].OrderID != "o-2" {
		t.Errorf("list %+v, %v; want o-4, o-3, o-2", list, err)
	}
	if _, err := e.s.Order(t.Context(), "o-0"); !errors.Is(err, outcome.ErrUnknown) {
		t.Errorf("o-0: %v, want ErrUnknown (dropped)", err)
	}
}

// List shows the newest first, of one label when asked, since a time.
func TestList(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	labels := []alert.Label{alert.LabelFraud, alert.LabelLegit, alert.LabelFraud, alert.LabelUnclear, alert.LabelLegit}
	var mid time.Time
	for i, l := range labels {
		if i == 2 {
			mid = time.Now()
			time.Sleep(2 * time.Millisecond)
		}
		e.record(t, fmt.Sprint("o-", i), l, day(1))
		time.Sleep(2 * time.Millisecond)
	}
	for _, tc := range []struct {
		opts outcome.ListOptions
		want string
	}{
		{outcome.ListOptions{}, "[o-4 o-3 o-2 o-1 o-0]"},
		{outcome.ListOptions{Limit: 2}, "[o-4 o-3]"},
		{outcome.ListOptions{Label: alert.LabelFraud}, "[o-2 o-0]"},
		{outcome.ListOptions{Label: alert.LabelLegit, Limit: 1}, "[o-4]"},
		{outcome.ListOptions{Label: alert.LabelUnclear, Limit: 1}, "[o-3]"}, // past a page of others
		{outcome.ListOptions{Label: alert.LabelLegit}, "[o-4 o-1]"},
		{outcome.ListOptions{Since: mid}, "[o-4 o-3 o-2]"},
		{outcome.ListOptions{Since: mid, Label: alert.LabelFraud}, "[o-2]"},
	} {
		got, err := e.s.List(t.Context(), tc.opts)
		var ids []string
		for _, o := range got {
			ids = append(ids, o.OrderID)
		}
		if err != nil || fmt.Sprint(ids) != tc.want {
			t.Errorf("%+v: %v, %v; want %s", tc.opts, ids, err, tc.want)
		}
	}
	if _, err := e.s.List(t.Context(), outcome.ListOptions{Label: "maybe"}); err == nil {
		t.Error("a list of no label was taken")
	}
}

// An alert sent before there were outcomes is noted from its life's copy
// at its first label; an alert whose life ended is labelled by its id
// still; an id the store does not know is unknown; a retry after the
// life took the label completes the orders' outcomes.
func TestLabelAnAlertWhateverItsState(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	ctx := t.Context()
	old, oldRef := e.claim(t, "burst", "cust-1", "evt-old", "o-1")
	if st, err := e.s.Change(ctx, oldRef, alert.OpLabelFraud, "cli:ann"); err != nil || st.Label != alert.LabelFraud {
		t.Fatalf("label an alert sent before outcomes: %+v, %v", st, err)
	}
	if o, err := e.s.Order(ctx, "o-1"); err != nil || o.Label != alert.LabelFraud || o.Via != outcome.ViaCLI || o.Alerts[0] != old.ID {
		t.Errorf("o-1: %+v, %v", o, err)
	}
	// A crash after the life took the label: the retry labels the orders.
	crashed, crashedRef := e.send(t, "burst", "cust-2", "evt-crash", "o-2")
	g := e.keys.Group([]string{"cust-2"})
	if _, _, err := e.scripts.ChangeLife(ctx, e.keys.Alert(g, "burst", "evt-crash"), "label_legit", "cli:ann"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Change(ctx, crashedRef, alert.OpLabelLegit, "cli:ann"); err != nil {
		t.Fatal(err)
	}
	if o, err := e.s.Order(ctx, "o-2"); err != nil || o.Label != alert.LabelLegit || e.outcomeOf(t, crashed.ID) != "legit" {
		t.Errorf("after the retry o-2 is %+v, %v; the alert %q", o, err, e.outcomeOf(t, crashed.ID))
	}
	// The life ends (its records are kept a week, outcomes longer).
	ended, _ := e.send(t, "burst", "cust-3", "evt-ended", "o-3")
	e.rdb.Del(ctx, e.keys.Alert(e.keys.Group([]string{"cust-3"}), "burst", "evt-ended"))
	st, err := e.s.LabelAlert(ctx, ended.ID, alert.LabelUnclear, outcome.ViaCLI, "", "cli:bob")
	if err != nil || st.Label != alert.LabelUnclear || st.LabelledBy != "cli:bob" || st.LabelledAt.IsZero() {
		t.Errorf("label an ended alert: %+v, %v", st, err)
	}
	if o, _ := e.s.Order(ctx, "o-3"); o.Label != alert.LabelUnclear {
		t.Errorf("o-3: %+v, want unclear", o)
	}
	// A ref naming the ended alert's id in another group is none of it.
	forged := alert.Ref{Rule: "burst", Group: e.keys.Group([]string{"cust-4"}).Encoding(), EventID: "evt-ended"}
	if _, err := e.s.Change(ctx, forged, alert.OpLabelFraud, "cli:eve"); !errors.Is(err, outcome.ErrUnknown) {
		t.Errorf("label by a ref of another group: %v, want ErrUnknown", err)
	}
	if o, _ := e.s.Order(ctx, "o-3"); o.Label != alert.LabelUnclear {
		t.Errorf("o-3 after the forged ref: %+v, want unclear still", o)
	}
	if _, err := e.s.LabelAlert(ctx, "burst/none", alert.LabelFraud, outcome.ViaCLI, "", "cli:bob"); !errors.Is(err, outcome.ErrUnknown) {
		t.Errorf("label of no alert: %v, want ErrUnknown", err)
	}
	if _, err := e.s.Change(ctx, oldRef, alert.OpLabelFraud, "mail:x"); err == nil {
		t.Error("a label from no way in was taken")
	}
	if st, err := e.s.Change(ctx, oldRef, alert.OpAcknowledge, "cli:ann"); err != nil || st.Status != alert.StatusAcknowledged {
		t.Errorf("ack through the store: %+v, %v", st, err)
	}
	ghost := alert.Ref{Rule: "burst", Group: oldRef.Group, EventID: "evt-ghost"}
	if _, err := e.s.Change(ctx, ghost, alert.OpLabelFraud, "cli:ann"); !errors.Is(err, life.ErrUnknown) {
		t.Errorf("label of no alert by ref: %v, want life.ErrUnknown", err)
	}
}

// lostAfterNotes notes alerts, then fails as a connection lost after the
// notes ran.
type lostAfterNotes struct{ *lua.Scripts }

func (l lostAfterNotes) OpenOutcomeAlerts(ctx context.Context, k lua.OutcomeKeys, alerts []lua.OutcomeAlert, b lua.OutcomeBounds) ([]lua.AlertChange, error) {
	changes, _ := l.Scripts.OpenOutcomeAlerts(ctx, k, alerts, b)
	return changes, errors.New("connection lost")
}

// An alert noted in a batch that failed after its note ran is judged
// then: noted again, it would take no change, and the outcome known
// before it was noted would never count.
func TestABatchThatFailedCountsWhatItNoted(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	e.record(t, "o-1", alert.LabelFraud, day(1))
	reg := prometheus.NewRegistry()
	lost, err := outcome.NewStore(outcome.StoreConfig{KeyPrefix: e.pfx}, lostAfterNotes{e.scripts}, e.lives, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	a, ref := e.claim(t, "burst", "cust-1", "evt-1", "o-1")
	if err := lost.OpenedAll(t.Context(), []alert.Alert{a}, []alert.Ref{ref}); err == nil {
		t.Fatal("the lost batch answered no error")
	}
	if err := e.s.OpenedAll(t.Context(), []alert.Alert{a}, []alert.Ref{ref}); err != nil {
		t.Fatal(err)
	}
	n := (&env{reg: reg}).counter(t, "fraudwatch_alert_outcomes_total", "rule", "burst", "outcome", "fraud") +
		e.counter(t, "fraudwatch_alert_outcomes_total", "rule", "burst", "outcome", "fraud")
	if n != 1 {
		t.Errorf("the alert's fraud counted %v times, want once", n)
	}
}

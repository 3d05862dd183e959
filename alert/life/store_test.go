package life_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// said records what a Store says on the alerts topic.
type said struct {
	mu   sync.Mutex
	keys []string
	refs []alert.Ref
	err  error
}

func (p *said) PublishUpdate(_ context.Context, key string, ref alert.Ref) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.keys, p.refs = append(p.keys, key), append(p.refs, ref)
	return nil
}

type env struct {
	s       *life.Store
	scripts *lua.Scripts
	keys    lua.Keys
	pub     *said
	reg     *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	pfx := redistest.Prefix(t)
	keys, err := lua.NewKeys(pfx)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{scripts: scripts, keys: keys, pub: &said{}, reg: prometheus.NewRegistry()}
	if e.s, err = life.New(life.Config{KeyPrefix: pfx}, scripts, e.pub, nil, e.reg); err != nil {
		t.Fatal(err)
	}
	return e
}

// open sends an alert of rule for group's value as the dispatcher does:
// its claim decides and opens its life, then it is indexed.
func (e *env) open(t *testing.T, rule, value, eventID string) alert.Ref {
	t.Helper()
	g := e.keys.Group([]string{value})
	a := alert.Alert{ID: rule + "/" + eventID, Rule: rule, EventID: eventID, Severity: alert.SeverityHigh, Group: g.Encoding()}
	body, _ := json.Marshal(a)
	c := lua.AlertClaim{CooldownKey: e.keys.Cooldown(g, rule), RecordKey: e.keys.Record(g, rule, eventID, "slack"),
		LegacyKey: e.keys.AlertRecord(g, rule, eventID), AlertKey: e.keys.Alert(g, rule, eventID), Alert: body,
		ID: a.ID, Claimant: "alerts/0/1"}
	if got, err := e.scripts.ClaimAlert(t.Context(), c); err != nil || got != lua.ClaimSend {
		t.Fatalf("claim %s: %v, %v", a.ID, got, err)
	}
	ref := alert.Ref{Rule: rule, Group: g.Encoding(), EventID: eventID}
	text, _ := json.Marshal(ref)
	index, refs := e.keys.OpenAlerts()
	if err := e.scripts.IndexAlert(t.Context(), index, refs, a.ID, string(text), 100, time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // an index score of its own
	return ref
}

// A change is made in Redis and said on the alerts topic keyed by the
// alert's cooldown key, even when it changes nothing (a retry says it
// again); a resolved alert leaves the open alerts; an alert without a
// life, or a ref no rule's values make, is unknown.
func TestChangeWritesThenSays(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ref := e.open(t, "burst", "cust-1", "evt-1")
	st, err := e.s.Change(ctx, ref, alert.OpAcknowledge, "cli:ann")
	if err != nil || st.Status != alert.StatusAcknowledged || st.AckedBy != "cli:ann" || st.AckedAt.IsZero() {
		t.Fatalf("ack: %+v, %v", st, err)
	}
	again, err := e.s.Change(ctx, ref, alert.OpAcknowledge, "cli:bob")
	if err != nil || again.AckedBy != "cli:ann" {
		t.Fatalf("second ack: %+v, %v; want the first", again, err)
	}
	g := e.keys.Group([]string{"cust-1"})
	if len(e.pub.refs) != 2 || e.pub.refs[0] != ref || e.pub.keys[0] != e.keys.Cooldown(g, "burst") {
		t.Errorf("said %v under %v, want the ref twice under the alert's cooldown key", e.pub.refs, e.pub.keys)
	}
	if _, err := e.s.ByID(ctx, "burst/evt-1"); err != nil {
		t.Errorf("ByID before the resolve: %v", err)
	}
	if st, err := e.s.Change(ctx, ref, alert.OpResolve, "cli:bob"); err != nil || st.Status != alert.StatusResolved {
		t.Fatalf("resolve: %+v, %v", st, err)
	}
	if _, err := e.s.ByID(ctx, "burst/evt-1"); !errors.Is(err, life.ErrUnknown) {
		t.Errorf("ByID after the resolve: %v, want ErrUnknown (no longer open)", err)
	}
	if got, err := e.s.Get(ctx, ref); err != nil || got.State.Status != alert.StatusResolved || got.Alert.ID != "burst/evt-1" {
		t.Errorf("Get after the resolve: %+v, %v", got, err)
	}
	for _, bad := range []alert.Ref{{Rule: "burst", Group: "cust-9", EventID: "evt-9"}, {Rule: "burst", Group: "{x}", EventID: "e"},
		{Rule: "a:b", Group: "cust-1", EventID: "e"}} {
		if _, err := e.s.Change(ctx, bad, alert.OpAcknowledge, "cli:ann"); !errors.Is(err, life.ErrUnknown) {
			t.Errorf("change of %+v: %v, want ErrUnknown", bad, err)
		}
	}
	if _, err := e.s.Change(ctx, ref, "snooze", "cli:ann"); err == nil {
		t.Error("an unknown change was taken")
	}
	e.pub.err = errors.New("broker down")
	other := e.open(t, "burst", "cust-2", "evt-2")
	if st, err := e.s.Change(ctx, other, alert.OpAssign, "cli:ann"); !errors.Is(err, life.ErrNotSaid) || st.Assignee != "cli:ann" {
		t.Errorf("with the topic down: %+v, %v; want the change made, and ErrNotSaid", st, err)
	}
}

// A label is a change like the others: made after the resolve, said on
// the alerts topic (so the receivers show it), read back by Get; the same
// label again is said again but changes nothing.
func TestALabelIsAChange(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ref := e.open(t, "burst", "cust-1", "evt-1")
	if _, err := e.s.Change(ctx, ref, alert.OpResolve, "cli:bob"); err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		op   alert.Op
		who  string
		want alert.Label
		by   string
	}{
		{alert.OpLabelFraud, "slack:U1", alert.LabelFraud, "slack:U1"},
		{alert.OpLabelFraud, "cli:ann", alert.LabelFraud, "slack:U1"},
		{alert.OpLabelLegit, "cli:ann", alert.LabelLegit, "cli:ann"},
	} {
		st, err := e.s.Change(ctx, ref, step.op, step.who)
		if err != nil || st.Status != alert.StatusResolved || st.Label != step.want || st.LabelledBy != step.by || st.LabelledAt.IsZero() {
			t.Fatalf("step %d, %s by %s: %+v, %v", i, step.op, step.who, st, err)
		}
	}
	if len(e.pub.refs) != 4 {
		t.Errorf("said %d changes, want 4 (the resolve and each label)", len(e.pub.refs))
	}
	if got, err := e.s.Get(ctx, ref); err != nil || got.State.Label != alert.LabelLegit || got.State.LabelledBy != "cli:ann" {
		t.Errorf("Get: %+v, %v; want the last label", got.State, err)
	}
	if _, err := e.s.Change(ctx, ref, "label_maybe", "cli:ann"); err == nil {
		t.Error("a label that is none was taken")
	}
}

// List shows the open alerts newest first and drops from the index those
// resolved or ended meanwhile; the gauge counts the index by rule.
func TestListMendsTheIndexAndTheGaugeCountsIt(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	a := e.open(t, "burst", "cust-1", "evt-1")
	b := e.open(t, "burst", "cust-2", "evt-2")
	c := e.open(t, "cards", "cust-3", "evt-3")
	if err := e.s.CountOpen(ctx, func() []string { return []string{"burst", "cards", "quiet"} }); err != nil {
		t.Fatal(err)
	}
	for rule, want := range map[string]float64{"burst": 2, "cards": 1, "quiet": 0} {
		if got := testutil.ToFloat64(gauge(t, e, rule)); got != want {
			t.Errorf("open %s = %v, want %v", rule, got, want)
		}
	}
	// b resolved behind the store's back (as an older replica would),
	// c's life ended.
	g := e.keys.Group([]string{"cust-2"})
	if _, _, err := e.scripts.ChangeLife(ctx, e.keys.Alert(g, "burst", "evt-2"), "resolve", "cli:x"); err != nil {
		t.Fatal(err)
	}
	g3 := e.keys.Group([]string{"cust-3"})
	redistest.Client(t).Del(ctx, e.keys.Alert(g3, "cards", "evt-3"))
	got, err := e.s.List(ctx, 10)
	if err != nil || len(got) != 1 || got[0].ID != "burst/evt-1" || got[0].Ref != a || got[0].State.Status != alert.StatusOpen {
		t.Fatalf("List = %+v, %v; want a alone", got, err)
	}
	for _, ref := range []alert.Ref{b, c} {
		if _, err := e.s.ByID(ctx, ref.Rule+"/"+ref.EventID); !errors.Is(err, life.ErrUnknown) {
			t.Errorf("%s still indexed after a list: %v", ref.EventID, err)
		}
	}
	if err := e.s.CountOpen(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(gauge(t, e, "burst")); got != 1 {
		t.Errorf("open burst after the list = %v, want 1", got)
	}
}

func gauge(t *testing.T, e *env, rule string) prometheus.Collector {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "fraudwatch_alerts_open" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == rule {
				return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetGauge().GetValue() })
			}
		}
	}
	t.Fatalf("no fraudwatch_alerts_open series for %s", rule)
	return nil
}

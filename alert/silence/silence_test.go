package silence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

var ruleSet = []rules.Rule{
	{Name: "burst", Metric: alert.Count, GroupBy: []string{"customer_id"}, Window: time.Minute, Threshold: 1,
		Cooldown: 0, Severity: alert.SeverityHigh, Mode: alert.ModeAlert, Enabled: true},
	{Name: "pair", Metric: alert.Count, GroupBy: []string{"email", "phone"}, Window: time.Minute, Threshold: 1,
		Severity: alert.SeverityHigh, Mode: alert.ModeAlert, Enabled: true},
}

// env is a silence store, an engine that makes real alerts (every order
// crosses), and a dispatcher that claims them, on one Redis.
type env struct {
	store *silence.Store
	eng   *rules.Engine
	disp  *dispatch.Dispatcher
	reg   *prometheus.Registry
	sink  *sink
	keys  lua.Keys
	sent  atomic.Int64
	off   int64
}

type sink struct{ alerts []alert.Alert }

func (s *sink) Publish(_ context.Context, as ...alert.Alert) error {
	s.alerts = append(s.alerts, as...)
	return nil
}

func newEnv(t *testing.T) *env {
	t.Helper()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	e := &env{reg: prometheus.NewRegistry(), sink: &sink{}}
	scripts, err := lua.New(lua.Config{}, rdb, e.reg)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	e.store = silence.NewStore(rdb, scripts, keys)
	e.keys = keys
	if e.eng, err = rules.NewEngine(rules.EngineConfig{KeyPrefix: prefix}, ruleSet, scripts, e.sink, nil, nil); err != nil {
		t.Fatal(err)
	}
	notify := alert.NotifierFunc(func(context.Context, alert.Alert) error { e.sent.Add(1); return nil })
	if e.disp, err = dispatch.NewDispatcher(dispatch.DispatcherConfig{KeyPrefix: prefix}, notify, scripts, nil, e.reg); err != nil {
		t.Fatal(err)
	}
	e.disp.SetRules(map[string]dispatch.RuleSettings{"burst": {Mode: alert.ModeAlert}, "pair": {Mode: alert.ModeAlert}})
	return e
}

// handle hands a to the dispatcher as the alerts topic does.
func (e *env) handle(t *testing.T, a alert.Alert) {
	t.Helper()
	value, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.disp.HandleMessages(t.Context(), []kafka.Message{{Topic: "alerts", Value: value, Time: time.Now()}}); err != nil {
		t.Fatal(err)
	}
}

// order makes one order cross both rules and delivers its alerts; it
// returns how many were sent.
func (e *env) order(t *testing.T, customer, email string) int64 {
	t.Helper()
	e.off++
	ev, err := event.Decode([]byte(`{"event_id":"e`+time.Now().Format("150405.000000000")+customer+`","type":"order","order_id":"o","customer_id":"`+
		customer+`","email":"`+email+`","phone":"010","amount":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	ev.Source = event.Source{Topic: "orders", Offset: e.off}
	e.sink.alerts = nil
	if _, err := e.eng.Handle(t.Context(), []*event.Event{ev}); err != nil {
		t.Fatal(err)
	}
	before := e.sent.Load()
	for _, a := range e.sink.alerts {
		e.handle(t, a)
	}
	return e.sent.Load() - before
}

func TestSilences(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	now := time.Now()
	// Each group crosses once a window: every test order is a new
	// customer (and a new email).
	if n := e.order(t, "c0", "a@x"); n != 2 {
		t.Fatalf("%d alerts sent before any silence, want 2", n)
	}

	// One customer of one rule.
	one, err := e.store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "c1"}, For: time.Hour, Reason: "known reseller", Author: "kim"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.order(t, "c1", "b@x"); n != 1 {
		t.Errorf("%d alerts sent for the silenced customer, want only the other rule's", n)
	}
	if n := e.order(t, "c2", "c@x"); n != 2 {
		t.Errorf("%d alerts sent for another customer, want 2", n)
	}
	if got := testutil.ToFloat64(counter(t, e.reg, "burst", "silenced")); got != 1 {
		t.Errorf("suppressed{reason=silenced} = %v, want 1", got)
	}

	// A whole rule: every group, in every bucket.
	all, err := e.store.Add(ctx, testRules, silence.Spec{Rule: "pair", For: 2 * time.Hour, Reason: "noisy rule"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c3", "c4", "c5"} {
		if n := e.order(t, c, c+"@x"); n != 1 {
			t.Errorf("%s: %d alerts, want only burst's", c, n)
		}
	}

	// A group named by its encoding, as a Slack button names it.
	byGroup, err := e.store.Add(ctx, testRules, silence.Spec{Rule: "burst", Group: e.keys.Group([]string{"c7"}).Encoding(),
		Match: map[string]string{"customer_id": "c7"}, For: 3 * time.Hour, Reason: "snoozed from Slack"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.order(t, "c7", "c7@x"); n != 0 {
		t.Errorf("c7: %d alerts, want none: burst for c7 and pair are silenced", n)
	}
	if _, err := e.store.Expire(ctx, testRules, byGroup.ID, "kim", now); err != nil {
		t.Fatal(err)
	}

	list, err := e.store.List(ctx, now)
	if err != nil || len(list) != 2 || list[0].ID != one.ID || list[1].ID != all.ID || list[0].Ends.Sub(now).Round(time.Second) != time.Hour {
		t.Fatalf("List = %+v, %v", list, err)
	}

	// Expired, the silences stop nothing.
	for _, id := range []string{one.ID, all.ID} {
		if _, err := e.store.Expire(ctx, testRules, id, "kim", now); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.order(t, "c6", "d@x"); n != 2 {
		t.Errorf("%d alerts after the silences expired, want 2", n)
	}
	if list, _ := e.store.List(ctx, now); len(list) != 0 {
		t.Errorf("expired silences still listed: %+v", list)
	}
	// And ended ones are not listed.
	if _, err := e.store.Add(ctx, testRules, silence.Spec{Rule: "burst", For: time.Minute, Reason: "brief"}, now); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.store.List(ctx, now.Add(2*time.Minute)); len(list) != 0 {
		t.Errorf("an ended silence listed: %+v", list)
	}
}

// An alert on the alerts topic written before alerts carried silence keys
// is silenced too: the dispatcher derives the keys from its rule and
// group, as it does every key, and never takes them from the message.
func TestSilencesStopAlertsWrittenWithoutSilenceKeys(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "c1"}, For: time.Hour, Reason: "known reseller"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ev, err := event.Decode([]byte(`{"event_id":"old-1","type":"order","order_id":"o","customer_id":"c1","email":"a@x","phone":"010","amount":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	ev.Source = event.Source{Topic: "orders", Offset: 1}
	if _, err := e.eng.Handle(ctx, []*event.Event{ev}); err != nil {
		t.Fatal(err)
	}
	for _, a := range e.sink.alerts {
		a.SilenceKey, a.RuleSilence = "", ""
		e.handle(t, a)
	}
	if got := e.sent.Load(); len(e.sink.alerts) != 2 || got != 1 {
		t.Errorf("%d alerts made, %d sent; want 2, and only pair's sent", len(e.sink.alerts), got)
	}
	if got := testutil.ToFloat64(counter(t, e.reg, "burst", "silenced")); got != 1 {
		t.Errorf("suppressed{reason=silenced} = %v, want 1", got)
	}
	// The status page lists it as silenced.
	outcomes := map[string]string{}
	for _, r := range e.disp.Recent() {
		outcomes[r.Rule] = r.Outcome
	}
	if outcomes["burst"] != dispatch.SuppressedSilenced || outcomes["pair"] != dispatch.OutcomeSent {
		t.Errorf("recent outcomes %v, want burst silenced and pair sent", outcomes)
	}
}

func TestSilenceAddRefuses(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		rule   string
		match  map[string]string
		d      time.Duration
		reason string
		want   string
	}{
		{"an unknown rule", "nope", nil, time.Hour, "r", `no rule "nope"`},
		{"no duration", "burst", nil, 0, "r", "--for"},
		{"a year and a day", "burst", nil, 366 * 24 * time.Hour, "r", "--for"},
		{"no reason", "burst", nil, time.Hour, " ", "--reason"},
		{"a field the rule does not group by", "burst", map[string]string{"customer_id": "c", "ip": "1"}, time.Hour, "r", "does not group by ip"},
		{"part of a composite group", "pair", map[string]string{"email": "a@x"}, time.Hour, "r", "groups by email, phone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.store.Add(t.Context(), testRules, silence.Spec{Rule: tt.rule, Match: tt.match, For: tt.d, Reason: tt.reason}, time.Now())
			if err == nil || !errors.Is(err, silence.ErrUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Add = %v, want a usage error with %q", err, tt.want)
			}
		})
	}
	if _, err := e.store.Expire(t.Context(), testRules, "0123", "kim", time.Now()); !errors.Is(err, silence.ErrUsage) {
		t.Errorf("expiring an unknown silence: %v", err)
	}
}

func TestRunPrints(t *testing.T) {
	e := newEnv(t)
	var out bytes.Buffer
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	run := func(c silence.Command) {
		t.Helper()
		out.Reset()
		c.Rules, c.Out, c.Now = testRules, &out, now
		if err := silence.Run(t.Context(), e.store, c); err != nil {
			t.Fatal(err)
		}
	}
	// Silences end by Redis's clock too: this one ends in a year.
	now = time.Now().Truncate(time.Second)
	run(silence.Command{Name: "add", Rule: "pair", Match: map[string]string{"email": "a@x", "phone": "010"}, For: 2 * time.Hour, Reason: "known\nreseller", Author: "kim"})
	if !strings.Contains(out.String(), "rule pair for email=a@x,phone=010 until") {
		t.Errorf("add printed %q", out.String())
	}
	id := strings.TrimSuffix(strings.Fields(out.String())[1], ":")
	run(silence.Command{Name: "list"})
	if !strings.Contains(out.String(), id) || !strings.Contains(out.String(), "2h0m0s") || !strings.Contains(out.String(), "known reseller") {
		t.Errorf("list printed %q", out.String())
	}
	run(silence.Command{Name: "list", Format: "json"})
	if !strings.Contains(out.String(), `"id": "`+id+`"`) {
		t.Errorf("list --format json printed %q", out.String())
	}
	run(silence.Command{Name: "expire", ID: id})
	if !strings.Contains(out.String(), "expired") {
		t.Errorf("expire printed %q", out.String())
	}
	run(silence.Command{Name: "list"})
	if !strings.Contains(out.String(), "no silences in force") {
		t.Errorf("list printed %q", out.String())
	}
}

// testRules are ruleSet as silences take them.
var testRules = silence.Rules{"burst": {"customer_id"}, "pair": {"email", "phone"}}

func counter(t *testing.T, reg *prometheus.Registry, rule, reason string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fraudwatch_alerts_suppressed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["rule"] == rule && labels["reason"] == reason {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, m.GetCounter().GetValue)
			}
		}
	}
	t.Fatalf("no suppressed series for %s/%s", rule, reason)
	return nil
}

// silence list shows the silences by when they end, the soonest first,
// whatever order they were added in.
func TestListIsInEndOrder(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	for h := 5; h >= 1; h-- {
		if _, err := e.store.Add(t.Context(), testRules, silence.Spec{Rule: "burst", For: time.Duration(h) * time.Hour,
			Reason: fmt.Sprint(h, " h")}, now); err != nil {
			t.Fatal(err)
		}
	}
	list, err := e.store.List(t.Context(), now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list {
		got = append(got, s.Reason)
	}
	if want := []string{"1 h", "2 h", "3 h", "4 h", "5 h"}; !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
}

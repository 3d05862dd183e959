package rules_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

// fakeSink records what the engine hands off.
type fakeSink struct {
	mu     sync.Mutex
	alerts []alert.Alert
	err    error
	// mutate, when set, changes each alert after recording it, as a careless
	// receiver might.
	mutate func(*alert.Alert)
}

func (s *fakeSink) Publish(_ context.Context, alerts ...alert.Alert) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range alerts {
		rec := a
		rec.GroupBy, rec.GroupValues = slices.Clone(a.GroupBy), slices.Clone(a.GroupValues)
		s.alerts = append(s.alerts, rec)
		if s.mutate != nil {
			s.mutate(&a)
		}
	}
	return s.err
}

func (s *fakeSink) got() []alert.Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]alert.Alert(nil), s.alerts...)
}

var testNow = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

type harness struct {
	t      *testing.T
	engine *rules.Engine
	rdb    redis.UniversalClient
	prefix string
	keys   lua.Keys
	sink   *fakeSink
	reg    *prometheus.Registry
	rules  []rules.Rule
	// offset is the next offset handle gives an event without a source.
	offset int64
}

func newHarness(t *testing.T, rs ...rules.Rule) *harness {
	t.Helper()
	return newHarnessWith(t, nil, rs...)
}

// counting is what the engine needs of the scripts.
type counting interface {
	Batch() *lua.Batch
	AddEvidence(ctx context.Context, calls []*lua.Evidence) error
}

// newHarnessWith is newHarness with the engine's scripts wrapped by wrap,
// when it is not nil.
func newHarnessWith(t *testing.T, wrap func(*lua.Scripts) counting, rs ...rules.Rule) *harness {
	t.Helper()
	return newHarnessOn(t, redistest.Client(t), wrap, rs...)
}

// newHarnessOn is newHarnessWith on the Redis of rdb.
func newHarnessOn(t *testing.T, rdb redis.UniversalClient, wrap func(*lua.Scripts) counting, rs ...rules.Rule) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	scripts, err := lua.New(lua.Config{}, rdb, reg)
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	keys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var c counting = scripts
	if wrap != nil {
		c = wrap(scripts)
	}
	sink := &fakeSink{}
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: prefix, Now: func() time.Time { return testNow }},
		rs, c, sink, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, engine: e, rdb: rdb, prefix: prefix, keys: keys, sink: sink, reg: reg, rules: rs}
}

// state is what the keys of a rule's windows call it.
func (h *harness) state(name string) string {
	for _, r := range h.rules {
		if r.Name == name {
			return r.State()
		}
	}
	h.t.Fatalf("no rule %s", name)
	return ""
}

func rule(name string, m alert.Metric, threshold int64, groupBy ...string) rules.Rule {
	return rules.Rule{
		Name: name, Metric: m, GroupBy: groupBy, Window: time.Minute, Threshold: threshold,
		Cooldown: time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true,
	}
}

// hashTag is the part of key that Redis Cluster hashes, when it has one.
func hashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	tag, _, closed := strings.Cut(rest, "}")
	if !ok || !closed {
		return ""
	}
	return tag
}

// remove, as a value in ev's pairs, deletes the field.
var remove = struct{ remove bool }{true}

// ev decodes an event built from key/value pairs, as the consumer would.
func ev(t *testing.T, typ event.Type, kv ...any) *event.Event {
	t.Helper()
	m := map[string]any{"order_id": "ord-1", "customer_id": "cust-1", "amount": 100}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == remove {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	if _, ok := m["event_id"]; !ok {
		m["event_id"] = "evt-" + m["order_id"].(string)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	e, err := event.Decode(data, typ)
	if err != nil {
		t.Fatalf("Decode(%s): %v", data, err)
	}
	return e
}

// handle evaluates events as the consumer would, from the orders or
// refunds topic's partition 0, at the next offsets.
func (h *harness) handle(evs ...*event.Event) {
	h.t.Helper()
	h.place(evs...)
	unprocessable, err := h.engine.Handle(h.t.Context(), evs)
	if err != nil || len(unprocessable) > 0 {
		h.t.Fatalf("Handle = %v, %v", unprocessable, err)
	}
}

// place gives events without a source the next offsets of partition 0.
func (h *harness) place(evs ...*event.Event) {
	for _, e := range evs {
		if e.Source.Topic == "" {
			e.Source = event.Source{Topic: "orders", Offset: h.offset}
			if e.Type == event.Refund {
				e.Source.Topic = "refunds"
			}
			h.offset++
		}
	}
}

// windowKey is the key of a rule's window: a fixed one's counter, or a
// sliding one's hash.
func (h *harness) windowKey(name string, values ...string) string {
	h.t.Helper()
	for _, r := range h.rules {
		if r.Name == name && r.WindowType != alert.Sliding && r.Metric != alert.Distinct {
			return h.keys.Counter(h.keys.Group(values), r.State())
		}
	}
	return h.keys.Window(h.keys.Group(values), h.state(name))
}

// counter reads a rule's fixed window counter from Redis; ok is false when
// the key does not exist.
func (h *harness) counter(name string, m alert.Metric, values ...string) (int64, bool) {
	h.t.Helper()
	n, err := h.rdb.Get(h.t.Context(), h.windowKey(name, values...)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return n, true
}

func (h *harness) wantCounter(name string, m alert.Metric, want int64, values ...string) {
	h.t.Helper()
	got, ok := h.counter(name, m, values...)
	if !ok || got != want {
		h.t.Errorf("counter %s %s %q = %d (exists %v), want %d", name, m, values, got, ok, want)
	}
}

// storedKeys lists every key under the harness's prefix.
func (h *harness) storedKeys() []string {
	h.t.Helper()
	pattern := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(h.prefix) + ":*"
	return redistest.Keys(h.t, h.rdb, pattern)
}

// metric reads a counter with a label ("": one without labels); it must be
// exported.
func (h *harness) metric(name, label, value string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 {
				return m.GetCounter().GetValue()
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	h.t.Fatalf("metric %s{%s=%q} not exported", name, label, value)
	return 0
}

// crossedBy lists the event ids of the recorded alerts of a rule.
func (h *harness) crossedBy(name string) []string {
	var ids []string
	for _, a := range h.sink.got() {
		if a.Rule == name {
			ids = append(ids, a.EventID)
		}
	}
	return ids
}

func TestEngineCountRuleCrossesOnce(t *testing.T) {
	h := newHarness(t, rule("orders-3", alert.Count, 3, "customer_id"))
	for i, cust := range []string{"c1", "c2", "c1", "c1", "c2", "c1", "c1"} {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i)), "customer_id", cust))
	}
	// c1's third order is o3; c2 ordered twice and never crossed.
	if got := h.crossedBy("orders-3"); !reflect.DeepEqual(got, []string{"evt-o3"}) {
		t.Errorf("crossings by %v, want only evt-o3", got)
	}
	if a := h.sink.got(); len(a) == 1 && (a[0].Current != 3 || !reflect.DeepEqual(a[0].GroupValues, []string{"c1"})) {
		t.Errorf("alert current %d group %q, want 3 [c1]", a[0].Current, a[0].GroupValues)
	}
	h.wantCounter("orders-3", alert.Count, 5, "c1")
	h.wantCounter("orders-3", alert.Count, 2, "c2")
	ttl, err := h.rdb.TTL(t.Context(), h.windowKey("orders-3", "c1")).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("counter TTL = %v, %v; want the 1m window", ttl, err)
	}
}

func TestEngineAmountRuleSums(t *testing.T) {
	h := newHarness(t, rule("amount-1000", alert.Amount, 1000, "card_fingerprint"))
	steps := []struct {
		amount int64
		card   string
	}{{400, "k1"}, {500, "k1"}, {900, "k2"}, {200, "k1"}, {50, "k1"}}
	for i, s := range steps {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i)), "card_fingerprint", s.card,
			"amount", s.amount, "currency", "krw"))
	}
	got := h.sink.got()
	if len(got) != 1 || got[0].EventID != "evt-o3" || got[0].Current != 1100 || got[0].Currency != "KRW" || got[0].Metric != "amount" {
		t.Fatalf("alerts %+v, want one on evt-o3 at 1100 KRW", got)
	}
	h.wantCounter("amount-1000", alert.Amount, 1150, "k1")
	h.wantCounter("amount-1000", alert.Amount, 900, "k2")
}

func TestEngineCompositeGroupBy(t *testing.T) {
	h := newHarness(t, rule("cust-card", alert.Count, 2, "customer_id", "card_fingerprint"))
	for i, p := range [][2]string{{"c1", "k1"}, {"c1", "k2"}, {"c2", "k1"}, {"c1", "k1"}} {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i)), "customer_id", p[0], "card_fingerprint", p[1]))
	}
	got := h.sink.got()
	if len(got) != 1 || got[0].EventID != "evt-o3" {
		t.Fatalf("alerts %+v, want one on evt-o3", got)
	}
	if !reflect.DeepEqual(got[0].GroupBy, []string{"customer_id", "card_fingerprint"}) ||
		!reflect.DeepEqual(got[0].GroupValues, []string{"c1", "k1"}) {
		t.Errorf("group %q = %q", got[0].GroupBy, got[0].GroupValues)
	}
	h.wantCounter("cust-card", alert.Count, 1, "c1", "k2")
	h.wantCounter("cust-card", alert.Count, 1, "c2", "k1")
}

func TestEngineSkipsEventsLackingGroupBy(t *testing.T) {
	h := newHarness(t,
		rule("by-email", alert.Count, 1, "email"),
		rule("by-merchant", alert.Count, 1, "merchant_id"),
		rule("by-email-ip", alert.Amount, 1, "email", "ip"),
	)
	h.handle(ev(t, event.Order, "order_id", "o1"))
	h.handle(ev(t, event.Order, "order_id", "o2", "email", "", "merchant_id", nil, "ip", "203.0.113.9"))
	h.handle(ev(t, event.Order, "order_id", "o3", "merchant_id", map[string]any{"id": 7}))
	h.handle(ev(t, event.Refund, "order_id", "o4", "ip", "203.0.113.9"))
	if got := h.sink.got(); len(got) != 0 {
		t.Fatalf("events lacking the group_by fields raised %+v", got)
	}
	if keys := h.storedKeys(); len(keys) != 0 {
		t.Fatalf("events lacking the group_by fields wrote %q", keys)
	}

	// An extra field the event does carry groups like any other.
	h.handle(ev(t, event.Order, "order_id", "o5", "merchant_id", 7))
	got := h.sink.got()
	if len(got) != 1 || got[0].Rule != "by-merchant" || !reflect.DeepEqual(got[0].GroupValues, []string{"7"}) {
		t.Fatalf("alerts %+v, want by-merchant for merchant 7", got)
	}
}

func TestEngineDisabledRulesNeverRun(t *testing.T) {
	off := rule("off", alert.Count, 1, "customer_id")
	off.Enabled = false
	offAmount := rule("off-amount", alert.Amount, 1, "customer_id")
	offAmount.Enabled = false
	h := newHarness(t, off, offAmount)
	h.handle(ev(t, event.Order, "order_id", "o1"))
	h.handle(ev(t, event.Refund, "order_id", "o1"))
	if got := h.sink.got(); len(got) != 0 {
		t.Errorf("disabled rules raised %+v", got)
	}
	if keys := h.storedKeys(); len(keys) != 0 {
		t.Errorf("disabled rules wrote %q", keys)
	}
}

func TestEngineRefundsLowerAmountRulesOnly(t *testing.T) {
	h := newHarness(t,
		rule("amt", alert.Amount, 1_000_000, "customer_id"),
		rule("cnt", alert.Count, 100, "customer_id"),
		rule("amt-email", alert.Amount, 1_000_000, "email"),
	)
	h.handle(ev(t, event.Order, "order_id", "o1", "amount", 300))
	h.handle(ev(t, event.Order, "order_id", "o2", "amount", 300))
	h.handle(ev(t, event.Refund, "order_id", "o1", "event_id", "r1", "amount", 200, "email", "a@example.com"))

	h.wantCounter("amt", alert.Amount, 400, "cust-1")
	h.wantCounter("cnt", alert.Count, 2, "cust-1")
	// No order ever counted this email: a refund must not create a counter.
	if n, ok := h.counter("amt-email", alert.Amount, "a@example.com"); ok {
		t.Errorf("refund created a counter of %d", n)
	}
	ttl, err := h.rdb.TTL(t.Context(), h.windowKey("amt", "cust-1")).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("refunded counter TTL = %v, %v; want the window kept", ttl, err)
	}
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "amt"); got != 0 {
		t.Errorf("refunds_clamped_total{amt} = %v after a refund that fit", got)
	}
	if got := h.sink.got(); len(got) != 0 {
		t.Errorf("alerts %+v", got)
	}
}

func TestEngineRefundClamps(t *testing.T) {
	h := newHarness(t, rule("amt", alert.Amount, 1_000_000, "customer_id"), rule("other", alert.Amount, 1_000_000, "customer_id"))
	h.handle(ev(t, event.Order, "order_id", "o1", "amount", 500))
	h.handle(ev(t, event.Refund, "order_id", "o1", "event_id", "r1", "amount", 800))
	h.wantCounter("amt", alert.Amount, 0, "cust-1")
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "amt"); got != 1 {
		t.Errorf("refunds_clamped_total{amt} = %v, want 1", got)
	}
	// A refund against a counter already at 0 is nothing to clamp.
	h.handle(ev(t, event.Refund, "order_id", "o1", "event_id", "r2", "amount", 800))
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "amt"); got != 1 {
		t.Errorf("refunds_clamped_total{amt} = %v after a refund on 0, want 1", got)
	}
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "other"); got != 1 {
		t.Errorf("refunds_clamped_total{other} = %v, want 1 (each rule counts its own)", got)
	}
}

func TestEngineCrossingsMetric(t *testing.T) {
	shadow := rule("r-shadow", alert.Count, 1, "customer_id")
	shadow.Mode = alert.ModeShadow
	h := newHarness(t,
		rule("r-one", alert.Count, 1, "customer_id"),
		rule("r-two", alert.Count, 2, "customer_id"),
		rule("r-never", alert.Amount, 1_000_000, "customer_id"),
		shadow,
	)
	for _, name := range []string{"r-one", "r-two", "r-never", "r-shadow"} {
		if got := h.metric("fraudwatch_threshold_crossings_total", "rule", name); got != 0 {
			t.Errorf("crossings{%s} = %v before any event, want an exported 0", name, got)
		}
	}
	for i := range 3 {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i))))
	}
	h.handle(ev(t, event.Order, "order_id", "o9", "customer_id", "cust-2"))
	for name, want := range map[string]float64{"r-one": 2, "r-two": 1, "r-never": 0, "r-shadow": 2} {
		if got := h.metric("fraudwatch_threshold_crossings_total", "rule", name); got != want {
			t.Errorf("crossings{%s} = %v, want %v", name, got, want)
		}
	}
}

func TestEngineAlertCarriesEverything(t *testing.T) {
	r := rules.Rule{
		Name: "big-spender", Description: "{threshold} or more by one customer and card within {window}", Metric: alert.Amount,
		GroupBy: []string{"customer_id", "card_fingerprint"}, Window: 10 * time.Minute, Threshold: 1_000_000,
		Cooldown: time.Hour, Severity: alert.SeverityCritical, Mode: alert.ModeAlert, Channel: "#fraud-risk", Enabled: true,
	}
	h := newHarness(t, r)
	h.handle(ev(t, event.Order, "order_id", "o1", "card_fingerprint", "fp{1}", "amount", 600_000, "currency", "KRW"))
	h.handle(ev(t, event.Order, "order_id", "o2", "card_fingerprint", "fp{1}", "amount", 700_000, "currency", "KRW",
		"occurred_at", "2024-03-01T18:04:05+09:00"))
	h.handle(ev(t, event.Order, "order_id", "o3", "card_fingerprint", "fp{2}", "amount", 1_000_000))

	values := []string{"cust-1", "fp{1}"}
	g, g2 := h.keys.Group(values), h.keys.Group([]string{"cust-1", "fp{2}"})
	want := []alert.Alert{
		{
			ID: "big-spender/evt-o2", Rule: "big-spender", Description: "KRW 1,000,000 or more by one customer and card within 10m", Severity: "critical", Mode: "alert", Channel: "#fraud-risk",
			Metric: "amount", GroupBy: r.GroupBy, GroupValues: values, Group: g.Encoding(), Definition: r.Fingerprint(), Current: 1_300_000, Threshold: 1_000_000,
			Currency: "KRW", Window: 10 * time.Minute, Cooldown: time.Hour, CooldownKey: h.keys.Cooldown(g, r.Name),
			RecordKey:  h.keys.AlertRecord(g, r.Name, "evt-o2"),
			SilenceKey: h.keys.Silences(g, r.Name), RuleSilence: h.keys.RuleSilences(g, r.Name),
			OrderID: "o2", EventID: "evt-o2", At: time.Date(2024, 3, 1, 9, 4, 5, 0, time.UTC),
		},
		{
			ID: "big-spender/evt-o3", Rule: "big-spender", Description: "1,000,000 minor units or more by one customer and card within 10m", Severity: "critical", Mode: "alert", Channel: "#fraud-risk",
			Metric: "amount", GroupBy: r.GroupBy, GroupValues: []string{"cust-1", "fp{2}"}, Group: g2.Encoding(), Definition: r.Fingerprint(), Current: 1_000_000,
			Threshold: 1_000_000, Window: 10 * time.Minute, Cooldown: time.Hour,
			CooldownKey: h.keys.Cooldown(g2, r.Name),
			RecordKey:   h.keys.AlertRecord(g2, r.Name, "evt-o3"),
			SilenceKey:  h.keys.Silences(g2, r.Name), RuleSilence: h.keys.RuleSilences(g2, r.Name),
			OrderID: "o3", EventID: "evt-o3", At: testNow, // no occurred_at: the engine's clock
		},
	}
	got := h.sink.got()
	if len(got) != len(want) {
		t.Fatalf("got %d alerts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !got[i].At.Equal(want[i].At) {
			t.Errorf("alert %d At = %v, want %v", i, got[i].At, want[i].At)
		}
		got[i].At, want[i].At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("alert %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}

	// The cooldown key shares the counter's hash tag, so the dispatcher's
	// SET NX lands in the same slot, and the counter really is there.
	// (package lua's tests show that one tag means one slot.)
	counterKey := h.keys.Counter(g, r.State())
	tagC, tagD := hashTag(counterKey), hashTag(got[0].CooldownKey)
	if tagC == "" || tagC != tagD {
		t.Errorf("cooldown key %q and counter %q have tags %q and %q", got[0].CooldownKey, counterKey, tagD, tagC)
	}
	if tagR := hashTag(got[0].RecordKey); tagR != tagC {
		t.Errorf("record key %q has tag %q, want the counter's %q", got[0].RecordKey, tagR, tagC)
	}
	h.wantCounter(r.Name, alert.Amount, 1_300_000, values...)
}

func TestEngineShadowRuleReachesSink(t *testing.T) {
	shadow := rule("trial", alert.Count, 1, "customer_id")
	shadow.Mode = alert.ModeShadow
	h := newHarness(t, shadow)
	h.handle(ev(t, event.Order, "order_id", "o1"))
	got := h.sink.got()
	if len(got) != 1 || got[0].Mode != "shadow" || !got[0].Shadow() {
		t.Fatalf("alerts %+v, want one in shadow mode", got)
	}
}

func TestEngineSinkError(t *testing.T) {
	h := newHarness(t, rule("quiet", alert.Count, 5, "customer_id"), rule("loud", alert.Count, 1, "customer_id"))
	boom := errors.New("queue closed")
	h.sink.err = boom
	e := ev(t, event.Order, "order_id", "o1")
	h.place(e)
	if _, err := h.engine.Handle(t.Context(), []*event.Event{e}); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want it to wrap the sink's error", err)
	}
	// The batch is retried: the crossing event is answered "crossed" again
	// and its alert handed off again.
	h.sink.err = nil
	h.handle(e)
	if got := h.crossedBy("loud"); !reflect.DeepEqual(got, []string{"evt-o1", "evt-o1"}) {
		t.Fatalf("alerts handed off on %v, want evt-o1 twice", got)
	}
}

func TestAlertsCarryBoundedGroupValues(t *testing.T) {
	h := newHarness(t, rule("addr", alert.Count, 1, "shipping_address"))
	long := strings.Repeat("서울시 강남구 테헤란로 ", 500) // ~16 KB, multi-byte runes
	h.handle(ev(t, event.Order, "order_id", "o1", "shipping_address", long))
	got := h.sink.got()
	if len(got) != 1 {
		t.Fatalf("alerts = %d, want 1", len(got))
	}
	v := got[0].GroupValues[0]
	if len(v) > 1024+len("…") || !utf8.ValidString(v) || !strings.HasSuffix(v, "…") || !strings.HasPrefix(long, strings.TrimSuffix(v, "…")) {
		t.Fatalf("group value of %d bytes (valid UTF-8: %v), want the start of the address cut to 1 KB", len(v), utf8.ValidString(v))
	}
	// The key is still derived from the whole value.
	if got[0].CooldownKey != h.keys.Cooldown(h.keys.Group([]string{long}), "addr") {
		t.Fatal("the cooldown key was derived from the cut value")
	}
}

func TestEngineScriptErrors(t *testing.T) {
	t.Run("incr_and_check rejects its arguments", func(t *testing.T) {
		bad := rule("zero-threshold", alert.Count, 1, "customer_id")
		bad.Threshold = 0 // Parse would refuse it; the script must too
		h := newHarness(t, bad, rule("fine", alert.Count, 1, "customer_id"))
		e := ev(t, event.Order, "order_id", "o1")
		h.place(e)
		unprocessable, err := h.engine.Handle(t.Context(), []*event.Event{e})
		if err != nil {
			t.Fatalf("Handle = %v, want the batch done", err)
		}
		err = unprocessable[0]
		if !errors.Is(err, lua.ErrInvalidArguments) || !errors.Is(err, event.ErrUnprocessable) {
			t.Fatalf("unprocessable = %v, want lua.ErrInvalidArguments marked event.ErrUnprocessable", unprocessable)
		}
		for _, s := range []string{"zero-threshold", lua.IncrAndCheckName} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not name %q", err, s)
			}
		}
		if got := h.metric("fraudwatch_script_errors_total", "script", lua.IncrAndCheckName); got != 1 {
			t.Errorf("script_errors_total = %v, want 1", got)
		}
		// The script refused the one rule's change; the other rule counted.
		if got := h.crossedBy("zero-threshold"); len(got) != 0 {
			t.Error("a refused change raised an alert")
		}
		h.wantCounter("fine", alert.Count, 1, "cust-1")
	})
	t.Run("sales_decr meets a full Redis", func(t *testing.T) {
		// A private Redis out of memory (maxmemory 1 byte, no eviction):
		// it refuses the script's first write with OOM.
		rdb := redistest.Connect(t, redistest.Start(t).Addr)
		h := newHarnessOn(t, rdb, nil, rule("amt", alert.Amount, 1000, "customer_id"))
		for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
			if err := rdb.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		e := ev(t, event.Refund, "order_id", "o1")
		h.place(e)
		_, err := h.engine.Handle(t.Context(), []*event.Event{e})
		var rerr redis.Error
		if !errors.As(err, &rerr) || !strings.Contains(rerr.Error(), "OOM") {
			t.Fatalf("Handle = %v, want the Redis OOM error", err)
		}
		if errors.Is(err, event.ErrUnprocessable) {
			t.Fatal("a Redis error was marked unprocessable: it is worth retrying")
		}
		if !strings.Contains(err.Error(), lua.SalesDecrName) {
			t.Errorf("error %q does not name the script", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		h := newHarness(t, rule("cnt", alert.Count, 1, "customer_id"))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		e := ev(t, event.Order, "order_id", "o1")
		h.place(e)
		_, err := h.engine.Handle(ctx, []*event.Event{e})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Handle = %v, want context.Canceled", err)
		}
	})
}

func TestEngineSetRules(t *testing.T) {
	rs := []rules.Rule{rule("first", alert.Count, 1, "customer_id")}
	h := newHarness(t, rs...)
	rs[0].Enabled = false // the engine keeps its own copy
	h.handle(ev(t, event.Order, "order_id", "o1"))

	next := []rules.Rule{rule("second", alert.Count, 1, "customer_id")}
	h.engine.SetRules(next)
	next[0].Threshold = 1000
	h.handle(ev(t, event.Order, "order_id", "o2", "customer_id", "cust-2"))

	if got := h.crossedBy("first"); !reflect.DeepEqual(got, []string{"evt-o1"}) {
		t.Errorf("first crossed on %v, want evt-o1 only", got)
	}
	if got := h.crossedBy("second"); !reflect.DeepEqual(got, []string{"evt-o2"}) {
		t.Errorf("second crossed on %v, want evt-o2 only", got)
	}
	if _, ok := h.counter("first", alert.Count, "cust-2"); ok {
		t.Error("a removed rule still counted")
	}
	if got := h.metric("fraudwatch_threshold_crossings_total", "rule", "second"); got != 1 {
		t.Errorf("crossings{second} = %v, want 1", got)
	}
}

// An alert is handed to another goroutine; changing it must not change the
// rules the engine evaluates.
func TestEngineAlertDoesNotShareRuleState(t *testing.T) {
	h := newHarness(t, rule("cnt", alert.Count, 1, "customer_id"))
	h.sink.mutate = func(a *alert.Alert) { a.GroupBy[0] = "email" }
	h.handle(ev(t, event.Order, "order_id", "o1"))
	h.handle(ev(t, event.Order, "order_id", "o2", "customer_id", "cust-2"))
	got := h.sink.got()
	if len(got) != 2 || !reflect.DeepEqual(got[1].GroupBy, []string{"customer_id"}) ||
		!reflect.DeepEqual(got[1].GroupValues, []string{"cust-2"}) {
		t.Fatalf("after a receiver changed an alert, the next one is %+v", got)
	}
}

func TestNewEngineValidates(t *testing.T) {
	scripts, err := lua.New(lua.Config{}, redistest.Client(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	if _, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: "fw{x}"}, nil, scripts, sink, nil, nil); err == nil {
		t.Error("NewEngine accepted a prefix with braces")
	}
	// The prefix is redis.key_prefix's: package config defaults it, not the
	// engine.
	if _, err := rules.NewEngine(rules.EngineConfig{}, nil, scripts, sink, nil, nil); err == nil {
		t.Error("NewEngine accepted no key prefix")
	}
	cfg := rules.EngineConfig{KeyPrefix: redistest.Prefix(t)}
	if _, err := rules.NewEngine(cfg, nil, nil, sink, nil, nil); err == nil {
		t.Error("NewEngine accepted nil counters")
	}
	if _, err := rules.NewEngine(cfg, nil, scripts, nil, nil, nil); err == nil {
		t.Error("NewEngine accepted a nil sink")
	}
	reg := prometheus.NewRegistry()
	if _, err := rules.NewEngine(cfg, nil, scripts, sink, nil, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.NewEngine(cfg, nil, scripts, sink, nil, reg); err == nil {
		t.Error("a second engine registered the same metrics on one registry")
	}
	// With no rules, an event is a no-op, not a panic.
	e, err := rules.NewEngine(cfg, nil, scripts, sink, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Handle(t.Context(), []*event.Event{ev(t, event.Order)}); err != nil {
		t.Error(err)
	}
}

// Logs name the rule and where the event came from, never its values.
func TestEngineLogsNoPersonalData(t *testing.T) {
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: redistest.Prefix(t)},
		[]rules.Rule{rule("amt", alert.Amount, 100, "email")}, scripts, &fakeSink{}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	order := ev(t, event.Order, "order_id", "SECRET-order", "event_id", "SECRET-event", "email", "secret@example.com", "amount", 500)
	order.Source = event.Source{Topic: "orders", Partition: 3, Offset: 42}
	refund := ev(t, event.Refund, "order_id", "SECRET-order", "event_id", "SECRET-refund", "email", "secret@example.com", "amount", 900)
	refund.Source = event.Source{Topic: "refunds", Partition: 3, Offset: 43}
	for _, x := range []*event.Event{order, refund} {
		if _, err := e.Handle(t.Context(), []*event.Event{x}); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if !strings.Contains(out, `"rule":"amt"`) || !strings.Contains(out, `"offset":42`) || !strings.Contains(out, "clamped") {
		t.Errorf("logs do not name the rule and the source of the crossing and the clamp:\n%s", out)
	}
	for _, secret := range []string{"SECRET", "secret@example.com", "cust-1"} {
		if strings.Contains(out, secret) {
			t.Errorf("logs contain %q:\n%s", secret, out)
		}
	}
}

// Events keep flowing while the rules are swapped; -race checks the swap.
func TestEngineSetRulesWhileHandling(t *testing.T) {
	a, b := rule("a", alert.Count, 1_000_000, "customer_id"), rule("b", alert.Count, 1_000_000, "customer_id")
	h := newHarness(t, a)
	var events [2][]*event.Event
	for w := range events {
		for i := range 50 {
			e := ev(t, event.Order, "order_id", fmt.Sprintf("o%d-%d", w, i))
			e.Source = event.Source{Topic: "orders", Partition: w, Offset: int64(i)} // a partition each
			events[w] = append(events[w], e)
		}
	}
	var wg sync.WaitGroup
	for w := range events {
		wg.Go(func() {
			for _, e := range events[w] {
				if _, err := h.engine.Handle(t.Context(), []*event.Event{e}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			h.engine.SetRules([]rules.Rule{a, b})
		} else {
			h.engine.SetRules([]rules.Rule{a})
		}
	}
	wg.Wait()
	h.wantCounter("a", alert.Count, 100, "cust-1")
}

// However long an event's values and a rule's texts are, an alert stays far
// below the alerts topic's message limit, even where JSON escapes every
// byte six-fold: every string field is cut on a rune boundary, marked "…".
func TestAlertsStayFarBelowTheTopicLimit(t *testing.T) {
	const huge = 200 << 10
	escapes := strings.Repeat("<", huge)            // "\u003c" in JSON
	runes := strings.Repeat("강", huge/3)            // 3 bytes a rune
	longID := strings.Repeat("e", event.MaxIDBytes) // as long as Decode lets it be
	many := func(n int, value string) (fields []string, kv []any) {
		for i := range n {
			f := fmt.Sprintf("%s_%d", strings.Repeat("f", 2000), i)
			fields = append(fields, f)
			kv = append(kv, f, value)
		}
		return fields, kv
	}
	// Not huge: every field is found by a scan of the event.
	manyFields, manyValues := many(rules.MaxGroupBy, escapes[:4096])
	tests := []struct {
		name string
		rule func(*rules.Rule)
		kv   []any
		// clipped names the fields that must be cut.
		clipped func(a alert.Alert) []string
	}{
		{
			name:    "a huge order id",
			kv:      []any{"order_id", escapes},
			clipped: func(a alert.Alert) []string { return []string{a.OrderID} },
		},
		{
			name:    "a multi-byte order id",
			kv:      []any{"order_id", runes},
			clipped: func(a alert.Alert) []string { return []string{a.OrderID} },
		},
		{
			name: "a huge description, channel and group value",
			rule: func(r *rules.Rule) {
				r.Description, r.Channel = escapes, "#"+escapes
			},
			kv:      []any{"customer_id", runes},
			clipped: func(a alert.Alert) []string { return []string{a.Description, a.Channel, a.GroupValues[0]} },
		},
		{
			name: "many long group_by fields with huge values",
			rule: func(r *rules.Rule) { r.GroupBy = manyFields },
			kv:   manyValues,
			clipped: func(a alert.Alert) []string {
				return append(slices.Clone(a.GroupBy), a.GroupValues...)
			},
		},
		{
			name: "a distinct rule's long field",
			rule: func(r *rules.Rule) {
				r.Metric, r.Field = alert.Distinct, strings.Repeat("x", huge)
			},
			kv:      []any{strings.Repeat("x", huge), "card"},
			clipped: func(a alert.Alert) []string { return []string{a.Field} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rule("long", alert.Count, 1, "customer_id")
			if tt.rule != nil {
				tt.rule(&r)
			}
			h := newHarness(t, r)
			h.handle(ev(t, event.Order, append([]any{"event_id", longID}, tt.kv...)...))
			got := h.sink.got()
			if len(got) != 1 {
				t.Fatalf("alerts = %d, want 1", len(got))
			}
			a := got[0]
			value, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			if len(value) > alert.MaxMessageBytes/4 {
				t.Errorf("alert of %d bytes, want at most a quarter of the topic's limit (%d)", len(value), alert.MaxMessageBytes/4)
			}
			for _, s := range tt.clipped(a) {
				if !strings.HasSuffix(s, "…") || !utf8.ValidString(s) {
					t.Errorf("field of %d bytes not cut on a rune boundary with …: %.40q", len(s), s)
				}
			}
			// What the dispatcher would drop as malformed, it would never post.
			if err := a.WithinBounds(); err != nil {
				t.Errorf("the dispatcher would drop it: %v", err)
			}
			if a.EventID != longID || a.ID != "long/"+longID {
				t.Errorf("event id %q, id %q: the crossing's names must stay whole", a.EventID, a.ID)
			}
		})
	}
}

// An alert the alerts topic refuses for its size would be refused on every
// retry: its event is unprocessable (dead-lettered) instead, the batch is
// done, and the other alerts are on the topic.
func TestEngineAlertRefusedForSizeMakesItsEventUnprocessable(t *testing.T) {
	k := kafkatest.New(t)
	name := k.Topic(t, "alerts", 1, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: "2048"})
	topic, err := dispatch.NewTopic(dispatch.TopicConfig{Brokers: k.Brokers, Topic: name})
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: redistest.Prefix(t)},
		[]rules.Rule{rule("one", alert.Count, 1, "customer_id")}, scripts, topic,
		slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Clipped, its order id is still 6 KB of JSON (\u003c a byte).
	big := ev(t, event.Order, "order_id", "PRIVATE-"+strings.Repeat("<", 4000), "event_id", "e-big", "customer_id", "c-big")
	small := ev(t, event.Order, "order_id", "o-small", "customer_id", "c-small")
	big.Source = event.Source{Topic: "orders", Offset: 7}
	small.Source = event.Source{Topic: "orders", Offset: 8}

	unprocessable, err := e.Handle(t.Context(), []*event.Event{big, small})
	if err != nil {
		t.Fatalf("Handle = %v, want the batch done", err)
	}
	if len(unprocessable) != 1 || !errors.Is(unprocessable[0], event.ErrUnprocessable) {
		t.Fatalf("unprocessable = %v, want event 0 marked event.ErrUnprocessable", unprocessable)
	}
	if msg := unprocessable[0].Error(); !strings.Contains(msg, "one") || strings.Contains(msg, "PRIVATE") {
		t.Errorf("error %q: want it to name the rule and not the event (it travels in a header)", msg)
	}
	msgs := k.ReadAll(t, name, 1, 20*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("alerts on the topic = %d, want 1", len(msgs))
	}
	if a, err := alert.Decode(msgs[0].Value); err != nil || a.OrderID != "o-small" {
		t.Fatalf("the alert on the topic is %+v (%v), want o-small's", a, err)
	}
	if out := logs.String(); !strings.Contains(out, `"offset":7`) || strings.Contains(out, "PRIVATE") {
		t.Errorf("log does not name the source, or names the order:\n%s", out)
	}
}

// How Handle takes the sink's refusals: alerts refused for their size make
// their events unprocessable; anything else is a failed batch.
func TestEngineSinkRefusals(t *testing.T) {
	tooLarge := func(idx ...int) error {
		return &alert.TooLargeError{Refused: idx, Err: errors.New("message too large")}
	}
	tests := []struct {
		name              string
		err               error
		wantErr           bool
		wantUnprocessable []int // indexes of events
	}{
		{name: "the first alert refused", err: tooLarge(0), wantUnprocessable: []int{0}},
		{name: "both refused", err: tooLarge(0, 1), wantUnprocessable: []int{0, 2}},
		{name: "a refusal wrapped", err: fmt.Errorf("sink: %w", tooLarge(1)), wantUnprocessable: []int{2}},
		{name: "an index out of range is a failed batch", err: tooLarge(5), wantErr: true},
		{name: "no alert named is a failed batch", err: tooLarge(), wantErr: true},
		{name: "any other error is a failed batch", err: errors.New("broker down"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, rule("one", alert.Count, 1, "customer_id"))
			h.sink.err = tt.err
			// Events 0 and 2 cross (alerts 0 and 1); event 1 is a second
			// order of event 0's group.
			evs := []*event.Event{
				ev(t, event.Order, "order_id", "o1", "customer_id", "a"),
				ev(t, event.Order, "order_id", "o2", "customer_id", "a"),
				ev(t, event.Order, "order_id", "o3", "customer_id", "b"),
			}
			h.place(evs...)
			unprocessable, err := h.engine.Handle(t.Context(), evs)
			if tt.wantErr {
				if err == nil || !errors.Is(err, tt.err) {
					t.Fatalf("Handle = %v, %v; want an error wrapping %v", unprocessable, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for i, err := range unprocessable {
				if !errors.Is(err, event.ErrUnprocessable) {
					t.Errorf("event %d: %v, want event.ErrUnprocessable", i, err)
				}
				got = append(got, i)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantUnprocessable) {
				t.Fatalf("unprocessable events %v, want %v", got, tt.wantUnprocessable)
			}
		})
	}
}

// swapping is the scripts, but the first batch of calls it hands out
// first runs swap: a reload landing while a batch is evaluated.
type swapping struct {
	*lua.Scripts
	once sync.Once
	swap func()
}

func (s *swapping) Batch() *lua.Batch {
	s.once.Do(s.swap)
	return s.Scripts.Batch()
}

// A new rule set is put in force between batches: a batch evaluated while
// it lands runs wholly under the set it began with, and the next batch
// under the new one (docs/configuration.md, Rules).
func TestRulesChangeBetweenBatches(t *testing.T) {
	old := rule("r", alert.Count, 2, "customer_id")
	changed := old
	changed.Severity, changed.Description = alert.SeverityCritical, "the new set"
	var h *harness
	h = newHarnessWith(t, func(s *lua.Scripts) counting {
		return &swapping{Scripts: s, swap: func() { h.engine.SetRules([]rules.Rule{changed}) }}
	}, old)
	h.handle(ev(t, event.Order, "order_id", "a1", "customer_id", "a"), ev(t, event.Order, "order_id", "a2", "customer_id", "a"))
	h.handle(ev(t, event.Order, "order_id", "b1", "customer_id", "b"), ev(t, event.Order, "order_id", "b2", "customer_id", "b"))
	got := h.sink.got()
	if len(got) != 2 {
		t.Fatalf("%d alerts, want one a batch", len(got))
	}
	if got[0].Severity != old.Severity || got[0].Description != old.Description {
		t.Errorf("the batch the reload landed in alerted as %s %q, want the set it began with", got[0].Severity, got[0].Description)
	}
	if got[1].Severity != alert.SeverityCritical || got[1].Description != "the new set" {
		t.Errorf("the next batch alerted as %s %q, want the new set", got[1].Severity, got[1].Description)
	}
}

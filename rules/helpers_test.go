package rules_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
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
	CounterEvidence(ctx context.Context, keys []string) ([][]string, error)
	Seal(ctx context.Context, since string, seals []lua.Seal) error
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
	v, err := redistest.FixedCount(h.t.Context(), h.rdb, h.windowKey(name, values...))
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
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

// wantStoredEvidence checks what Redis holds of a rule's evidence for a
// group: whether any entry is kept and, when stored > 0, how many. A fixed
// count or amount window keeps its entries in its hash, a field each
// beside its count; a sliding or distinct window's are a string of
// entries under a key of its own.
func (h *harness) wantStoredEvidence(r rules.Rule, value string, keeps bool, stored int) {
	h.t.Helper()
	ctx := h.t.Context()
	g := h.keys.Group([]string{value})
	own := h.keys.Evidence(g, r.State())
	n := 0
	if r.Metric == alert.Distinct || r.WindowType == alert.Sliding {
		n = strings.Count(h.rdb.Get(ctx, own).Val(), lua.EvidenceSep)
	} else {
		if h.rdb.Exists(ctx, own).Val() == 1 {
			h.t.Errorf("a fixed window's evidence under a key of its own, %s", own)
		}
		n = len(h.rdb.HKeys(ctx, h.keys.Counter(g, r.State())).Val())
		n = max(n-1, 0) // its count, c
	}
	if n > 0 != keeps {
		h.t.Errorf("evidence kept: %v (%d entries), want %v", n > 0, n, keeps)
	}
	if stored > 0 && n != stored {
		h.t.Errorf("evidence holds %d entries, want %d", n, stored)
	}
}

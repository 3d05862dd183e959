package rules_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

// sealing is the real scripts, counting the seals asked for; it fails
// them while fail is set.
type sealing struct {
	*lua.Scripts
	mu    sync.Mutex
	calls int
	fail  error
}

func (s *sealing) Seal(ctx context.Context, since string, seals []lua.Seal) error {
	s.mu.Lock()
	s.calls++
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return s.Scripts.Seal(ctx, since, seals)
}

func (s *sealing) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// sealOf reads the seal of a, as published, from its crossing's marks:
// published_at in ms, or "" when there is none.
func (h *harness) sealOf(a alert.Alert, state string) string {
	h.t.Helper()
	// As the dispatcher reads it: from the topic's JSON.
	data, err := json.Marshal(a)
	if err != nil {
		h.t.Fatal(err)
	}
	read, err := alert.Decode(data)
	if err != nil {
		h.t.Fatal(err)
	}
	g, err := h.keys.ParseGroup(read.Group)
	if err != nil {
		h.t.Fatal(err)
	}
	seal := read.Seal()
	v, err := h.rdb.HGet(h.t.Context(), h.keys.Marks(g, state), lua.SealField(lua.IDOf(read.EventID), seal[:])).Result()
	if err != nil {
		return ""
	}
	return v
}

// The engine seals each alert it publishes, beside its crossing's mark,
// before it publishes it, and dates it; batches without crossings ask for
// no seal. A failed seal fails the batch, publishing nothing.
func TestEngineSealsWhatItPublishes(t *testing.T) {
	r := rule("orders", alert.Count, 2, "customer_id")
	r.Evidence = 5
	var s *sealing
	h := newHarnessWith(t, func(scripts *lua.Scripts) counting { s = &sealing{Scripts: scripts}; return s }, r)
	h.handle(ev(t, event.Order, "order_id", "o1", "currency", "KRW"))
	if n := s.count(); n != 0 {
		t.Fatalf("a batch without crossings asked for %d seals, want none", n)
	}
	boom := errors.New("redis down")
	s.fail = boom
	crossing := ev(t, event.Order, "order_id", "o2", "currency", "KRW", "occurred_at", "2024-03-01T09:00:01.123456789Z")
	h.place(crossing)
	if _, err := h.engine.Handle(t.Context(), []*event.Event{crossing}); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want the seal's error", err)
	}
	if got := h.sink.got(); len(got) != 0 {
		t.Fatalf("published %d alerts without their seal", len(got))
	}
	s.fail = nil
	h.handle(crossing) // the batch retried
	got := h.sink.got()
	if len(got) != 1 || len(got[0].Evidence) != 2 {
		t.Fatalf("published %+v, want the crossing with its evidence", got)
	}
	a := got[0]
	if !a.PublishedAt.Equal(testNow) {
		t.Errorf("published_at %v, want the engine's clock %v", a.PublishedAt, testNow)
	}
	if v := h.sealOf(a, r.State()); v != "1709283600000" {
		t.Errorf("seal of the published alert holds %q, want its published_at in ms", v)
	}
	a.OrderID = "o-forged"
	if v := h.sealOf(a, r.State()); v != "" {
		t.Errorf("an alert changed after publishing has a seal: %q", v)
	}
	// The first seal says when sealing began here, once (the dispatcher
	// takes unsealed alerts for an hour after it).
	if v := h.rdb.Get(t.Context(), h.keys.SealsSince()).Val(); v != "1709283600000" {
		t.Errorf("seals-since %q, want the first seal's published_at in ms", v)
	}
}

// A batch retried after its alerts were sealed (the topic failed) seals
// them again, as published the second time: each version fraudwatch
// published is sealed, each found by its own content.
func TestEachPublishedVersionIsSealed(t *testing.T) {
	r := rule("orders", alert.Count, 1, "customer_id")
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	keys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	clock := testNow
	sink := &fakeSink{err: errors.New("topic down")}
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: prefix, Now: func() time.Time { return clock }}, []rules.Rule{r}, scripts, sink, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, engine: e, rdb: rdb, prefix: prefix, keys: keys, sink: sink, rules: []rules.Rule{r}}
	o := ev(t, event.Order, "order_id", "o1")
	h.place(o)
	if _, err := e.Handle(t.Context(), []*event.Event{o}); err == nil {
		t.Fatal("Handle succeeded with the topic down")
	}
	sink.err, clock = nil, clock.Add(1500*time.Millisecond)
	h.handle(o)
	got := sink.got()
	if len(got) != 2 || got[0].PublishedAt.Equal(got[1].PublishedAt) {
		t.Fatalf("published %+v, want the crossing twice, dated apart", got)
	}
	for i, a := range got {
		if v := h.sealOf(a, r.State()); v != ms(a.PublishedAt) {
			t.Errorf("version %d: seal %q, want %s", i, v, ms(a.PublishedAt))
		}
	}
}

func ms(t time.Time) string {
	b, _ := json.Marshal(t.UnixMilli())
	return string(b)
}

package rules_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Fixed windows are plain counters, and each bucket remembers the last
// offset it applied from each partition: these tests hold what that layout
// depends on (README, Delivery guarantees).

// orderAt is an order of customer at offset of the orders topic's
// partition 0.
func orderAt(t *testing.T, offset int64, customer string) *event.Event {
	t.Helper()
	e := ev(t, event.Order, "order_id", fmt.Sprint("o", offset), "customer_id", customer)
	e.Source = event.Source{Topic: "orders", Offset: offset}
	return e
}

func orders(t *testing.T, from, to int64, customer string) []*event.Event {
	t.Helper()
	var evs []*event.Event
	for o := from; o <= to; o++ {
		evs = append(evs, orderAt(t, o, customer))
	}
	return evs
}

// handleAll runs a batch that must be processed whole.
func handleAll(t *testing.T, e *rules.Engine, evs []*event.Event) {
	t.Helper()
	if unprocessable, err := e.Handle(t.Context(), evs); err != nil || len(unprocessable) > 0 {
		t.Fatalf("Handle = %v, %v", unprocessable, err)
	}
}

// A bucket with more windows than one call takes is split over calls
// between events, never inside one: the second call would take the
// event's offset as applied by the first, and skip its other windows.
func TestAnEventIsNeverSplitOverCalls(t *testing.T) {
	rs := []rules.Rule{
		rule("a", alert.Count, 100, "customer_id"), rule("b", alert.Count, 100, "customer_id"),
		rule("c", alert.Amount, 1_000_000, "customer_id"),
	}
	h := newHarness(t, rs...)
	// 30 customers of one bucket: 90 windows, which one call (64) cannot
	// take, with 64 falling inside the 22nd event's three.
	var customers []string
	tag := h.keys.Group([]string{"c0"}).Tag()
	for i := 0; len(customers) < 30; i++ {
		if c := fmt.Sprint("c", i); h.keys.Group([]string{c}).Tag() == tag {
			customers = append(customers, c)
		}
	}
	var evs []*event.Event
	for i, c := range customers {
		evs = append(evs, orderAt(t, int64(i), c))
	}
	handleAll(t, h.engine, evs)
	for _, c := range customers {
		h.wantCounter("a", alert.Count, 1, c)
		h.wantCounter("b", alert.Count, 1, c)
		h.wantCounter("c", alert.Amount, 100, c)
	}
}

// An event that more fixed rules count into one bucket than a call takes
// is unprocessable, rather than counted in part: never silently.
func TestTooManyFixedRulesForOneCall(t *testing.T) {
	var rs []rules.Rule
	for i := range lua.MaxWindows + 1 {
		rs = append(rs, rule(fmt.Sprint("r", i), alert.Count, 100, "customer_id"))
	}
	h := newHarness(t, rs...)
	unprocessable, err := h.engine.Handle(t.Context(), []*event.Event{orderAt(t, 0, "c1")})
	if err != nil || len(unprocessable) != 1 || unprocessable[0] == nil {
		t.Fatalf("Handle = %v, %v; want the event unprocessable", unprocessable, err)
	}
	h.wantCounter("r0", alert.Count, 1, "c1")
	if n, ok := h.counter(fmt.Sprint("r", lua.MaxWindows), alert.Count, "c1"); ok {
		t.Errorf("the rule past the call's windows counted %d", n)
	}
}

// A rule put in force counts the events processed after it: the events a
// partition redelivers from before it took effect were applied to their
// bucket, and it does not count them either, nor anything twice.
func TestARuleCountsTheEventsAfterItTakesEffect(t *testing.T) {
	old := rule("old", alert.Count, 100, "customer_id")
	h := newHarness(t, old)
	handleAll(t, h.engine, orders(t, 0, 4, "c1"))
	added, redefined := rule("added", alert.Count, 100, "customer_id"), old
	redefined.Window *= 2
	h.rules = append(h.rules, added)
	h.engine.SetRules([]rules.Rule{old, added, redefined})
	// A rebalance redelivers 0-4 with 5 and 6; then all of it again.
	handleAll(t, h.engine, orders(t, 0, 6, "c1"))
	handleAll(t, h.engine, orders(t, 0, 6, "c1"))
	h.wantCounter("old", alert.Count, 7, "c1")
	h.wantCounter("added", alert.Count, 2, "c1")
	key := h.keys.Counter(h.keys.Group([]string{"c1"}), redefined.State())
	if n, _ := h.rdb.Get(t.Context(), key).Int64(); n != 2 {
		t.Errorf("the redefined rule counted %d, want 2", n)
	}
}

// Windows of the layout before (hashes under "w:") are neither read nor
// written: fixed windows start afresh once, under "f:".
func TestOldLayoutWindowsAreIgnored(t *testing.T) {
	r := rule("r", alert.Count, 3, "customer_id")
	h := newHarness(t, r)
	g := h.keys.Group([]string{"c1"})
	old := h.keys.Window(g, r.State())
	h.rdb.HSet(t.Context(), old, "v", 50, lua.Source("orders", 0), 99, "r", "")
	handleAll(t, h.engine, orders(t, 0, 0, "c1"))
	h.wantCounter("r", alert.Count, 1, "c1")
	if got := h.rdb.HGetAll(t.Context(), old).Val(); got["v"] != "50" || got[lua.Source("orders", 0)] != "99" {
		t.Errorf("the old window changed: %v", got)
	}
	if len(h.sink.got()) != 0 {
		t.Error("an old window's count raised an alert")
	}
}

// A zombie replica: after a rebalance the partition's old owner still
// sends a batch it read before, whose offsets the new owner has applied in
// part, while the new owner goes on. Nothing counts twice, and only the
// event that crossed is ever answered "crossed first" (its redeliveries
// hand its alert off again, as every redelivery's does).
func TestAZombieReplicaCountsNothingTwice(t *testing.T) {
	r := rule("r", alert.Count, 12, "customer_id")
	h := newHarness(t, r)
	zombie, zombieSink := h.engineOf(t, r)
	handleAll(t, zombie, orders(t, 0, 9, "c1")) // the owner, before the rebalance
	handleAll(t, h.engine, orders(t, 5, 14, "c1"))
	handleAll(t, zombie, orders(t, 10, 19, "c1")) // stale 10-14, then 15-19 the new owner has not read yet
	handleAll(t, h.engine, orders(t, 15, 24, "c1"))
	h.wantCounter("r", alert.Count, 25, "c1")

	// The same, racing: both send overlapping batches at once, many times.
	var wg sync.WaitGroup
	for _, e := range []*rules.Engine{h.engine, zombie} {
		wg.Go(func() {
			for from := int64(25); from < 125; from += 5 {
				if unprocessable, err := e.Handle(t.Context(), orders(t, from, from+9, "c1")); err != nil || len(unprocessable) > 0 {
					t.Error(unprocessable, err)
				}
			}
		})
	}
	wg.Wait()
	h.wantCounter("r", alert.Count, 130, "c1") // offsets 0 to 129, once each
	var crossed []string
	for _, a := range append(h.sink.got(), zombieSink.got()...) {
		crossed = append(crossed, a.EventID)
	}
	slices.Sort(crossed)
	if crossed = slices.Compact(crossed); !slices.Equal(crossed, []string{"evt-o11"}) {
		t.Errorf("events answered crossed first: %v, want evt-o11 alone", crossed)
	}
}

// engineOf is another replica's engine on the harness's Redis and keys.
func (h *harness) engineOf(t *testing.T, rs ...rules.Rule) (*rules.Engine, *fakeSink) {
	t.Helper()
	scripts, err := lua.New(lua.Config{}, h.rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: h.prefix, Now: func() time.Time { return testNow }}, rs, scripts, sink, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return e, sink
}

package rules_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// Fixed windows are plain counters, and each bucket remembers the last
// offset it applied from each partition: these tests hold what that layout
// depends on (docs/design.md, Delivery guarantees).

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

// oneBucketOrders handles an order of each of 30 customers of one bucket,
// at offsets 0 to 29: with three rules, 90 windows, which one call (64)
// cannot take, with 64 falling inside the 22nd event's three.
func oneBucketOrders(t *testing.T, h *harness) []string {
	t.Helper()
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
	return customers
}

// kinds make the rules the layout tests run for: fixed, sliding, and
// distinct (fixed and sliding) windows. A distinct rule counts the orders'
// ids, so that its window's values are its orders; its metric is Distinct
// whatever the maker is given, and its threshold at most a distinct rule's.
var kinds = []func(string, alert.Metric, int64, ...string) rules.Rule{
	rule, slidingRule, distinctOrders(alert.Fixed), distinctOrders(alert.Sliding),
}

func distinctOrders(wt alert.WindowType) func(string, alert.Metric, int64, ...string) rules.Rule {
	return func(name string, _ alert.Metric, threshold int64, groupBy ...string) rules.Rule {
		return distinctRule(name, wt, "order_id", min(threshold, rules.MaxDistinctThreshold), groupBy...)
	}
}

// kindOf names a rule's kind of window, for subtests.
func kindOf(r rules.Rule) string {
	k := cmp.Or(string(r.WindowType), "fixed")
	if r.Metric == alert.Distinct {
		k = "distinct-" + k
	}
	return k
}

// A bucket with more windows than one call takes is split over calls
// between events, never inside one: the second call would take the
// event's offset as applied by the first, and skip its other windows.
// Every kind's calls are split so: the bucket's offsets are theirs.
func TestAnEventIsNeverSplitOverCalls(t *testing.T) {
	for _, mk := range kinds {
		rs := []rules.Rule{
			mk("a", alert.Count, 100, "customer_id"), mk("b", alert.Count, 100, "customer_id"),
			mk("c", alert.Amount, 1_000_000, "customer_id"),
		}
		t.Run(kindOf(rs[0]), func(t *testing.T) {
			h := newHarness(t, rs...)
			amount := int64(100)
			if rs[2].Metric == alert.Distinct {
				amount = 1 // one order's id
			}
			for _, c := range oneBucketOrders(t, h) {
				h.wantTotal(rs[0], 1, c)
				h.wantTotal(rs[1], 1, c)
				h.wantTotal(rs[2], amount, c)
			}
		})
	}
}

// A batch with more changes to a bucket than its kind's call takes
// (lua.Kind.MaxChanges: a distinct call takes fewer than the others) goes
// in several calls, in order: every order counts in its window, and the
// threshold, past the first call, is crossed once, by its order.
func TestALargeBatchCrossesOnceOverSeveralCalls(t *testing.T) {
	most := int64(lua.Distinct.MaxChanges())
	for _, mk := range kinds {
		r := mk("r", alert.Count, most+1, "customer_id")
		t.Run(kindOf(r), func(t *testing.T) {
			h := newHarness(t, r)
			handleAll(t, h.engine, orders(t, 0, 2*most, "c1"))
			if got := h.crossedBy("r"); !slices.Equal(got, []string{fmt.Sprint("evt-o", most)}) {
				t.Errorf("crossed by %v, want evt-o%d alone", got, most)
			}
			if a := h.sink.got(); len(a) != 1 || a[0].Current != most+1 {
				t.Errorf("alerts %+v, want one at %d", a, most+1)
			}
			h.wantTotal(r, 2*most+1, "c1")
		})
	}
}

// An event that more rules of one kind count into one bucket than a call
// takes is unprocessable, rather than counted in part: never silently.
func TestTooManyRulesForOneCall(t *testing.T) {
	for _, mk := range kinds {
		var rs []rules.Rule
		for i := range lua.MaxWindows + 1 {
			rs = append(rs, mk(fmt.Sprint("r", i), alert.Count, 100, "customer_id"))
		}
		t.Run(kindOf(rs[0]), func(t *testing.T) {
			h := newHarness(t, rs...)
			unprocessable, err := h.engine.Handle(t.Context(), []*event.Event{orderAt(t, 0, "c1")})
			if err != nil || len(unprocessable) != 1 || unprocessable[0] == nil {
				t.Fatalf("Handle = %v, %v; want the event unprocessable", unprocessable, err)
			}
			h.wantTotal(rs[0], 1, "c1")
			past := h.windowKey(fmt.Sprint("r", lua.MaxWindows), "c1")
			if n := h.rdb.Exists(t.Context(), past).Val(); n != 0 {
				t.Errorf("the rule past the call's windows counted (%s exists)", past)
			}
		})
	}
}

// A rule put in force counts the events processed after it: the events a
// partition redelivers from before it took effect were applied to their
// bucket, and it does not count them either, nor anything twice. The same
// for every kind of rule: their buckets' offsets are shared.
func TestARuleCountsTheEventsAfterItTakesEffect(t *testing.T) {
	for _, mk := range kinds {
		old := mk("old", alert.Count, 100, "customer_id")
		t.Run(kindOf(old), func(t *testing.T) {
			h := newHarness(t, old)
			handleAll(t, h.engine, orders(t, 0, 4, "c1"))
			added, redefined := mk("added", alert.Count, 100, "customer_id"), old
			redefined.Window *= 2
			h.rules = append(h.rules, added)
			h.engine.SetRules([]rules.Rule{old, added, redefined})
			// A rebalance redelivers 0-4 with 5 and 6; then all of it again.
			handleAll(t, h.engine, orders(t, 0, 6, "c1"))
			handleAll(t, h.engine, orders(t, 0, 6, "c1"))
			h.wantTotal(old, 7, "c1")
			h.wantTotal(added, 2, "c1")
			if n := h.total(redefined, "c1"); n != 2 {
				t.Errorf("the redefined rule counted %d, want 2", n)
			}
		})
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
// hand its alert off again, as every redelivery's does). A distinct window
// holds the threshold + 1 latest values, and a value counted again is
// still one: there the test holds that one event alone crosses.
func TestAZombieReplicaCountsNothingTwice(t *testing.T) {
	for _, mk := range kinds {
		r := mk("r", alert.Count, 12, "customer_id")
		t.Run(kindOf(r), func(t *testing.T) { zombieCountsNothingTwice(t, r) })
	}
}

func zombieCountsNothingTwice(t *testing.T, r rules.Rule) {
	h := newHarness(t, r)
	zombie, zombieSink := h.engineOf(t, r)
	handleAll(t, zombie, orders(t, 0, 9, "c1")) // the owner, before the rebalance
	handleAll(t, h.engine, orders(t, 5, 14, "c1"))
	handleAll(t, zombie, orders(t, 10, 19, "c1")) // stale 10-14, then 15-19 the new owner has not read yet
	handleAll(t, h.engine, orders(t, 15, 24, "c1"))
	h.wantTotal(r, 25, "c1")

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
	h.wantTotal(r, 130, "c1") // offsets 0 to 129, once each
	var crossed []string
	for _, a := range append(h.sink.got(), zombieSink.got()...) {
		crossed = append(crossed, a.EventID)
	}
	slices.Sort(crossed)
	if crossed = slices.Compact(crossed); !slices.Equal(crossed, []string{"evt-o11"}) {
		t.Errorf("events answered crossed first: %v, want evt-o11 alone", crossed)
	}
}

// wantTotal checks what a count rule's window of a group holds; a distinct
// rule's, up to the threshold + 1 values it keeps.
func (h *harness) wantTotal(r rules.Rule, want int64, values ...string) {
	h.t.Helper()
	if r.Metric == alert.Distinct {
		want = min(want, r.Threshold+1)
	}
	if got := h.total(r, values...); got != want {
		h.t.Errorf("%s window %s %q holds %d, want %d", kindOf(r), r.Name, values, got, want)
	}
}

// total is what rule r's window of a group holds: a fixed window's
// counter, the sum of a sliding window's buckets, or how many values a
// distinct window holds (0 for none).
func (h *harness) total(r rules.Rule, values ...string) int64 {
	h.t.Helper()
	g := h.keys.Group(values)
	switch {
	case r.Metric == alert.Distinct:
		n, err := h.rdb.ZCard(h.t.Context(), h.keys.Values(g, r.State())).Result()
		if err != nil {
			h.t.Fatal(err)
		}
		return n
	case r.WindowType != alert.Sliding:
		v, err := redistest.FixedCount(h.t.Context(), h.rdb, h.keys.Counter(g, r.State()))
		if err != nil && !errors.Is(err, redis.Nil) {
			h.t.Fatal(err)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	fields, err := h.rdb.HGetAll(h.t.Context(), h.keys.Window(g, r.State())).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	var got int64
	for f, v := range fields {
		if f == "k" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			h.t.Fatalf("window field %s = %q", f, v)
		}
		got += n
	}
	return got
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

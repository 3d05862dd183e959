package rules_test

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

func slidingRule(name string, m alert.Metric, threshold int64, groupBy ...string) rules.Rule {
	r := rule(name, m, threshold, groupBy...)
	r.WindowType, r.Lateness = alert.Sliding, time.Minute
	return r
}

func distinctRule(name string, wt alert.WindowType, field string, threshold int64, groupBy ...string) rules.Rule {
	r := rule(name, alert.Distinct, threshold, groupBy...)
	r.Field, r.WindowType = field, wt
	if wt == alert.Sliding {
		r.Lateness = time.Minute
	}
	return r
}

// base is the time the windows' tests start at: a day before the engine's
// clock, so that their events are never from the future.
var base = testNow.Add(-24 * time.Hour)

// at is an order of cust-1 at a time after base, with an id of its own.
func at(t *testing.T, d time.Duration, kv ...any) *event.Event {
	return atTime(t, base.Add(d), kv...)
}

func atTime(t *testing.T, when time.Time, kv ...any) *event.Event {
	id := fmt.Sprintf("o-%d", when.Sub(base))
	return ev(t, event.Order, append([]any{"order_id", id, "event_id", "evt-" + id,
		"occurred_at", when.Format(time.RFC3339Nano)}, kv...)...)
}

func alertsOf(h *harness, rule string) int {
	n := 0
	for _, a := range h.sink.got() {
		if a.Rule == rule {
			n++
		}
	}
	return n
}

// Two orders in the last 10 s of a minute and two in the first 10 s of the
// next: four in 20 s. The sliding rule sees them; a fixed window that
// opened with an order 50 s earlier ends between them, and never holds 3.
func TestStraddlingBurst(t *testing.T) {
	h := newHarness(t, rule("fixed", alert.Count, 3, "customer_id"), slidingRule("sliding", alert.Count, 3, "customer_id"))
	// Fixed windows run on Redis's clock: the first order opens one, and
	// the test ends it as the minute would.
	fixed := h.windowKey("fixed", "cust-1")
	h.handle(at(t, 0))
	h.rdb.Del(t.Context(), fixed)
	h.handle(at(t, 100*time.Second), at(t, 105*time.Second))
	h.rdb.Del(t.Context(), fixed)
	h.handle(at(t, 112*time.Second), at(t, 118*time.Second))
	if n := alertsOf(h, "sliding"); n != 1 {
		t.Errorf("sliding rule: %d alerts, want 1", n)
	}
	if n := alertsOf(h, "fixed"); n != 0 {
		t.Errorf("fixed rule: %d alerts, want 0 (its window ended mid-burst)", n)
	}
	a := h.sink.got()[0]
	if a.WindowType != alert.Sliding || a.Current != 3 || a.OrderID != "o-112000000000" {
		t.Errorf("alert %+v", a)
	}
}

// A backlog counted at full speed: orders an hour apart in event time
// never meet in a sliding window, however fast they arrive; the fixed
// rule, on processing time, crosses.
func TestBacklogInEventTime(t *testing.T) {
	h := newHarness(t, rule("fixed", alert.Count, 3, "customer_id"), slidingRule("sliding", alert.Count, 3, "customer_id"))
	var evs []*event.Event
	for i := range 5 {
		evs = append(evs, at(t, time.Duration(i)*time.Hour))
	}
	h.handle(evs...)
	if n := alertsOf(h, "sliding"); n != 0 {
		t.Errorf("sliding rule: %d alerts on a backlog, want 0", n)
	}
	if n := alertsOf(h, "fixed"); n != 1 {
		t.Errorf("fixed rule: %d alerts on a backlog, want 1", n)
	}
}

func TestSlidingEventTime(t *testing.T) {
	tests := []struct {
		name   string
		events func(t *testing.T) []*event.Event
		alerts int
		late   float64
		future float64
	}{
		{"occurred_at decides", func(t *testing.T) []*event.Event {
			return []*event.Event{at(t, 0), at(t, 30*time.Second), at(t, 59*time.Second)}
		}, 1, 0, 0},
		{"the Kafka record's time stands in for occurred_at", func(t *testing.T) []*event.Event {
			var evs []*event.Event
			for i := range 3 {
				e := ev(t, event.Order, "order_id", fmt.Sprint("k", i))
				e.Source = event.Source{Topic: "orders", Offset: int64(1000 + i), Time: base.Add(time.Duration(i) * 2 * time.Minute)}
				evs = append(evs, e)
			}
			return evs
		}, 0, 0, 0},
		{"a late order is not counted and is counted as late", func(t *testing.T) []*event.Event {
			return []*event.Event{at(t, 0), at(t, 10*time.Second), at(t, -10*time.Minute), at(t, 20*time.Second)}
		}, 1, 1, 0},
		{"a time far ahead is taken as now", func(t *testing.T) []*event.Event {
			// Three orders an hour ahead would make the fourth, now, late.
			return []*event.Event{atTime(t, testNow.Add(time.Hour)), atTime(t, testNow.Add(2*time.Hour)), atTime(t, testNow)}
		}, 1, 0, 2},
		// docs/windows.md: more than a minute ahead is the future; a minute is not.
		{"a minute ahead is not the future, a minute and a second is", func(t *testing.T) []*event.Event {
			return []*event.Event{atTime(t, testNow.Add(time.Minute)), atTime(t, testNow.Add(time.Minute+time.Second))}
		}, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, slidingRule("s", alert.Count, 3, "customer_id"))
			h.handle(tt.events(t)...)
			if n := alertsOf(h, "s"); n != tt.alerts {
				t.Errorf("%d alerts, want %d", n, tt.alerts)
			}
			if n := h.metric("fraudwatch_events_late_total", "rule", "s"); n != tt.late {
				t.Errorf("late = %v, want %v", n, tt.late)
			}
			if n := h.metric("fraudwatch_events_future_total", "", ""); n != tt.future {
				t.Errorf("future = %v, want %v", n, tt.future)
			}
		})
	}
}

func TestSlidingAmountsAndRefunds(t *testing.T) {
	h := newHarness(t, slidingRule("amt", alert.Amount, 1000, "customer_id"), slidingRule("cnt", alert.Count, 3, "customer_id"))
	refund := ev(t, event.Refund, "order_id", "o-0", "event_id", "refund-1", "amount", 500,
		"occurred_at", base.Add(10*time.Second).Format(time.RFC3339))
	h.handle(at(t, 0, "amount", 600), at(t, 5*time.Second, "amount", 300), refund)
	h.handle(at(t, 20*time.Second, "amount", 500))
	if n := alertsOf(h, "amt"); n != 0 {
		t.Errorf("amount rule crossed at 900 (1400 less a 500 refund)")
	}
	h.handle(at(t, 30*time.Second, "amount", 100))
	if n := alertsOf(h, "amt"); n != 1 {
		t.Errorf("amount rule: %d alerts, want 1 at 1000", n)
	}
	if n := alertsOf(h, "cnt"); n != 1 {
		t.Errorf("count rule: %d alerts, want 1: refunds do not lower counts", n)
	}
}

func TestDistinctRules(t *testing.T) {
	for _, wt := range []alert.WindowType{alert.Fixed, alert.Sliding} {
		t.Run(string(wt), func(t *testing.T) {
			h := newHarness(t, distinctRule("cards", wt, "card_fingerprint", 3, "customer_id"))
			card := func(d time.Duration, fp string) *event.Event { return at(t, d, "card_fingerprint", fp, "amount", 100) }
			h.handle(card(0, "fp-a"), card(time.Second, "fp-a"), card(2*time.Second, "fp-b"))
			// A refund and an order without the field change nothing.
			h.handle(ev(t, event.Refund, "order_id", "o-x", "event_id", "r-x", "card_fingerprint", "fp-z"), at(t, 3*time.Second))
			if n := alertsOf(h, "cards"); n != 0 {
				t.Fatalf("%d alerts at 2 distinct cards", n)
			}
			h.handle(card(4*time.Second, "fp-c"), card(5*time.Second, "fp-d"))
			got := h.sink.got()
			if len(got) != 1 || got[0].Current != 3 || got[0].Field != "card_fingerprint" || got[0].Metric != alert.Distinct {
				t.Fatalf("alerts %+v, want one at the third card", got)
			}
		})
	}
}

func TestWhereFilters(t *testing.T) {
	r := rule("krw-big", alert.Count, 2, "customer_id")
	lo := int64(10_000)
	r.Where = []rules.Condition{{Field: "amount", GTE: &lo}, {Field: "currency", In: []string{"KRW"}}}
	h := newHarness(t, r)
	h.handle(
		at(t, 0, "amount", 50_000, "currency", "USD"),
		at(t, time.Second, "amount", 5_000, "currency", "KRW"),
		at(t, 2*time.Second, "amount", 50_000),
		at(t, 3*time.Second, "amount", 50_000, "currency", "krw"),
	)
	h.wantCounter("krw-big", alert.Count, 1, "cust-1")
	h.handle(at(t, 4*time.Second, "amount", 10_000, "currency", "KRW"))
	if n := alertsOf(h, "krw-big"); n != 1 {
		t.Fatalf("%d alerts, want 1", n)
	}
}

// A refund subtracts only from the amount rules whose where: it meets, in
// fixed and sliding windows alike.
func TestWhereFiltersRefunds(t *testing.T) {
	for name, r := range map[string]rules.Rule{"fixed": rule("krw", alert.Amount, 1000, "customer_id"), "sliding": slidingRule("krw", alert.Amount, 1000, "customer_id")} {
		t.Run(name, func(t *testing.T) {
			r.Where = []rules.Condition{{Field: "currency", In: []string{"KRW"}}}
			h := newHarness(t, r)
			refund := func(id string, d time.Duration, currency string) *event.Event {
				return ev(t, event.Refund, "order_id", "o-"+id, "event_id", id, "amount", 200, "currency", currency,
					"occurred_at", base.Add(d).Format(time.RFC3339))
			}
			h.handle(at(t, 0, "amount", 600, "currency", "KRW"), at(t, time.Second, "amount", 300, "currency", "KRW"))
			h.handle(refund("r-usd", 2*time.Second, "USD"), refund("r-krw", 3*time.Second, "KRW"))
			// 700 now: 900 less the KRW refund only.
			h.handle(at(t, 4*time.Second, "amount", 200, "currency", "KRW"))
			if n := alertsOf(h, "krw"); n != 0 {
				t.Fatalf("crossed at 900: the KRW refund was not subtracted")
			}
			h.handle(at(t, 5*time.Second, "amount", 100, "currency", "KRW"))
			if n := alertsOf(h, "krw"); n != 1 {
				t.Fatalf("%d alerts at 1000, want 1: the USD refund was subtracted", n)
			}
		})
	}
}

// A threshold lowered below what a window already holds does not alert
// that window: a crossing is the step from below to at or above. A group
// that steps across the new threshold is alerted.
func TestLoweredThresholdAlertsOnlyACrossing(t *testing.T) {
	for name, r := range map[string]rules.Rule{
		"fixed count":      rule("r", alert.Count, 5, "customer_id"),
		"sliding count":    slidingRule("r", alert.Count, 5, "customer_id"),
		"fixed distinct":   distinctRule("r", alert.Fixed, "card_fingerprint", 5, "customer_id"),
		"sliding distinct": distinctRule("r", alert.Sliding, "card_fingerprint", 5, "customer_id"),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, r)
			n := 0
			order := func(customer string) *event.Event {
				n++
				return at(t, time.Duration(n)*time.Second, "customer_id", customer, "card_fingerprint", fmt.Sprintf("fp-%d", n))
			}
			h.handle(order("cust-1"), order("cust-1"), order("cust-1"))
			lower := r
			lower.Threshold = 2
			h.engine.SetRules([]rules.Rule{lower})
			h.handle(order("cust-1"))
			if got := alertsOf(h, "r"); got != 0 {
				t.Fatalf("%d alerts for a window past the new threshold before it was lowered, want 0", got)
			}
			h.handle(order("cust-2"), order("cust-2"))
			if got := h.sink.got(); len(got) != 1 || got[0].GroupValues[0] != "cust-2" || got[0].Current != 2 {
				t.Fatalf("alerts %+v, want one, for cust-2 at 2", got)
			}
		})
	}
}

// A rule's windows are named by its definition: changing what it counts
// starts afresh, changing its threshold does not.
func TestDefinitionChangesStartFresh(t *testing.T) {
	r := rule("r", alert.Count, 100, "customer_id")
	h := newHarness(t, r)
	h.handle(at(t, 0), at(t, time.Second))
	h.wantCounter("r", alert.Count, 2, "cust-1")

	higher := r
	higher.Threshold = 200
	h.engine.SetRules([]rules.Rule{higher})
	h.handle(at(t, 2*time.Second))
	h.wantCounter("r", alert.Count, 3, "cust-1")

	for _, change := range []func(*rules.Rule){
		func(r *rules.Rule) { r.Window = 2 * time.Minute },
		func(r *rules.Rule) { r.WindowType = alert.Sliding; r.Lateness = time.Minute },
		func(r *rules.Rule) { r.Metric = alert.Amount },
		func(r *rules.Rule) { r.GroupBy = []string{"customer_id", "ip"} },
		func(r *rules.Rule) { r.Where = []rules.Condition{{Field: "currency", NotIn: []string{"USD"}}} },
	} {
		changed := higher
		change(&changed)
		if changed.State() == higher.State() {
			t.Errorf("%+v keeps the windows of %+v", changed, higher)
		}
	}
	distinctA, distinctB := distinctRule("d", alert.Fixed, "card_fingerprint", 3, "customer_id"), distinctRule("d", alert.Fixed, "ip", 3, "customer_id")
	if distinctA.State() == distinctB.State() {
		t.Error("a distinct rule's field is not part of its definition")
	}
	same := higher
	same.Cooldown, same.Severity, same.Mode, same.Channel, same.Lateness = time.Hour, alert.SeverityCritical, alert.ModeShadow, "#x", time.Hour
	same.Enabled, same.Description, same.Evidence, same.Threshold = false, "other words", 3, 7
	if same.State() != higher.State() {
		t.Error("cooldown, severity, mode, channel, lateness, enabled, description, evidence or threshold changed the windows")
	}
	longer := higher
	longer.Window = 2 * time.Minute
	h.rules = append(h.rules, longer)
	h.engine.SetRules([]rules.Rule{longer})
	h.handle(at(t, 3*time.Second))
	if n, _ := h.counter("r", alert.Count, "cust-1"); n != 3 {
		t.Errorf("old windows changed: %d", n)
	}
	key := h.keys.Counter(h.keys.Group([]string{"cust-1"}), longer.State())
	if v, _ := redistest.FixedCount(t.Context(), h.rdb, key); v != "1" {
		t.Errorf("new window holds %q, want 1", v)
	}
}

// A distinct window keeps each value as the first 8 bytes of its SHA-256,
// never the value itself: an IP address or card is personal data
// (docs/windows.md).
func TestDistinctWindowsKeepNoValue(t *testing.T) {
	for _, wt := range []alert.WindowType{alert.Fixed, alert.Sliding} {
		t.Run(string(wt), func(t *testing.T) {
			h := newHarness(t, distinctRule("ips", wt, "ip", 5, "customer_id"))
			ips := []string{"203.0.113.7", "198.51.100.23"}
			h.handle(at(t, 0, "ip", ips[0]), at(t, time.Second, "ip", ips[1]))
			key := h.keys.Values(h.keys.Group([]string{"cust-1"}), h.state("ips"))
			members, err := h.rdb.ZRange(t.Context(), key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, ip := range ips {
				sum := sha256.Sum256([]byte(ip))
				want = append(want, string(sum[:8]))
			}
			slices.Sort(members)
			slices.Sort(want)
			if !slices.Equal(members, want) {
				t.Errorf("the window keeps %q, want the values' hashes %q", members, want)
			}
		})
	}
}

// A change that keeps a rule's windows keeps its cooldowns and delivery
// records too: its next crossing names the same cooldown (docs/configuration.md,
// Changing rules without a restart).
func TestReloadKeepsCooldowns(t *testing.T) {
	r := rule("r", alert.Count, 2, "customer_id")
	h := newHarness(t, r)
	h.handle(at(t, 0), at(t, time.Second))
	first := h.sink.got()
	if len(first) != 1 {
		t.Fatalf("%d alerts, want 1", len(first))
	}
	changed := r
	changed.Threshold, changed.Severity, changed.Channel, changed.Cooldown = 3, alert.SeverityCritical, "#x", time.Hour
	h.engine.SetRules([]rules.Rule{changed})
	h.handle(at(t, 2*time.Second))
	got := h.sink.got()
	if len(got) != 2 {
		t.Fatalf("%d alerts, want a second crossing at the new threshold", len(got))
	}
	if got[1].CooldownKey == "" || got[1].CooldownKey != first[0].CooldownKey {
		t.Errorf("cooldown %q after the change, want %q as before it", got[1].CooldownKey, first[0].CooldownKey)
	}
	if got[1].Current != 3 {
		t.Errorf("crossed at %d, want 3: the window ran on", got[1].Current)
	}
}

// An event with neither occurred_at nor a record timestamp counts in a
// sliding window at the time it is processed (docs/windows.md): here with
// an order of a moment before, so that the three meet in one window.
func TestSlidingTimeFallsBackToProcessingTime(t *testing.T) {
	h := newHarness(t, slidingRule("s", alert.Count, 3, "customer_id"))
	h.handle(atTime(t, testNow.Add(-10*time.Second)))
	h.handle(ev(t, event.Order, "order_id", "o-2"), ev(t, event.Order, "order_id", "o-3"))
	got := h.sink.got()
	if len(got) != 1 || got[0].Current != 3 {
		t.Fatalf("alerts %+v, want one crossing at 3", got)
	}
	if at := got[0].At; !at.Equal(testNow) {
		t.Errorf("crossed at %v, want the time it was processed, %v", at, testNow)
	}
}

// fraudwatch_events_future_total counts each event from more than a
// minute ahead once, whatever kinds of rules are in force: with fixed
// rules alone (processing time, where the time changes nothing) the
// producer's clock is just as wrong, and several sliding rules that take
// the event's time count it once, not once a rule.
func TestEventsFromTheFutureAreCountedOnceWhateverTheRules(t *testing.T) {
	tests := []struct {
		name  string
		rules []rules.Rule
	}{
		{"a fixed count rule", []rules.Rule{rule("c", alert.Count, 3, "customer_id")}},
		{"a fixed amount rule, and a refund", []rules.Rule{rule("a", alert.Amount, 1000, "customer_id")}},
		{"two sliding rules", []rules.Rule{slidingRule("s1", alert.Count, 3, "customer_id"), slidingRule("s2", alert.Amount, 1000, "customer_id")}},
		{"a sliding and a fixed rule", []rules.Rule{slidingRule("s", alert.Count, 3, "customer_id"), rule("c", alert.Count, 3, "customer_id")}},
		{"a rule whose group_by the events lack", []rules.Rule{rule("c", alert.Count, 3, "card_fingerprint")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.rules...)
			future := atTime(t, testNow.Add(2*time.Minute), "amount", 10)
			refund := ev(t, event.Refund, "order_id", "o-r", "event_id", "refund-future", "amount", 5,
				"occurred_at", testNow.Add(time.Hour).Format(time.RFC3339))
			h.handle(future, atTime(t, testNow.Add(-time.Second)), refund, atTime(t, testNow.Add(time.Minute)))
			if n := h.metric("fraudwatch_events_future_total", "", ""); n != 2 {
				t.Errorf("future = %v, want 2 (an order and a refund more than a minute ahead, once each)", n)
			}
		})
	}
}

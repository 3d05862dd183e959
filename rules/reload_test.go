package rules_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

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

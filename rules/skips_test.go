package rules_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/rules"
)

// series are the exported series of a metric, by rule, or by rule/reason.
func (h *harness) series(name string) map[string]float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			key := labels["rule"]
			if reason, ok := labels["reason"]; ok {
				key += "/" + reason
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}

// evaluations is what the two metrics say of each rule: evaluations,
// then its skips in the order of rules.SkipReasons.
func (h *harness) evaluations() map[string][5]float64 {
	h.t.Helper()
	evaluated, skipped := h.series("fraudwatch_rule_evaluations_total"), h.series("fraudwatch_rule_skipped_total")
	out := map[string][5]float64{}
	for rule, n := range evaluated {
		v := [5]float64{n}
		for i, reason := range rules.SkipReasons {
			s, ok := skipped[rule+"/"+reason]
			if !ok {
				h.t.Errorf("no series fraudwatch_rule_skipped_total{rule=%q,reason=%q}", rule, reason)
			}
			v[i+1] = s
			delete(skipped, rule+"/"+reason)
		}
		out[rule] = v
	}
	if len(skipped) > 0 {
		h.t.Errorf("skip series of no rule evaluated: %v", slices.Sorted(maps.Keys(skipped)))
	}
	return out
}

// Every order and refund is an evaluation of each enabled rule, and an
// event the rule does not count is a skip, by the first reason that holds
// (docs/operations.md): counted on a real Redis, whose windows hold what
// was not skipped.
func TestRuleEvaluationsAndSkips(t *testing.T) {
	krw := rule("krw-orders", alert.Count, 100, "customer_id")
	krw.Where = []rules.Condition{{Field: "currency", In: []string{"KRW"}}}
	cards := rule("cards", alert.Distinct, 100, "customer_id")
	cards.Field = "card_fingerprint"
	off := rule("off", alert.Count, 100, "customer_id")
	off.Enabled = false
	h := newHarness(t, krw, rule("per-card", alert.Amount, 1_000_000, "card_fingerprint"), cards,
		rule("typo", alert.Count, 100, "custmer_id"), off)
	// Before any event every rule's series are there, at 0.
	zero := map[string][5]float64{"krw-orders": {}, "per-card": {}, "cards": {}, "typo": {}, "off": {}}
	if got := h.evaluations(); !maps.Equal(got, zero) {
		t.Errorf("before any event: %v, want %v", got, zero)
	}
	h.handle(
		ev(t, event.Order, "order_id", "o1", "currency", "KRW", "card_fingerprint", "fp1"),
		ev(t, event.Order, "order_id", "o2", "currency", "USD"),
	)
	h.handle(ev(t, event.Refund, "order_id", "o1", "event_id", "r1", "currency", "KRW", "card_fingerprint", "fp1", "amount", 40))

	// evaluations, event_type, missing_group_by, where, missing_field
	want := map[string][5]float64{
		"krw-orders": {3, 1, 0, 1, 0}, // the refund; o2 in USD
		"per-card":   {3, 0, 1, 0, 0}, // o2 has no card
		"cards":      {3, 1, 0, 0, 1}, // the refund; o2 has no card
		"typo":       {3, 1, 2, 0, 0}, // the refund first: count rules ignore refunds
		"off":        {},
	}
	if got := h.evaluations(); !maps.Equal(got, want) {
		t.Errorf("evaluations and skips\n%v\nwant\n%v", got, want)
	}
	// What was not skipped is in the windows.
	h.wantCounter("krw-orders", alert.Count, 1, "cust-1")
	h.wantCounter("per-card", alert.Amount, 60, "fp1")
	if keys := h.storedKeys(); slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "typo.") }) {
		t.Errorf("the rule every event skipped has keys: %q", keys)
	}
}

// A batch that fails is retried whole: its evaluations are counted once,
// when it is done.
func TestFailedBatchIsNotCounted(t *testing.T) {
	h := newHarness(t, rule("first", alert.Count, 1, "customer_id"))
	h.sink.err = errors.New("alerts topic down")
	o := ev(t, event.Order, "order_id", "o1")
	h.place(o)
	if _, err := h.engine.Handle(t.Context(), []*event.Event{o}); err == nil {
		t.Fatal("Handle handed off its alert to a failing sink")
	}
	if got := h.metric("fraudwatch_rule_evaluations_total", "rule", "first"); got != 0 {
		t.Errorf("a failed batch counted %v evaluations", got)
	}
	h.sink.err = nil
	if _, err := h.engine.Handle(t.Context(), []*event.Event{o}); err != nil {
		t.Fatal(err)
	}
	if got := h.metric("fraudwatch_rule_evaluations_total", "rule", "first"); got != 1 {
		t.Errorf("evaluations after the retry = %v, want 1", got)
	}
}

// A reload keeps the counts of the rules that stay, changed or not, starts
// the new ones at 0 and deletes the series of those removed.
func TestSetRulesKeepsAndDeletesRuleSeries(t *testing.T) {
	stays, goes := rule("stays", alert.Count, 100, "customer_id"), rule("goes", alert.Count, 100, "custmer_id")
	h := newHarness(t, stays, goes)
	h.handle(ev(t, event.Order, "order_id", "o1"), ev(t, event.Order, "order_id", "o2"))

	changed := stays
	changed.Window = 2 * time.Minute // a new definition, fresh windows: the same rule to its metrics
	h.engine.SetRules([]rules.Rule{changed, rule("new", alert.Count, 100, "customer_id")})
	want := map[string][5]float64{"stays": {2}, "new": {}}
	if got := h.evaluations(); !maps.Equal(got, want) {
		t.Errorf("after the reload\n%v\nwant\n%v", got, want)
	}
	h.handle(ev(t, event.Order, "order_id", "o3"))
	want = map[string][5]float64{"stays": {3}, "new": {1}}
	if got := h.evaluations(); !maps.Equal(got, want) {
		t.Errorf("after the next batch\n%v\nwant\n%v", got, want)
	}

	// Back again, a removed rule counts afresh.
	h.engine.SetRules([]rules.Rule{goes})
	h.handle(ev(t, event.Order, "order_id", "o4"))
	want = map[string][5]float64{"goes": {1, 0, 1}}
	if got := h.evaluations(); !maps.Equal(got, want) {
		t.Errorf("with the removed rule back\n%v\nwant\n%v", got, want)
	}
}

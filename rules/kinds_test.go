package rules_test

import (
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Every counting script of package lua is reached by a rule, and the
// engine answers it: a kind half added (a script no rule reaches, or a rule
// the engine does not count) fails here (CONTRIBUTING.md, "Adding a rule
// kind").
func TestEveryKindIsReachable(t *testing.T) {
	var rs []rules.Rule
	for _, m := range []alert.Metric{alert.Count, alert.Amount, alert.Distinct} {
		for _, w := range []alert.WindowType{alert.Fixed, alert.Sliding} {
			r := rule(string(m)+"-"+string(w), m, 1, "customer_id")
			r.WindowType, r.Field = w, "card_fingerprint"
			if m == alert.Amount {
				r.Threshold = 100
			}
			if w == alert.Sliding {
				r.Lateness = time.Minute
			}
			rs = append(rs, r)
		}
	}
	reached := map[lua.Kind][]string{}
	for i := range rs {
		r := &rs[i]
		reached[rules.KindOf(r, false)] = append(reached[rules.KindOf(r, false)], r.Name)
		if r.Metric == alert.Amount {
			reached[rules.KindOf(r, true)] = append(reached[rules.KindOf(r, true)], r.Name+" (refunds)")
		}
	}
	for _, k := range lua.Kinds() {
		if len(reached[k]) == 0 {
			t.Errorf("no rule reaches %s: map a rule to it in kindOf", k)
		}
	}
	if len(reached) != len(lua.Kinds()) {
		t.Errorf("rules reach kinds %v, lua has %v", reached, lua.Kinds())
	}

	// Answered: each order crosses every rule; its refund empties the
	// amount windows.
	h := newHarness(t, rs...)
	h.handle(ev(t, event.Order, "card_fingerprint", "c1"))
	crossed := map[string]bool{}
	for _, a := range h.sink.got() {
		crossed[a.Rule] = true
	}
	for _, r := range rs {
		if !crossed[r.Name] {
			t.Errorf("rule %s (%s) did not cross", r.Name, rules.KindOf(&r, false))
		}
	}
	h.handle(ev(t, event.Refund, "order_id", "ord-1", "event_id", "ref-1"))
	h.wantCounter("amount-fixed", alert.Amount, 0, "cust-1")
}

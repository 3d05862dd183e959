package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// noRedis stands for Redis and the sink where a test only plans.
type noRedis struct{}

func (noRedis) Batch() *lua.Batch                                             { return nil }
func (noRedis) AddEvidence(context.Context, []*lua.Evidence) error            { return nil }
func (noRedis) CounterEvidence(context.Context, []string) ([][]string, error) { return nil, nil }
func (noRedis) Seal(context.Context, string, []lua.Seal) error                { return nil }
func (noRedis) Publish(context.Context, ...alert.Alert) error                 { return nil }

// A plan put back holds nothing of its batch, and the plan a batch gets
// from the plans is the plan a new one would be, whatever batch it planned
// before.
func TestAPlanPutBackHoldsNothingOfItsBatch(t *testing.T) {
	rule := func(name string, m alert.Metric, wt alert.WindowType, groupBy string) Rule {
		r := Rule{Name: name, Metric: m, GroupBy: []string{groupBy}, Window: time.Minute, Threshold: 5, WindowType: wt,
			Cooldown: time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true}
		if wt == alert.Sliding {
			r.Lateness = time.Minute
		}
		if m == alert.Distinct {
			r.Field = "coupon" // which some orders lack: their group values are planned, then dropped
		}
		return r
	}
	rs := []Rule{rule("count", alert.Count, alert.Fixed, "customer_id"), rule("amount", alert.Amount, alert.Fixed, "customer_id"),
		rule("sliding", alert.Count, alert.Sliding, "card_fingerprint"), rule("distinct", alert.Distinct, alert.Fixed, "ip")}
	now := func() time.Time { return time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC) }
	engine := func() *Engine {
		e, err := NewEngine(EngineConfig{KeyPrefix: "t", Now: now}, rs, noRedis{}, noRedis{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Two batches unlike each other: their own partitions, customers,
	// sizes and refunds.
	a, b := batch(t, "orders", 3, 400, 7), batch(t, "refunds", 5, 90, 31)
	reused, fresh := engine(), engine()
	rsOf := func(e *Engine) []active { return *e.rules.Load() }
	again := 0 // batches planned on the plan of the batch before
	for i := range 10 {
		pa := reused.plan(rsOf(reused), a)
		reused.plans.put(pa)
		if err := holdsNothing(pa); err != nil {
			t.Fatalf("a plan put back: %v", err)
		}
		pb := reused.plan(rsOf(reused), b)
		want := fresh.plan(rsOf(fresh), b)
		if err := samePlans(pb, want); err != nil {
			t.Fatalf("round %d (the plan of the batch before: %v): %v", i, pa == pb, err)
		}
		if pa == pb {
			again++
		}
		reused.plans.put(pb)
		if err := holdsNothing(pb); err != nil {
			t.Fatalf("a plan put back: %v", err)
		}
		fresh.plans = plans{} // a new plan every time
	}
	if again == 0 {
		t.Fatal("no batch was planned on a plan put back") // a sync.Pool may drop one, not ten
	}
}

// batch is n orders of partition part of topic, every fourth a refund,
// spread over customers customers, every third with a coupon.
func batch(t *testing.T, topic string, part, n, customers int) []*event.Event {
	t.Helper()
	var evs []*event.Event
	for i := range n {
		c := fmt.Sprint("c", i%customers)
		typ := event.Order
		if i%4 == 3 {
			typ = event.Refund
		}
		fields := map[string]any{"event_id": fmt.Sprint(topic, i), "order_id": fmt.Sprint("o", i), "customer_id": c,
			"card_fingerprint": "card-" + c, "ip": "10.0.0." + c, "amount": 100 + i}
		if i%3 == 0 {
			fields["coupon"] = fmt.Sprint("cp", i)
		}
		data, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		e, err := event.Decode(data, typ)
		if err != nil {
			t.Fatal(err)
		}
		e.Source = event.Source{Topic: topic, Partition: part, Offset: int64(i)}
		evs = append(evs, e)
	}
	return evs
}

// holdsNothing reports what an emptied plan still holds: every slice zero
// up to its capacity, its maps and calls empty.
func holdsNothing(p *plan) error {
	switch {
	case p.opened > 0 || len(p.calls) > 0 || p.used > 0:
		return fmt.Errorf("%d sources' open calls, %d calls, %d used", p.opened, len(p.calls), p.used)
	}
	for _, o := range p.open {
		if o.src != "" {
			return fmt.Errorf("open calls of %s", o.src)
		}
		for f := range o.family {
			for b, c := range o.family[f] {
				if c != nil {
					return fmt.Errorf("an open call of family %d, bucket %d", f, b)
				}
			}
		}
	}
	for name, s := range map[string]any{"values": p.values, "pendingWindows": p.pendingWindows, "pending": p.pending,
		"event": p.event, "tooMany": p.tooMany, "tally": p.tally, "made": p.made, "windows": p.all.windows, "names": p.all.names,
		"group values": p.all.values, "changes": p.all.changes, "refs": p.all.refs} {
		v := reflect.ValueOf(s)
		v = v.Slice(0, v.Cap())
		for i := range v.Len() {
			e := v.Index(i)
			if e.Kind() == reflect.Pointer && !e.IsNil() {
				e = e.Elem() // a call made
			}
			if !e.IsZero() {
				return fmt.Errorf("%s[%d] is %+v", name, i, e)
			}
		}
	}
	return nil
}

// samePlans compares two plans of one batch, by what their calls send and
// what each change stands for.
func samePlans(got, want *plan) error {
	if len(got.calls) != len(want.calls) {
		return fmt.Errorf("%d calls, want %d", len(got.calls), len(want.calls))
	}
	for i := range got.calls {
		g, w := got.calls[i], want.calls[i]
		if !reflect.DeepEqual(g.Call, w.Call) || !reflect.DeepEqual(g.names, w.names) || !reflect.DeepEqual(g.values, w.values) {
			return fmt.Errorf("call %d:\n%+v\nwant\n%+v", i, g.Call, w.Call)
		}
		if len(g.refs) != len(w.refs) {
			return fmt.Errorf("call %d: %d refs, want %d", i, len(g.refs), len(w.refs))
		}
		for j := range g.refs {
			if g.refs[j].rule.Name != w.refs[j].rule.Name || g.refs[j].event != w.refs[j].event {
				return fmt.Errorf("call %d, change %d: rule %s event %d, want rule %s event %d", i, j,
					g.refs[j].rule.Name, g.refs[j].event, w.refs[j].rule.Name, w.refs[j].event)
			}
		}
	}
	if !reflect.DeepEqual(got.tally, want.tally) || len(got.tooMany) != len(want.tooMany) {
		return fmt.Errorf("tally %v, %d refused; want %v, %d", got.tally, len(got.tooMany), want.tally, len(want.tooMany))
	}
	return nil
}

// A batch's evidence calls, kept by its plan for the next batch, hold
// nothing of it once the plan is put back, and the next batch's calls are
// what a new plan's would be.
func TestEvidenceKeptByAPlanHoldsNothingOfItsBatch(t *testing.T) {
	// Sliding: a fixed window's evidence is written by its counting call,
	// and makes no evidence call.
	r := Rule{Name: "count", Metric: alert.Count, GroupBy: []string{"customer_id"}, Window: time.Minute, Threshold: 1000,
		WindowType: alert.Sliding, Evidence: 5, Cooldown: time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true}
	engine := func() *Engine {
		e, err := NewEngine(EngineConfig{KeyPrefix: "t", Buckets: 1}, []Rule{r}, noRedis{}, noRedis{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Every change answered near the threshold: each order makes an entry.
	evidenceOf := func(e *Engine, evs []*event.Event) (*plan, *evidence) {
		p := e.plan(*e.rules.Load(), evs)
		for _, c := range p.calls {
			c.Results = make([]lua.Counted, len(c.Changes))
			for j := range c.Results {
				c.Results[j].Current = 999
			}
		}
		_, _, x := e.answers(p, evs)
		if x == nil {
			t.Fatal("no evidence")
		}
		return p, x
	}
	reused := engine()
	pa, xa := evidenceOf(reused, batch(t, "orders", 1, 300, 100)) // more windows than a call holds
	if len(xa.calls) < 2 {
		t.Fatalf("%d evidence calls, want several", len(xa.calls))
	}
	reused.plans.put(pa)
	x := &pa.evidence
	if len(x.calls) != 0 || len(x.lists) != 0 || len(x.open) != 0 || len(x.in) != 0 {
		t.Fatalf("kept evidence: %d calls, %d lists, %d open, %d windows", len(x.calls), len(x.lists), len(x.open), len(x.in))
	}
	for i, c := range x.made {
		for _, s := range []any{c.Windows[:cap(c.Windows)], c.Entries[:cap(c.Entries)]} {
			if v := reflect.ValueOf(s); !reflect.DeepEqual(v.Interface(), reflect.MakeSlice(v.Type(), v.Len(), v.Len()).Interface()) {
				t.Fatalf("kept evidence call %d holds %+v", i, s)
			}
		}
		if c.Lists != nil {
			t.Fatalf("kept evidence call %d holds its lists", i)
		}
	}
	b := batch(t, "orders", 2, 40, 7)
	pb, xb := evidenceOf(reused, b)
	_, want := evidenceOf(engine(), b)
	if pb == pa && xb != &pb.evidence {
		t.Fatal("the kept evidence was not used")
	}
	if len(xb.calls) != len(want.calls) {
		t.Fatalf("%d evidence calls, want %d", len(xb.calls), len(want.calls))
	}
	for i := range xb.calls {
		if !reflect.DeepEqual(xb.calls[i].Windows, want.calls[i].Windows) || !reflect.DeepEqual(xb.calls[i].Entries, want.calls[i].Entries) {
			t.Fatalf("evidence call %d:\n%+v\nwant\n%+v", i, *xb.calls[i], *want.calls[i])
		}
	}
}

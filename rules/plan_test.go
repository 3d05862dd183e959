package rules

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// noCounters and noSink let a test plan without Redis or Kafka.
type noCounters struct{}

func (noCounters) Batch() *lua.Batch                                             { return nil }
func (noCounters) AddEvidence(context.Context, []*lua.Evidence) error            { return nil }
func (noCounters) CounterEvidence(context.Context, []string) ([][]string, error) { return nil, nil }
func (noCounters) Seal(context.Context, string, []lua.Seal) error                { return nil }

type noSink struct{}

func (noSink) Publish(context.Context, ...alert.Alert) error { return nil }

// A bucket's run of changes is cut into calls of at most its kind's
// MaxChanges, between events, in their order: a distinct batch larger
// than its bound becomes several calls, a count batch of the same size one.
func TestPlanCutsCallsByTheirKind(t *testing.T) {
	most := lua.Distinct.MaxChanges()
	n := 2*most + 1
	var evs []*event.Event
	for i := range n {
		evs = append(evs, &event.Event{Type: event.Order, EventID: fmt.Sprint("e", i), OrderID: fmt.Sprint("o", i),
			CustomerID: "c1", Amount: 1, Source: event.Source{Topic: "orders", Offset: int64(i)}})
	}
	rule := func(m alert.Metric, wt alert.WindowType) Rule {
		r := Rule{Name: "r", Metric: m, GroupBy: []string{"customer_id"}, Window: time.Minute, Threshold: 10,
			Cooldown: time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, WindowType: wt}
		if m == alert.Distinct {
			r.Field = "order_id"
		}
		if wt == alert.Sliding {
			r.Lateness = time.Minute
		}
		return r
	}
	tests := []struct {
		rule  Rule
		calls []int // changes a call
	}{
		{rule(alert.Distinct, alert.Fixed), []int{most, most, 1}},
		{rule(alert.Distinct, alert.Sliding), []int{most, most, 1}},
		{rule(alert.Count, alert.Fixed), []int{n}},
		{rule(alert.Count, alert.Sliding), []int{n}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.rule.Metric, "-", tt.rule.WindowType), func(t *testing.T) {
			e, err := NewEngine(EngineConfig{KeyPrefix: "fw", Now: func() time.Time { return time.Unix(1e9, 0) }},
				[]Rule{tt.rule}, noCounters{}, noSink{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := e.plan(*e.rules.Load(), evs)
			if len(p.calls) != len(tt.calls) || len(p.tooMany) != 0 {
				t.Fatalf("%d calls (%d refused), want %d", len(p.calls), len(p.tooMany), len(tt.calls))
			}
			next := 0
			for i, c := range p.calls {
				if len(c.Changes) != tt.calls[i] || len(c.Windows) != 1 || c.Kind.MaxChanges() < len(c.Changes) {
					t.Errorf("call %d of %v: %d changes, %d windows; want %d changes", i, c.Kind, len(c.Changes), len(c.Windows), tt.calls[i])
				}
				for j, ch := range c.Changes {
					if ch.Offset != int64(next) || c.refs[j].event != next || ch.Window != 0 {
						t.Fatalf("call %d change %d: offset %d, event %d; want %d", i, j, ch.Offset, c.refs[j].event, next)
					}
					next++
				}
			}
		})
	}
}

// A call names each of its windows once, also in a batch that comes back
// to a partition after another's events to the same windows (a backtest's
// batches, in time order): each change of the window goes to the one.
func TestACallNamesAWindowOnce(t *testing.T) {
	ev := func(part int, offset int64) *event.Event {
		return &event.Event{Type: event.Order, EventID: fmt.Sprint("e", part, offset), OrderID: "o", CustomerID: "c1", Amount: 1,
			Source: event.Source{Topic: "orders", Partition: part, Offset: offset}}
	}
	r := Rule{Name: "r", Metric: alert.Count, GroupBy: []string{"customer_id"}, Window: time.Minute, Threshold: 10,
		Cooldown: time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true}
	e, err := NewEngine(EngineConfig{KeyPrefix: "fw"}, []Rule{r}, noCounters{}, noSink{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := e.plan(*e.rules.Load(), []*event.Event{ev(1, 0), ev(2, 0), ev(1, 1), ev(2, 1)})
	if len(p.calls) != 2 {
		t.Fatalf("%d calls, want one a partition", len(p.calls))
	}
	for _, c := range p.calls {
		if len(c.Windows) != 1 || len(c.Changes) != 2 || c.Changes[0].Window != 0 || c.Changes[1].Window != 0 {
			t.Errorf("the call of %s: %d windows, changes %+v; want one window, both changes to it", c.Source, len(c.Windows), c.Changes)
		}
	}
}

// A call finds its window of a rule and group among up to lua.MaxWindows,
// whose groups' hashes collide in its slots: with one bucket, two rules of
// one family and 100 customers coming back in turn, every change goes to
// its own event's window, each call names a window once, and none holds
// more than lua.MaxWindows.
func TestACallFindsItsWindowsAmongMany(t *testing.T) {
	rule := func(name string, m alert.Metric) Rule {
		return Rule{Name: name, Metric: m, GroupBy: []string{"customer_id"}, Window: time.Minute, Threshold: 1000,
			Cooldown: time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true}
	}
	e, err := NewEngine(EngineConfig{KeyPrefix: "fw", Buckets: 1}, []Rule{rule("count", alert.Count), rule("amount", alert.Amount)},
		noCounters{}, noSink{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*event.Event
	for i := range 300 {
		evs = append(evs, &event.Event{Type: event.Order, EventID: fmt.Sprint("e", i), OrderID: "o", CustomerID: fmt.Sprint("c", i%100),
			Amount: 1, Source: event.Source{Topic: "orders", Offset: int64(i)}})
	}
	p := e.plan(*e.rules.Load(), evs)
	changes := 0
	for i, c := range p.calls {
		if len(c.Windows) > lua.MaxWindows {
			t.Errorf("call %d: %d windows", i, len(c.Windows))
		}
		seen := map[lua.WindowName]bool{}
		for _, n := range c.names {
			if seen[n] {
				t.Errorf("call %d names %v twice", i, n)
			}
			seen[n] = true
		}
		for j, ch := range c.Changes {
			name, ref := c.names[ch.Window], c.refs[j]
			if want := e.keys.Group([]string{evs[ref.event].CustomerID}); name.Group != want || name.Rule != ref.rule.state {
				t.Fatalf("call %d change %d (event %d, rule %s): window of %s, rule %s", i, j, ref.event, ref.rule.Name, name.Group.Encoding(), name.Rule)
			}
		}
		changes += len(c.Changes)
	}
	if changes != 600 || len(p.tooMany) != 0 {
		t.Errorf("%d changes planned (%d refused), want 600", changes, len(p.tooMany))
	}
}

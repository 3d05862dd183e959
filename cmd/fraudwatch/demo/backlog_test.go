package demo

import (
	"context"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

// backlogFixedAlerts is how many crossings the demo's fixed rules make on
// the replay of TestBacklogReplay; docs/windows.md quotes it.
const backlogFixedAlerts = 1

// backlogEvents is how many orders and refunds that backlog holds, which
// docs/windows.md quotes too.
const backlogEvents = 24297

type countingSink struct {
	mu     sync.Mutex
	byRule map[string]int
}

func (s *countingSink) Publish(_ context.Context, alerts ...alert.Alert) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range alerts {
		s.byRule[a.Rule]++
	}
	return nil
}

// A 15-minute backlog of the demo's ordinary traffic (no fraud), counted
// as fast as Redis takes it, as after an outage: the demo's rules as
// sliding windows raise nothing, while as fixed windows, which run on
// processing time, they see the 15 minutes as one.
func TestBacklogReplay(t *testing.T) {
	t.Parallel() // its own key prefix; runs while the demo runs wait
	fixed, err := config.ParseRules(builtinRules, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	all := fixed
	for _, r := range fixed {
		s := r
		s.Name, s.WindowType, s.Lateness = r.Name+"-sliding", alert.Sliding, time.Minute
		all = append(all, s)
	}
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{byRule: map[string]int{}}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	eng, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: redistest.Prefix(t), Now: func() time.Time { return start.Add(time.Hour) }},
		all, scripts, sink, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}

	// Ordinary shoppers at the demo's average rate, and their refunds.
	g := newGenerator(7)
	const rate = (minRate + maxRate) / 2
	for at := time.Duration(0); at < 15*time.Minute; at += time.Second / rate {
		g.ordinary(at)
	}
	// Four partitions by key, as the producer would spread them, each
	// handed over in batches as the consumer does.
	const partitions = 4
	parts := make([][]*event.Event, partitions)
	for _, p := range g.queue {
		msg, err := p.message(testTopics, start.Add(p.at))
		if err != nil {
			t.Fatal(err)
		}
		typ := event.Order
		if p.kind == kindRefund {
			typ = event.Refund
		}
		ev, err := event.Decode(msg.Value, typ)
		if err != nil {
			t.Fatal(err)
		}
		h := fnv.New32a()
		h.Write(msg.Key)
		n := int(h.Sum32() % partitions)
		ev.Source = event.Source{Topic: msg.Topic, Partition: n, Offset: int64(len(parts[n]))}
		parts[n] = append(parts[n], ev)
	}
	events := 0
	for _, evs := range parts {
		events += len(evs)
		for len(evs) > 0 {
			n := min(len(evs), 500)
			if bad, err := eng.Handle(t.Context(), evs[:n]); err != nil || len(bad) > 0 {
				t.Fatalf("Handle: %v %v", bad, err)
			}
			evs = evs[n:]
		}
	}

	fixedAlerts := 0
	for _, r := range fixed {
		fixedAlerts += sink.byRule[r.Name]
		if n := sink.byRule[r.Name+"-sliding"]; n != 0 {
			t.Errorf("%s as a sliding rule: %d alerts on ordinary traffic, want 0", r.Name, n)
		}
	}
	t.Logf("%d events over 15 minutes: fixed rules %d alerts %v", events, fixedAlerts, sink.byRule)
	if fixedAlerts != backlogFixedAlerts {
		t.Errorf("fixed rules: %d alerts, docs/windows.md says %d", fixedAlerts, backlogFixedAlerts)
	}
	if events != backlogEvents {
		t.Errorf("%d events in the backlog, docs/windows.md says %d", events, backlogEvents)
	}
}

package app

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// gatedNotes is notes whose posts wait for the gate to open.
type gatedNotes struct {
	notes
	gate  chan struct{}
	once  sync.Once
	begun atomic.Int32
}

func (g *gatedNotes) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	g.begun.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return alert.Receipt{}, ctx.Err()
	}
	return g.notes.Notify(ctx, a)
}

func (g *gatedNotes) open() { g.once.Do(func() { close(g.gate) }) }

// Copies of one real alert's message on the other partitions of the
// alerts topic, through a real broker, while the first is being posted:
// the alert is posted once, and the copies are acknowledged and counted.
// Before claims named their claimant (the message's place), each copy
// found the record pending and the cooldown its alert's, and posted.
func TestCopiesOfAnAlertPostOnce(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	p.cfg.Kafka.AlertsTopic = p.kafka.Topic(t, "alerts", 3)
	g := &gatedNotes{gate: make(chan struct{})}
	t.Cleanup(g.open)
	opts := p.options()
	opts.Notifier = g
	r := p.startWith(opts)
	p.orders(0, ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1})
	waitFor(t, 30*time.Second, "the alert's post begun", func() bool { return g.begun.Load() == 1 })
	real := p.kafka.ReadAll(t, p.cfg.Kafka.AlertsTopic, 1, 20*time.Second)
	if len(real) != 1 {
		t.Fatalf("%d messages on the alerts topic, want the crossing's one", len(real))
	}
	for part := range 3 {
		if part != real[0].Partition {
			p.kafka.ProduceTo(t, p.cfg.Kafka.AlertsTopic, part, real[0].Value)
		}
	}
	const rule = "orders-per-customer"
	copies := func() float64 { return r.metric("fraudwatch_alert_copies_total", "rule", rule) }
	waitFor(t, 30*time.Second, "the copies settled (or posting)", func() bool { return copies() == 2 || g.begun.Load() == 3 })
	g.open()
	sent := func() float64 { return r.metric("fraudwatch_alerts_sent_total", "rule", rule) }
	waitFor(t, 30*time.Second, "all three messages settled", func() bool { return sent()+copies() == 3 })
	if posts := g.list(); len(posts) != 1 || posts[0].EventID != "3" {
		t.Fatalf("%d posts of one alert on three partitions, want 1", len(posts))
	}
	if sent() != 1 {
		t.Errorf("sent_total = %v, want 1", sent())
	}
}

package app

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// forged is an alert as someone who can write the alerts topic would make
// it, of the pipeline's count rule: a valid-looking rule, definition,
// group and event id, none of which Redis saw cross.
func (p *pipeline) forged(group string, values []string, eventID string, at time.Time) kafka.Message {
	p.t.Helper()
	var def string
	for _, r := range p.cfg.Rules {
		if r.Name == "orders-per-customer" {
			def = r.Fingerprint()
		}
	}
	g := p.keys.Group([]string{group})
	a := alert.Alert{
		ID: "orders-per-customer/" + eventID, Rule: "orders-per-customer", Severity: alert.SeverityCritical,
		Mode: alert.ModeAlert, Metric: alert.Count, GroupBy: []string{"customer_id"}, GroupValues: values,
		Group: g.Encoding(), Definition: def, Current: 3, Threshold: 3, Window: time.Minute, OrderID: "o-" + eventID,
		EventID: eventID, At: at, CooldownKey: p.keys.Cooldown(g, "orders-per-customer"),
		RecordKey: p.keys.AlertRecord(g, "orders-per-customer", eventID),
	}
	value, err := json.Marshal(a)
	if err != nil {
		p.t.Fatal(err)
	}
	// Keyed as the engine keys it: on the partition of the group's real
	// alerts, ahead of them.
	return kafka.Message{Key: []byte(a.CooldownKey), Value: value, Time: at}
}

// keysOf lists the Redis keys of the pipeline's prefix, but the readiness
// probe's.
func (p *pipeline) keysOf() []string {
	p.t.Helper()
	keys := redistest.Keys(p.t, p.rdb, p.cfg.Redis.KeyPrefix+":*") // every master of a cluster
	keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasSuffix(k, ":readyz") })
	slices.Sort(keys)
	return keys
}

// Forged messages on the alerts topic, through a real broker: one whose
// values name another customer than its group, one of a crossing Redis
// never decided. Neither posts anything, writes anything but its dead
// letter, or stalls its partition: the group's real crossing behind them
// is posted.
func TestForgedAlertsPostNothing(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	r := p.start()
	now := time.Now()
	p.kafka.Produce(t, p.cfg.Kafka.AlertsTopic,
		p.forged("fraud-1", []string{"innocent-bob"}, "evt-forged-1", now),
		p.forged("fraud-1", []string{"fraud-1"}, "evt-forged-2", now))
	waitFor(t, 20*time.Second, "both forged alerts dropped", func() bool {
		return r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedMalformed) == 1 &&
			r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnverified) == 1
	})
	if keys := p.keysOf(); len(keys) != 0 {
		t.Errorf("forged alerts wrote to Redis: %v", keys)
	}
	dead := p.kafka.ReadAll(t, p.cfg.Kafka.DeadLetterTopic, 2, 20*time.Second)
	var whys []string
	for _, m := range dead {
		for _, h := range m.Headers {
			if h.Key == "fraudwatch-error" {
				whys = append(whys, string(h.Value))
			}
		}
	}
	slices.Sort(whys)
	if len(whys) != 2 || !strings.HasPrefix(whys[0], "alert malformed: ") || !strings.HasPrefix(whys[1], "alert unverified: ") {
		t.Errorf("dead letters say %q, want one malformed, one unverified", whys)
	}

	// The real crossing of fraud-1.
	p.orders(0, ev{id: "1", customer: "fraud-1", amount: 1}, ev{id: "2", customer: "fraud-1", amount: 1}, ev{id: "3", customer: "fraud-1", amount: 1})
	waitFor(t, 20*time.Second, "the real crossing posted", func() bool { return len(p.notes.list()) == 1 })
	if a := p.notes.list()[0]; a.EventID != "3" || a.GroupValues[0] != "fraud-1" || a.Severity != alert.SeverityHigh {
		t.Errorf("posted %+v, want the crossing of event 3 by fraud-1, as the rule says", a)
	}
}

// An alert of a rule not in force whose producer dated it 50 minutes ahead
// holds its partition for the grace only, counted from when the replica
// first read it, and shows as a stalled partition meanwhile; the real
// crossing behind it is then posted.
func TestAFutureAlertOfAnUnknownRuleStallsNothing(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	opts := p.options()
	opts.Dispatcher.UnknownRuleGrace = 3 * time.Second
	r := p.startWith(opts)
	future := p.forged("x", []string{"x"}, "evt-future", time.Now().Add(50*time.Minute))
	var a alert.Alert
	if err := json.Unmarshal(future.Value, &a); err != nil {
		t.Fatal(err)
	}
	a.Rule = "rule-from-nowhere"
	future.Value, _ = json.Marshal(a)
	for part := range 2 { // both partitions of the alerts topic
		w := &kafka.Writer{Addr: kafka.TCP(p.kafka.Brokers...), Topic: p.cfg.Kafka.AlertsTopic, Balancer: toPartition(part),
			RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
		err := w.WriteMessages(t.Context(), future) // its timestamp as set: 50 minutes ahead
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	stalled := func() float64 {
		return r.metric("fraudwatch_consumer_stalled_seconds", "topic", p.cfg.Kafka.AlertsTopic)
	}
	waitFor(t, 20*time.Second, "the alerts partitions shown stalled", func() bool { return stalled() > 0 })
	p.orders(0, ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1})
	waitFor(t, 30*time.Second, "the real crossing posted", func() bool { return len(p.notes.list()) == 1 })
	// Each partition's grace runs from its own first read.
	waitFor(t, 30*time.Second, "both future alerts dropped", func() bool {
		return r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnknownRule) == 2
	})
	waitFor(t, 20*time.Second, "the partitions flowing again", func() bool { return stalled() == 0 })
}

// toPartition balances every message to one partition.
type toPartition int

func (p toPartition) Balance(kafka.Message, ...int) int { return int(p) }

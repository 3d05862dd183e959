package app

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
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
// probe's and the replicas' counting buckets (bucketsGuard).
func (p *pipeline) keysOf() []string {
	p.t.Helper()
	keys := redistest.Keys(p.t, p.rdb, p.cfg.Redis.KeyPrefix+":*") // every master of a cluster
	keys = slices.DeleteFunc(keys, func(k string) bool {
		return strings.HasSuffix(k, ":readyz") || k == p.cfg.Redis.KeyPrefix+":counting-buckets"
	})
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

// writeAlert writes msg to one partition of the alerts topic, its
// timestamp as set.
func (p *pipeline) writeAlert(partition int, msg kafka.Message) {
	p.t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(p.kafka.Brokers...), Topic: p.cfg.Kafka.AlertsTopic, Balancer: toPartition(partition),
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(p.t.Context(), msg); err != nil {
		p.t.Fatal(err)
	}
}

// alertsPartition is the partition of the alerts topic the engine writes
// the alerts of the count rule's group to.
func (p *pipeline) alertsPartition(group string) int {
	key := p.keys.Cooldown(p.keys.Group([]string{group}), "orders-per-customer")
	return (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(key)}, 0, 1)
}

// edit decodes an alert's message, changes it and encodes it again.
func edit(t *testing.T, msg kafka.Message, change func(a *alert.Alert)) kafka.Message {
	t.Helper()
	var a alert.Alert
	if err := json.Unmarshal(msg.Value, &a); err != nil {
		t.Fatal(err)
	}
	change(&a)
	value, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	msg.Value = value
	return msg
}

// gated is the pipeline's notes, but the alerts of one group wait in
// Notify until open is closed, holding their partition of the alerts
// topic; entered is closed when the first arrives.
type gated struct {
	*notes
	group         string
	entered, open chan struct{}
	once          sync.Once
}

func (g *gated) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	if a.GroupValues[0] == g.group {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return alert.Receipt{}, ctx.Err()
		}
	}
	return g.notes.Notify(ctx, a)
}

// A forger's copy of a crossing to come, with its own order and evidence,
// through a real broker: one written before the crossing, on the
// crossing's partition of the alerts topic, held there (behind an alert
// Slack is slow to take) until after the crossing; one written after the
// crossing on the other partition, read at once. Neither posts anything;
// the real alert is posted once, with the real order and evidence.
func TestAForgedCopyOfACrossingToComePostsNothing(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	gate := &gated{notes: p.notes, group: "gate", entered: make(chan struct{}), open: make(chan struct{})}
	opts := p.options()
	opts.Notifier = gate
	r := p.startWith(opts)
	held := p.alertsPartition("gate")
	victim := ""
	for i := 0; victim == ""; i++ {
		if g := fmt.Sprint("victim-", i); p.alertsPartition(g) == held {
			victim = g
		}
	}
	p.orders(0, ev{id: "g1", customer: "gate", amount: 1}, ev{id: "g2", customer: "gate", amount: 1}, ev{id: "g3", customer: "gate", amount: 1})
	select {
	case <-gate.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the gate's alert never reached Slack")
	}
	forged := edit(t, p.forged(victim, []string{victim}, "v3", time.Now()), func(a *alert.Alert) {
		a.OrderID, a.Currency, a.PublishedAt = "ord-VICTIM-777", "KRW", time.Now()
		a.Evidence = []alert.Evidence{{OrderID: "ord-VICTIM-777", EventID: "v3"}, {OrderID: "ord-VICTIM-778", EventID: "v2"}}
	})
	p.writeAlert(held, forged) // behind the gate's alert
	p.orders(0, ev{id: "v1", customer: victim, amount: 1}, ev{id: "v2", customer: victim, amount: 1}, ev{id: "v3", customer: victim, amount: 1})
	marks, id := p.keys.Marks(p.keys.Group([]string{victim}), p.state("orders-per-customer")), lua.IDOf("v3")
	waitFor(t, 20*time.Second, "the crossing marked", func() bool { return p.rdb.HExists(t.Context(), marks, string(id[:])).Val() })
	p.writeAlert(1-held, forged) // on the partition nothing holds
	waitFor(t, 20*time.Second, "the copy on the free partition dropped", func() bool {
		return r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnverified) == 1
	})
	close(gate.open)
	waitFor(t, 20*time.Second, "the held copy dropped and the real alert posted", func() bool {
		return r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnverified) == 2 && len(p.notes.list()) == 2
	})
	var got []string
	for _, a := range p.notes.list() {
		orders := []string{a.OrderID}
		for _, e := range a.Evidence {
			orders = append(orders, e.OrderID)
		}
		got = append(got, a.GroupValues[0]+": "+strings.Join(orders, ","))
	}
	slices.Sort(got)
	if want := []string{"gate: o-g3,o-g3,o-g2,o-g1", victim + ": o-v3,o-v3,o-v2,o-v1"}; !slices.Equal(got, want) {
		t.Errorf("posted %q, want %q", got, want)
	}
}

// Messages of rules not in force that no crossing vouches for, dated 50
// minutes ahead, three on each partition of the alerts topic: each is
// dropped at once as unverified, and the real crossing behind them is
// posted without waiting for any grace.
func TestUnknownRuleForgeriesHoldNoPartition(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	opts := p.options()
	opts.Dispatcher.UnknownRuleGrace = 20 * time.Second
	r := p.startWith(opts)
	ahead := time.Now().Add(50 * time.Minute)
	for part := range 2 {
		for i := range 3 {
			p.writeAlert(part, edit(t, p.forged("x", []string{"x"}, fmt.Sprint("evt-nowhere-", part, i), ahead), func(a *alert.Alert) {
				a.Rule, a.PublishedAt = "rule-from-nowhere", time.Now()
			}))
		}
	}
	p.orders(0, ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1})
	waitFor(t, 10*time.Second, "the real crossing posted, before any grace ran out", func() bool { return len(p.notes.list()) == 1 })
	waitFor(t, 10*time.Second, "every forgery dropped", func() bool {
		return r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnverified) == 6
	})
	if got := r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnknownRule); got != 0 {
		t.Errorf("dropped{unknown_rule} = %v, want 0: nothing vouched for them", got)
	}
}

// A replay of a real alert, read when its delivery record has expired
// while later crossings of its group kept its mark alive: the alert as the
// engine sealed and published it eight days ago, written again now (a
// fresh Kafka timestamp). It is stale by its sealed published_at and posts
// nothing; the alert it copies was posted once.
func TestAReplayPastItsRecordPostsNothing(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	r := p.start()
	p.orders(0, ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "the alert posted", func() bool { return len(p.notes.list()) == 1 })
	published := p.kafka.ReadAll(t, p.cfg.Kafka.AlertsTopic, 1, 20*time.Second)[0]
	var a alert.Alert
	if err := json.Unmarshal(published.Value, &a); err != nil || !a.Sealed() {
		t.Fatalf("the published alert %s: %v; want it sealed", published.Value, err)
	}
	// Eight days ago: the engine sealed it then, as it does.
	a.PublishedAt = a.PublishedAt.Add(-8 * 24 * time.Hour)
	g := p.keys.Group([]string{"c"})
	scripts, err := lua.New(lua.Config{}, p.rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Seal()
	marks := p.keys.Marks(g, p.state("orders-per-customer"))
	if err := scripts.Seal(t.Context(), "", []lua.Seal{{Marks: marks, ID: lua.IDOf(a.EventID), Hash: h[:], At: a.PublishedAt}}); err != nil {
		t.Fatal(err)
	}
	// Its delivery record has expired.
	if err := p.rdb.Del(t.Context(), p.keys.AlertRecord(g, a.Rule, a.EventID)).Err(); err != nil {
		t.Fatal(err)
	}
	value, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	p.kafka.Produce(t, p.cfg.Kafka.AlertsTopic, kafka.Message{Key: published.Key, Value: value, Time: time.Now()})
	waitFor(t, 20*time.Second, "the replay dropped as stale", func() bool {
		return r.metric("fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedStale) == 1
	})
	if got := len(p.notes.list()); got != 1 {
		t.Errorf("posted %d alerts, want the one", got)
	}
}

// toPartition balances every message to one partition.
type toPartition int

func (p toPartition) Balance(kafka.Message, ...int) int { return int(p) }

package backtest

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/event"
)

// --from-topic reads both topics from a time on, takes the type from the
// topic and the time from the record when the event has none, and leaves
// no trace: no group, no commit.
func TestFromTopics(t *testing.T) {
	k := kafkatest.New(t)
	cfg := config.Default()
	cfg.Kafka.Brokers = k.Brokers
	cfg.Kafka.GroupID = kafkatest.Group(t, "fw")
	cfg.Kafka.MaxEventBytes = 200
	cfg.Kafka.OrdersTopic, cfg.Kafka.RefundsTopic = k.Topic(t, "orders", 2), k.Topic(t, "refunds", 1)
	now := time.Now().Truncate(time.Millisecond)
	msg := func(value string, age time.Duration) kafka.Message {
		return kafka.Message{Key: []byte("c"), Value: []byte(value), Time: now.Add(-age)}
	}
	k.Produce(t, cfg.Kafka.OrdersTopic,
		msg(`{"event_id":"old","order_id":"o0","customer_id":"c","amount":1}`, 3*time.Hour),
		msg(`{"event_id":"a","order_id":"o1","customer_id":"c","amount":1}`, 50*time.Minute),
		// A producer's retry of a: not an event again.
		msg(`{"event_id":"a","order_id":"o1","customer_id":"c","amount":1}`, 50*time.Minute),
		msg(`{"event_id":"b","order_id":"o2","customer_id":"c","amount":1,"occurred_at":"`+now.Add(-40*time.Minute).Format(time.RFC3339Nano)+`"}`, 10*time.Minute),
		msg(`{"event_id":"bad","order_id":"o3","amount":1}`, time.Minute),
		msg(`{"event_id":"long","order_id":"o4","customer_id":"c","amount":1,"note":"`+strings.Repeat("x", 200)+`"}`, time.Minute),
	)
	k.Produce(t, cfg.Kafka.RefundsTopic, msg(`{"event_id":"r","order_id":"o1","customer_id":"c","amount":1}`, 45*time.Minute))
	evs, err := FromTopics(t.Context(), cfg.Kafka, &kafka.Transport{}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range decodeAll(t, evs) {
		got = append(got, fmt.Sprintf("%s %s %v", ev.EventID, ev.Type, now.Sub(ev.Source.Time)))
	}
	want := []string{"a order 50m0s", "r refund 45m0s", "b order 40m0s"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if want := map[event.Reason]int{event.ReasonMissingField: 1, event.ReasonOversized: 1}; !maps.Equal(evs.Invalid, want) {
		t.Errorf("invalid %v, want the one without a customer and the one beyond max_event_bytes", evs.Invalid)
	}
	if evs.Retried != 1 {
		t.Errorf("retried %d, want 1: a's second record", evs.Retried)
	}
	// The replicas' group is untouched: it was never joined, so it holds
	// no member and no offset.
	groups, err := (&kafka.Client{Addr: kafka.TCP(k.Brokers...)}).ListGroups(t.Context(), &kafka.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		// A broker of this test's own has no group at all; a shared one
		// has other tests'.
		if g.GroupID == cfg.Kafka.GroupID || k.Fake() != nil {
			t.Errorf("the backtest made or joined the group %s", g.GroupID)
		}
	}
}

// --from-topic replays what run counts: the orders of an aborted
// transaction are not among them, nor the transactions' markers.
func TestFromTopicsReadsCommitted(t *testing.T) {
	k := kafkatest.New(t)
	cfg := config.Default()
	cfg.Kafka.Brokers = k.Brokers
	cfg.Kafka.OrdersTopic, cfg.Kafka.RefundsTopic = k.Topic(t, "orders", 1), k.Topic(t, "refunds", 1)
	orders := func(prefix string, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = fmt.Appendf(nil, `{"event_id":"%s%d","order_id":"o","customer_id":"c","amount":1}`, prefix, i)
		}
		return out
	}
	p := k.TxnProducer(t, cfg.Kafka.OrdersTopic, 0, "gzip")
	p.Transaction(false, orders("aborted-", 9)...)
	p.Transaction(true, orders("committed-", 2)...)
	evs, err := FromTopics(t.Context(), cfg.Kafka, &kafka.Transport{}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range decodeAll(t, evs) {
		got = append(got, ev.EventID)
	}
	if want := []string{"committed-0", "committed-1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if len(evs.Invalid) != 0 {
		t.Errorf("invalid %v, want none: markers are not events", evs.Invalid)
	}
}

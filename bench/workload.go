package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// workload is the bench's traffic: orders by a population of customers,
// each with a card or two and a few IP addresses, and refunds of earlier
// orders. It is the same for a seed, so every contender reads the same
// events.
type workload struct {
	events    int
	customers int
	refunds   float64 // share of events that are refunds
	seed      uint64
	// population is prepended to every customer, card and address: a
	// workload with one of its own starts its groups afresh beside
	// another's windows.
	population string
}

// rulesYAML are the four rules every contender evaluates: count and amount
// per customer, count per card, count per IP, in 10-minute windows, with
// thresholds the workload crosses now and then.
const rulesYAML = `rules:
  - {name: orders-per-customer, metric: count, group_by: [customer_id], window: 10m, threshold: 20}
  - {name: amount-per-customer, metric: amount, group_by: [customer_id], window: 10m, threshold: 2000000}
  - {name: orders-per-card, metric: count, group_by: [card_fingerprint], window: 10m, threshold: 35}
  - {name: orders-per-ip, metric: count, group_by: [ip], window: 10m, threshold: 12}
`

// slidingRulesYAML are the four rules in sliding windows. The workload's
// events carry no occurred_at: their time is the Kafka record's.
const slidingRulesYAML = `rules:
  - {name: orders-per-customer, metric: count, group_by: [customer_id], window_type: sliding, window: 10m, threshold: 20}
  - {name: amount-per-customer, metric: amount, group_by: [customer_id], window_type: sliding, window: 10m, threshold: 2000000}
  - {name: orders-per-card, metric: count, group_by: [card_fingerprint], window_type: sliding, window: 10m, threshold: 35}
  - {name: orders-per-ip, metric: count, group_by: [ip], window_type: sliding, window: 10m, threshold: 12}
`

// noEvidenceRulesYAML are the four rules keeping no evidence, to price it.
var noEvidenceRulesYAML = strings.ReplaceAll(rulesYAML, "}\n", ", evidence: 0}\n")

// distinctRulesYAML are the four rules and a distinct count: the IP
// addresses of a customer (each uses up to four).
const distinctRulesYAML = rulesYAML + `  - {name: ips-per-customer, metric: distinct, field: ip, group_by: [customer_id], window_type: sliding, window: 10m, threshold: 3}
`

// rulesPerOrder and rulesPerRefund are the rule evaluations one event
// makes: an order feeds every rule, a refund only the amount rule.
const (
	rulesPerOrder  = 4
	rulesPerRefund = 1
)

type benchEvent struct {
	EventID         string `json:"event_id"`
	Type            string `json:"type"`
	OrderID         string `json:"order_id"`
	CustomerID      string `json:"customer_id"`
	CardFingerprint string `json:"card_fingerprint"`
	IP              string `json:"ip"`
	Amount          int64  `json:"amount"`
	Currency        string `json:"currency"`
}

// generate calls emit for each event in order. Refunds refund an earlier
// order of the same customer, for at most its amount.
func (w workload) generate(emit func(ev benchEvent) error) error {
	rng := rand.New(rand.NewPCG(w.seed, w.seed^0x5851f42d4c957f2d))
	type order struct {
		id     string
		amount int64
	}
	last := make(map[int]order, w.customers)
	for i := range w.events {
		c := rng.IntN(w.customers)
		customer := w.population + "cust-" + strconv.Itoa(c)
		ev := benchEvent{
			EventID:    "ev-" + strconv.Itoa(i),
			CustomerID: customer,
			// One or two cards and a handful of addresses per customer;
			// some cards and addresses are shared between customers.
			CardFingerprint: w.population + "card-" + strconv.Itoa(c/2*2+rng.IntN(2)),
			IP:              w.population + "10." + strconv.Itoa(c%250) + "." + strconv.Itoa(c/250%250) + "." + strconv.Itoa(rng.IntN(4)),
			Currency:        "KRW",
		}
		if o, ok := last[c]; ok && rng.Float64() < w.refunds {
			ev.Type, ev.OrderID, ev.Amount = "refund", o.id, 1+rng.Int64N(o.amount)
		} else {
			ev.Type, ev.OrderID, ev.Amount = "order", "ord-"+strconv.Itoa(i), 1_000+rng.Int64N(200_000)
			last[c] = order{ev.OrderID, ev.Amount}
		}
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// counts says how many orders and refunds the workload holds, and the rule
// evaluations they make.
func (w workload) counts() (orders, refunds, evaluations int) {
	_ = w.generate(func(ev benchEvent) error {
		if ev.Type == "order" {
			orders++
		} else {
			refunds++
		}
		return nil
	})
	return orders, refunds, orders*rulesPerOrder + refunds*rulesPerRefund
}

// produce writes the workload to the orders and refunds topics, keyed by
// customer as a shop would, and waits for the broker's acknowledgement.
func (w workload) produce(ctx context.Context, brokers []string, orders, refunds string) error {
	wr := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    5000,
		BatchBytes:   8 << 20,
		BatchTimeout: 20 * time.Millisecond,
	}
	defer wr.Close()
	const chunk = 20000
	batch := make([]kafka.Message, 0, chunk)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := wr.WriteMessages(ctx, batch...)
		batch = batch[:0]
		return err
	}
	err := w.generate(func(ev benchEvent) error {
		value, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		topic := orders
		if ev.Type == "refund" {
			topic = refunds
		}
		batch = append(batch, kafka.Message{Topic: topic, Key: []byte(ev.CustomerID), Value: value})
		if len(batch) == chunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("produce the workload: %w", err)
	}
	return nil
}

// partitionsOf is how many partitions topic has.
func partitionsOf(ctx context.Context, brokers []string, topic string) (int, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
		return 0, fmt.Errorf("partitions of %s: no such topic in the metadata", topic)
	}
	return len(md.Topics[0].Partitions), nil
}

// createTopics creates topics with the given partitions and waits for
// their leaders. Their records carry the time the broker appended them
// (LogAppendTime), so that latency is measured from there and not from a
// producer's queue.
func createTopics(ctx context.Context, brokers []string, partitions int, names ...string) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	var req kafka.CreateTopicsRequest
	for _, n := range names {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: n, NumPartitions: partitions, ReplicationFactor: 1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "message.timestamp.type", ConfigValue: "LogAppendTime"}}})
	}
	resp, err := client.CreateTopics(ctx, &req)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, n := range names {
		if err := resp.Errors[n]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", n, err)
		}
	}
	for {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
		ready := err == nil && len(md.Topics) == len(names)
		for _, t := range md.Topics {
			ready = ready && t.Error == nil && len(t.Partitions) == partitions
			for _, p := range t.Partitions {
				ready = ready && p.Error == nil && p.Leader.ID >= 0
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics never became ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

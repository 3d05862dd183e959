package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// latencyAt produces fresh events at rate per second for d, to the topics
// the replicas read, and returns the end-to-end latency quantiles their
// fraudwatch_event_latency_seconds histograms saw meanwhile: from each
// event's Kafka timestamp to the end of its processing. trace, when set,
// is called every second.
func latencyAt(ctx context.Context, brokers []string, orders, refunds string, reps []*replica, w workload, rate float64, d time.Duration,
	trace func(elapsed time.Duration)) (p50, p99, p999 float64, err error) {
	before, err := scrapeHistogram(ctx, reps, "fraudwatch_event_latency_seconds")
	if err != nil {
		return 0, 0, 0, err
	}
	wr := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		// A shop's producers batch a little (linger) and do not wait for
		// each other.
		BatchTimeout: 5 * time.Millisecond,
		Async:        true,
	}
	defer wr.Close()
	// The messages are made before the clock starts, so that making them
	// does not take CPU from what is measured.
	var all []kafka.Message
	if err := w.generate(func(ev benchEvent) error {
		ev.EventID = "lat-" + ev.EventID
		value, err := json.Marshal(ev)
		topic := orders
		if ev.Type == "refund" {
			topic = refunds
		}
		all = append(all, kafka.Message{Topic: topic, Key: []byte(ev.CustomerID), Value: value})
		return err
	}); err != nil {
		return 0, 0, 0, err
	}
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	sent, owed := 0, 0.0
	start := time.Now()
	second := start
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-t.C:
		}
		owed += rate * tick.Seconds()
		n := int(owed)
		owed -= float64(n)
		if sent+n > len(all) {
			return 0, 0, 0, fmt.Errorf("the latency workload ran out after %d events", sent)
		}
		msgs := all[sent : sent+n]
		for i := range msgs {
			msgs[i].Time = time.Now() // the event's timestamp: when it is produced
		}
		if err := wr.WriteMessages(ctx, msgs...); err != nil {
			return 0, 0, 0, err
		}
		sent += n
		if trace != nil && time.Since(second) >= time.Second {
			second = time.Now()
			trace(time.Since(start))
		}
	}
	// Wait for the replicas to process what was sent.
	for {
		after, err := scrapeHistogram(ctx, reps, "fraudwatch_event_latency_seconds")
		if err != nil {
			return 0, 0, 0, err
		}
		if n := len(after.counts); n > 0 && after.counts[n-1]-before.counts[n-1] >= float64(sent)*0.999 {
			return quantile(before, after, 0.5), quantile(before, after, 0.99), quantile(before, after, 0.999), nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// latency is what a latency run measured: the end-to-end quantiles, and
// each stage's p99 and mean.
type latency struct {
	p50, p99, p999 float64
	stages         []stageFigure
	tripsPerBatch  float64 // Redis round trips a batch of events
	// share is what each process used while the events were produced:
	// at half (b)'s rate this machine's two cores are not half busy.
	share cpuShare
}

// roundTrips is how many Redis round trips the replicas made for events'
// batches, and how many batches they handled.
func roundTrips(ctx context.Context, reps []*replica) (trips, batches float64, err error) {
	for _, rep := range reps {
		m, err := scrape(ctx, rep.metrics+"?name[]=fraudwatch_event_redis_round_trips_total")
		if err != nil {
			return 0, 0, err
		}
		trips += m["fraudwatch_event_redis_round_trips_total"]
	}
	h, err := scrapeHistogram(ctx, reps, "fraudwatch_event_processing_seconds")
	if n := len(h.counts); n > 0 {
		batches = h.counts[n-1]
	}
	return trips, batches, err
}

// latencyAt produces fresh events at rate per second for warm, unmeasured,
// then for d, to the topics the replicas read, and returns the end-to-end
// latency quantiles their fraudwatch_event_latency_seconds histograms saw
// meanwhile (from each event's Kafka timestamp to the end of its
// processing), and their stages' (fraudwatch_event_stage_seconds). trace,
// when set, is called with 0 as d begins, then every second of d. The warm-up is for the broker: a
// fresh one took a core for the first 14 s of small produce requests, and
// those seconds' p99 was 450-500 ms (docs/performance.md, Latency at half
// load), which a broker long in production does not show.
func latencyAt(ctx context.Context, brokers []string, orders, refunds string, rdb *redis.Client, reps []*replica, w workload, rate float64, warm, d time.Duration,
	trace func(elapsed time.Duration)) (latency, error) {
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
		return latency{}, err
	}
	warmed, err := produceAt(ctx, wr, all, rate, warm, nil)
	if err != nil {
		return latency{}, err
	}
	before, err := scrapeHistogram(ctx, reps, "fraudwatch_event_latency_seconds")
	if err != nil {
		return latency{}, err
	}
	stages0, err := scrapeStages(ctx, reps)
	if err != nil {
		return latency{}, err
	}
	trips0, batches0, err := roundTrips(ctx, reps)
	if err != nil {
		return latency{}, err
	}
	watch := newCPUWatch(ctx, rdb, reps)
	cpu0 := watch.take(ctx)
	if trace != nil {
		trace(0)
	}
	sent, err := produceAt(ctx, wr, all[warmed:], rate, d, trace)
	if err != nil {
		return latency{}, err
	}
	share := watch.take(ctx).since(cpu0, float64(sent))
	// Wait for the replicas to process what was sent.
	for {
		after, err := scrapeHistogram(ctx, reps, "fraudwatch_event_latency_seconds")
		if err != nil {
			return latency{}, err
		}
		if n := len(after.counts); n > 0 && after.counts[n-1]-before.counts[n-1] >= float64(sent)*0.999 {
			stages1, err := scrapeStages(ctx, reps)
			if err != nil {
				return latency{}, err
			}
			trips1, batches1, err := roundTrips(ctx, reps)
			if err != nil {
				return latency{}, err
			}
			return latency{p50: quantile(before, after, 0.5), p99: quantile(before, after, 0.99), p999: quantile(before, after, 0.999),
				stages: stagesBetween(stages0, stages1), tripsPerBatch: (trips1 - trips0) / max(batches1-batches0, 1), share: share}, nil
		}
		select {
		case <-ctx.Done():
			return latency{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// produceAt writes msgs at rate per second for d, each stamped when it is
// written, and returns how many it wrote; trace, when set, is called every
// second.
func produceAt(ctx context.Context, wr *kafka.Writer, msgs []kafka.Message, rate float64, d time.Duration, trace func(time.Duration)) (int, error) {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	sent, owed := 0, 0.0
	start := time.Now()
	second := start
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return sent, ctx.Err()
		case <-t.C:
		}
		owed += rate * tick.Seconds()
		n := int(owed)
		owed -= float64(n)
		if sent+n > len(msgs) {
			return sent, fmt.Errorf("the latency workload ran out after %d events", sent)
		}
		batch := msgs[sent : sent+n]
		for i := range batch {
			batch[i].Time = time.Now() // the event's timestamp: when it is produced
		}
		if err := wr.WriteMessages(ctx, batch...); err != nil {
			return sent, err
		}
		sent += n
		if trace != nil && time.Since(second) >= time.Second {
			second = time.Now()
			trace(time.Since(start))
		}
	}
	return sent, nil
}

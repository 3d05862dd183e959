package main

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// traceLatency prints one second of the latency run:
//
//   - The events' latency, each stage's p99, and the batches' processing time (rules,
//     scripts, hand-off), and the events a batch held on average.
//   - The CPU Redis, fraudwatch, the broker (when scripts/bench.sh names
//     its pid) and the bench itself (its producer) used, and how busy the
//     whole machine was: they share its cores, and a second's high p99
//     often comes with another process taking a core.
//   - The size of Redis's keyspace and memory, where a key table doubling
//     (at each power of two keys) shows.
//   - Redis's own view: the keys it expired and its expire cycle's CPU,
//     the keys with a TTL, and each event class its latency monitor saw
//     over latencyThreshold ms in the second (expire-cycle, command,
//     fast-command, fork, ...); and fraudwatch's GC cycles and pauses.
//   - How long redis-server's main thread and fraudwatch's threads were
//     runnable but waiting for a core (the kernel's schedstat): at half
//     (b)'s rate, redis-server waited a fifth to a quarter of each second
//     (docs/performance.md, Latency at half load).
//
// restore puts Redis's latency monitor back as it was.
func (b *bench) traceLatency(ctx context.Context, rdb *redis.Client, reps []*replica) (trace func(time.Duration), restore func(), err error) {
	if restore, err = watchLatency(ctx, rdb); err != nil {
		return nil, restore, err
	}
	type sample struct {
		cpu              cpuTaken
		latency, batches histogram
		stages           stageScrape
		trips            float64 // Redis round trips for events' batches
		redis            redisView
		gcs, gcPaused    float64 // fraudwatch's GC cycles and their pauses' seconds
	}
	watch := newCPUWatch(ctx, rdb, reps)
	take := func() (s sample) {
		s.cpu = watch.take(ctx)
		s.latency, _ = scrapeHistogram(ctx, reps, "fraudwatch_event_latency_seconds")
		s.batches, _ = scrapeHistogram(ctx, reps, "fraudwatch_event_processing_seconds")
		s.stages, _ = scrapeStages(ctx, reps)
		s.trips, _, _ = roundTrips(ctx, reps)
		s.redis, _ = viewRedis(ctx, rdb)
		s.gcs, s.gcPaused, _ = gcOf(ctx, reps)
		return s
	}
	last := take()
	return func(elapsed time.Duration) {
		now := take()
		if elapsed == 0 { // the measured part begins: the warm-up is not traced
			last = now
			return
		}
		events, batches := count(last.latency, now.latency), count(last.batches, now.batches)
		keys, _ := rdb.DBSize(ctx).Result()
		mem, _ := usedMemory(ctx, rdb)
		progress("latency trace: %3.0f s (%s UTC): p50 %s, p99 %s (stages' p99: %s); batches p50 %s, p99 %s, %.1f events and %.1f Redis round trips each, %s; Redis %d keys, %s; %s; fraudwatch's GC %.0f cycles, %s paused",
			elapsed.Seconds(), now.cpu.at.UTC().Format("15:04:05"), ms(quantile(last.latency, now.latency, 0.5)), ms(quantile(last.latency, now.latency, 0.99)), stagesText(stagesBetween(last.stages, now.stages), false),
			ms(quantile(last.batches, now.batches, 0.5)), ms(quantile(last.batches, now.batches, 0.99)), events/max(batches, 1), (now.trips-last.trips)/max(batches, 1),
			now.cpu.since(last.cpu, events), keys, mib(mem), redisText(last.redis, now.redis, last.cpu.at, now.cpu.at), now.gcs-last.gcs, ms(now.gcPaused-last.gcPaused))
		last = now
	}, restore, nil
}

// count is how many observations a histogram gained between two scrapes.
func count(before, after histogram) float64 {
	n := len(after.counts)
	if n == 0 || len(before.counts) != n {
		return 0
	}
	return after.counts[n-1] - before.counts[n-1]
}

// brokerCPU is the CPU seconds of the Kafka broker scripts/bench.sh started
// (FRAUDWATCH_BENCH_KAFKA_PID), or 0 when it names none.
func brokerCPU() float64 {
	pid, err := strconv.Atoi(os.Getenv("FRAUDWATCH_BENCH_KAFKA_PID"))
	if err != nil {
		return 0
	}
	s, _ := cpuSeconds(pid)
	return s
}

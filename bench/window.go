package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// windowed is what a (b) run measures once its events are all processed
// and still in their windows: Redis memory, then latency at half its rate.
type windowed struct {
	ctx              context.Context // the bench's: measure takes none of its own
	b                *bench
	rdb              *redis.Client
	addr             string // rdb's address, for a client of its database 1
	orders, refunds  string
	slow             *slowest // rdb's SLOWLOG reader, nil for the second server's
	mem0             int64
	memPerEvent      float64
	countersPerEvent float64
	windows          int // the run's windows in Redis at its end
	half             float64
	lat              latency
	nice             string // redis-server's priority in the latency run, when -latency-nice set it
}

// inWindow readies the measurement of a (b) run against rdb (at addr) that
// reads orders and refunds: it takes Redis's memory before the run.
func (b *bench) inWindow(ctx context.Context, rdb *redis.Client, addr, orders, refunds string) (*windowed, error) {
	var slow *slowest
	if rdb == b.rdb {
		slow = b.slow
	}
	mem0, err := memoryNow(ctx, rdb, slow, false)
	if err != nil {
		return nil, err
	}
	return &windowed{ctx: ctx, b: b, rdb: rdb, addr: addr, orders: orders, refunds: refunds, slow: slow, mem0: mem0}, nil
}

// measure is fraudwatchRun.measure's after: Redis memory per event against
// plain counters, then latency at half the run's rate (or -latency-rate).
func (w *windowed) measure(reps []*replica, res *result) error {
	ctx, b := w.ctx, w.b
	mem1, err := memoryNow(ctx, w.rdb, w.slow, true)
	if err != nil {
		return err
	}
	w.memPerEvent = float64(mem1-w.mem0) / float64(b.o.events)
	plainDB := redis.NewClient(&redis.Options{Addr: w.addr, DB: 1})
	defer plainDB.Close()
	plain, windows, err := countersOnly(ctx, w.rdb, plainDB, "fw")
	if err != nil {
		return err
	}
	w.countersPerEvent = float64(plain) / float64(b.o.events)
	w.windows = windows
	w.half = res.eventsPerSec / 2
	if b.o.latencyRate > 0 {
		w.half = b.o.latencyRate
	} else if res.untimed != "" {
		return fmt.Errorf("latency at half the run's rate: the run %s (give -events more, or -latency-rate)", res.untimed)
	}
	restore, note, err := favourRedis(ctx, w.rdb, b.o.latencyNice)
	if err != nil {
		return err
	}
	defer restore()
	if w.nice = note; note != "" {
		note = "; " + note
	}
	progress("(b) latency at half that rate (%.0f events/s) for %v, after %v unmeasured%s", w.half, b.o.latencyFor, b.o.latencyWarm, note)
	lw := b.latencyWorkload(int(w.half*(b.o.latencyWarm+b.o.latencyFor).Seconds()) + 1000)
	var trace func(time.Duration)
	if b.o.trace {
		var restore func()
		trace, restore, err = b.traceLatency(ctx, w.rdb, reps)
		defer restore()
		if err != nil {
			return err
		}
	}
	wait := func() error { return nil }
	if b.o.latencyProfile != "" && w.rdb == b.rdb {
		trace, wait = profileLatency(ctx, reps[0], b.o.latencyProfile, b.o.latencyFor, trace)
	}
	w.lat, err = latencyAt(ctx, b.brokers, w.orders, w.refunds, w.rdb, reps, lw, w.half, b.o.latencyWarm, b.o.latencyFor, trace)
	if err != nil {
		return err
	}
	return wait()
}

// latencyRows adds the latency and its stages; on names the server when
// it is not (b)'s first.
func (b *bench) latencyRows(w *windowed, on string) {
	lat := w.lat
	b.tbl.add("b", fmt.Sprintf("latency from produce to processed at %.0f events/s (half that rate, unless -latency-rate)%s", w.half, on),
		fmt.Sprintf("p50 %s, p99 %s, p999 %s", ms(lat.p50), ms(lat.p99), ms(lat.p999)),
		"from fraudwatch_event_latency_seconds's buckets"+nice(w.nice)+"; meanwhile "+lat.share.String())
	b.tbl.add("b", "the latency's stages: each one's p99 (and mean), beside the p99 above"+on, stagesText(lat.stages, true),
		fmt.Sprintf("the p99 is bounded by %s; %.1f Redis round trips a batch; from fraudwatch_event_stage_seconds's buckets (docs/operations.md, Latency by stage)",
			bound(lat.stages), lat.tripsPerBatch))
}

// memoryRow adds Redis's memory per event against plain counters'.
func (b *bench) memoryRow(w *windowed, on string) {
	b.tbl.add("b", "Redis memory per event in window"+on, fmt.Sprintf("%.0f bytes", w.memPerEvent),
		fmt.Sprintf("plain counters alone: %.0f bytes (%.2f ×)", w.countersPerEvent, w.memPerEvent/w.countersPerEvent))
}

// secondServer measures (b) once more on a second server (-second-redis;
// make bench starts Redis 8.2.3, scripts/redis8.sh): the seed-style
// ceiling on it, then one process over the same workload on topics of its
// own (so that nothing of the first run's latency events is left to read),
// its latency at half its rate and its memory, then the ceiling again
// (ceilingAfter). Side by side in one run, the rows say what the server
// itself changes.
func (b *bench) secondServer(ctx context.Context) error {
	// (b)'s windows are no longer needed: emptied, the first server does
	// no work of its own (expiring them) meanwhile.
	if err := flushSync(ctx, b.rdb); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: b.o.secondRedis, MaxRetries: -1, PoolSize: 64})
	defer rdb.Close()
	if err := flushSync(ctx, rdb); err != nil {
		return fmt.Errorf("-second-redis %s: %w", b.o.secondRedis, err)
	}
	server, err := redistest.Version(ctx, rdb)
	if err != nil {
		return fmt.Errorf("-second-redis %s: %w", b.o.secondRedis, err)
	}
	on := " (on " + server + ")"
	progress("(a) ceiling of a seed-style incr_and_check%s for %v", on, b.o.ceilingFor)
	seed, err := ceiling(ctx, rdb, redis.NewScript(seedbench.Script()), seedCall("a:seed"), 4, 256, b.o.ceilingFor, nil)
	if err != nil {
		return err
	}
	if err := flushSync(ctx, rdb); err != nil {
		return err
	}
	run := *b.fw
	run.orders, run.refunds = "bench.orders.second."+b.suffix, "bench.refunds.second."+b.suffix
	run.redis, run.group = []string{b.o.secondRedis}, "bench-fw-second-"+b.suffix
	if err := b.produceTo(ctx, b.workload(b.o.events, b.o.seed), run.orders, run.refunds, b.o.partitions); err != nil {
		return err
	}
	if err := b.warmUp(ctx, run, rdb, on); err != nil {
		return err
	}
	w, err := b.inWindow(ctx, rdb, b.o.secondRedis, run.orders, run.refunds)
	if err != nil {
		return err
	}
	progress("(b) fraudwatch, 1 process%s, over %d events", on, b.o.events)
	res, err := run.measure(ctx, func() (redisSnapshot, error) { return snapshotRedis(ctx, rdb) }, w.measure)
	if err != nil {
		return err
	}
	after, err := b.ceilingAfter(ctx, rdb, on)
	if err != nil {
		return err
	}
	b.tbl.add("a", "Redis ceiling: seed-style incr_and_check"+on, fmt.Sprintf("%.0f calls/s", seed),
		fmt.Sprintf("%.2f × the first row's server", seed/b.seedCalls))
	b.row("fraudwatch, 1 process"+on, res, func() string {
		return fmt.Sprintf("%.2f × (a) seed-style ÷ %d rules on that server%s; %.2f × (b)'s first row; Redis %.1f µs in scripts an event; redis-server %.0f %% of a core, fraudwatch %.0f %%",
			res.eventsPerSec/(seed/rulesPerOrder), rulesPerOrder, afterNote(res.eventsPerSec, seed, after, "the one before it"),
			res.eventsPerSec/b.fwEvents, res.redis.scripts, 100*res.redis.core, 100*res.cores)
	})
	b.latencyRows(w, on)
	b.memoryRow(w, on)
	return nil
}

// warmUp runs run once, unmeasured, when -warmup is set, then empties rdb:
// the first run on a fresh Redis and broker is slower by itself (about a
// tenth; Redis's memory new to it and a cold machine are likely), which a
// Redis in production long past would never show. on names the server in
// the progress line.
func (b *bench) warmUp(ctx context.Context, run fraudwatchRun, rdb *redis.Client, on string) error {
	if !b.o.warmup {
		return nil
	}
	progress("(b) warm-up%s: fraudwatch, 1 process, over %d events, not measured", on, b.o.events)
	run.group = "bench-fw-warmup-" + b.suffix
	if on != "" {
		run.group = "bench-fw-second-warmup-" + b.suffix
	}
	if _, err := run.measure(ctx, func() (redisSnapshot, error) { return snapshotRedis(ctx, rdb) }, nil); err != nil {
		return err
	}
	return flushSync(ctx, rdb)
}

// nice is the latency row's note of redis-server's priority, if set.
func nice(note string) string {
	if note == "" {
		return ""
	}
	return "; " + note
}

// Command bench measures fraudwatch's throughput against the ceilings Redis
// sets and against the other ways of doing the same job, in one run on one
// machine, and prints one table (README, Performance). Run it with
// `make bench`, which starts the Redis and the Kafka broker it measures
// against (scripts/bench.sh); `make bench-smoke` is the small run CI does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
)

type options struct {
	events      int
	customers   int
	refunds     float64
	partitions  int
	naiveEvents int
	ceilingFor  time.Duration
	latencyFor  time.Duration
	latencyRate float64
	scaling     []int
	kafka       string
	brokers     string
	redis       string
	seed        uint64
}

func main() {
	var o options
	flag.IntVar(&o.events, "events", 1_000_000, "events fraudwatch processes")
	flag.IntVar(&o.customers, "customers", 100_000, "customers the events come from")
	flag.Float64Var(&o.refunds, "refunds", 0.05, "share of events that are refunds")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions of the orders and refunds topics")
	flag.IntVar(&o.naiveEvents, "naive-events", 100_000, "events the naive consumer processes (it is slow)")
	flag.DurationVar(&o.ceilingFor, "ceiling-for", 5*time.Second, "how long each ceiling is measured")
	flag.DurationVar(&o.latencyFor, "latency-for", 20*time.Second, "how long latency is measured at half the rate")
	flag.Float64Var(&o.latencyRate, "latency-rate", 0, "events/s while latency is measured (0: half of fraudwatch's rate)")
	flag.StringVar(&o.kafka, "kafka", "real", `"real": the broker at -brokers; "fake": an in-process kfake`)
	flag.StringVar(&o.brokers, "brokers", os.Getenv("FRAUDWATCH_BENCH_KAFKA_BROKERS"), "Kafka brokers, host:port,...")
	flag.StringVar(&o.redis, "redis", os.Getenv("FRAUDWATCH_BENCH_REDIS_ADDR"), "Redis address, host:port")
	flag.Uint64Var(&o.seed, "seed", 1, "workload seed")
	scaling := flag.String("scaling", "2,4", "numbers of fraudwatch processes to measure besides 1, comma-separated (empty: none)")
	flag.Parse()
	for f := range strings.SplitSeq(*scaling, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 1 {
			o.scaling = append(o.scaling, n)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func run(ctx context.Context, o options) error {
	if o.redis == "" {
		return fmt.Errorf("no Redis: set -redis or FRAUDWATCH_BENCH_REDIS_ADDR (make bench starts one)")
	}
	brokers := strings.Split(o.brokers, ",")
	kafkaName := "Kafka " + os.Getenv("FRAUDWATCH_BENCH_KAFKA_VERSION")
	switch o.kafka {
	case "fake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return fmt.Errorf("start kfake: %w", err)
		}
		defer c.Close()
		brokers, kafkaName = c.ListenAddrs(), "kfake (in-process, not a real broker)"
	case "real":
		if o.brokers == "" {
			return fmt.Errorf("no Kafka: set -brokers or FRAUDWATCH_BENCH_KAFKA_BROKERS, or -kafka fake")
		}
	default:
		return fmt.Errorf("-kafka must be real or fake, not %q", o.kafka)
	}
	rdb := redis.NewClient(&redis.Options{Addr: o.redis, MaxRetries: -1, PoolSize: 64})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", o.redis, err)
	}
	tbl := &table{}
	tbl.machine = machine(ctx, rdb, kafkaName)

	// (a) ceilings.
	seed := redis.NewScript(seedScript)
	progress("(a) ceiling of a seed-style incr_and_check, pipelined EVALSHA for %v", o.ceilingFor)
	seedCeiling, err := ceiling(ctx, rdb, seed, seedCall("a:seed"), 4, 256, o.ceilingFor)
	if err != nil {
		return err
	}
	tbl.add("a", "Redis ceiling: seed-style incr_and_check (GET, INCRBY, TTL/EXPIRE), pipelined EVALSHA from Go", fmt.Sprintf("%.0f calls/s", seedCeiling), "")
	own, err := ownCeilings(ctx, rdb, o.ceilingFor)
	if err != nil {
		return err
	}
	for _, c := range own {
		tbl.add("a", c.name, fmt.Sprintf("%.0f calls/s", c.perSec), fmt.Sprintf("%.2f × the seed-style script", c.perSec/seedCeiling))
	}

	// The workload, once, for every contender.
	w := workload{events: o.events, customers: o.customers, refunds: o.refunds, seed: o.seed}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	orders, refunds := "bench.orders."+suffix, "bench.refunds."+suffix
	if err := createTopics(ctx, brokers, o.partitions, orders, refunds); err != nil {
		return err
	}
	if err := createTopics(ctx, brokers, 1, orders+".dlq"); err != nil {
		return err
	}
	if err := createTopics(ctx, brokers, o.partitions, orders+".alerts"); err != nil {
		return err
	}
	nOrders, nRefunds, evaluations := w.counts()
	progress("producing %d events (%d orders, %d refunds) to %d partitions", o.events, nOrders, nRefunds, o.partitions)
	began := time.Now()
	if err := w.produce(ctx, brokers, orders, refunds); err != nil {
		return err
	}
	progress("produced in %v", time.Since(began).Round(time.Millisecond))

	// (b) fraudwatch.
	dir, err := os.MkdirTemp("", "fraudwatch-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildFraudwatch(ctx, dir)
	if err != nil {
		return err
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	progress("(b) fraudwatch, 1 process, over %d events", o.events)
	fw := &fraudwatchRun{bin: bin, dir: dir, brokers: brokers, redis: o.redis, orders: orders, refunds: refunds,
		group: "bench-fw-" + suffix, prefix: "fw", replicas: 1, events: o.events}
	mem0, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}
	var memPerEvent, countersPerEvent, p50, p99, p999, half float64
	res, err := fw.measure(ctx, func() (int64, error) { return scriptCalls(ctx, rdb) }, func(reps []*replica, res *result) error {
		// Every event is still in its 10-minute window.
		mem1, err := usedMemory(ctx, rdb)
		if err != nil {
			return err
		}
		memPerEvent = float64(mem1-mem0) / float64(o.events)
		plain, _, err := countersOnly(ctx, rdb, "fw")
		if err != nil {
			return err
		}
		countersPerEvent = float64(plain) / float64(o.events)
		half = res.eventsPerSec / 2
		if o.latencyRate > 0 {
			half = o.latencyRate
		}
		progress("(b) latency at half that rate (%.0f events/s) for %v", half, o.latencyFor)
		lw := workload{events: int(half*o.latencyFor.Seconds()) + 1000, customers: o.customers, refunds: o.refunds, seed: o.seed + 1}
		p50, p99, p999, err = latencyAt(ctx, brokers, orders, refunds, reps, lw, half, o.latencyFor)
		return err
	})
	if err != nil {
		return err
	}
	b := res.eventsPerSec
	tbl.add("b", fmt.Sprintf("fraudwatch, 1 process, %s events (%s rule evaluations)", thousands(o.events), thousands(evaluations)),
		fmt.Sprintf("%.0f events/s", b),
		fmt.Sprintf("%.0f script calls/s; %.2f × (a) seed-style ÷ %d rules", res.callsPerSec, b/(seedCeiling/rulesPerOrder), rulesPerOrder))
	tbl.add("b", fmt.Sprintf("latency from produce to processed at %.0f events/s (half that rate, unless -latency-rate)", half),
		fmt.Sprintf("p50 %s, p99 %s, p999 %s", ms(p50), ms(p99), ms(p999)), "from fraudwatch_event_latency_seconds's buckets")
	tbl.add("b", "fraudwatch's memory", fmt.Sprintf("peak RSS %s", mib(res.peakRSS)), "RSS at the start, middle and end of the run: "+res.rssCurve())
	tbl.add("b", "Redis memory per event in window", fmt.Sprintf("%.0f bytes", memPerEvent),
		fmt.Sprintf("plain counters alone: %.0f bytes (%.2f ×)", countersPerEvent, memPerEvent/countersPerEvent))

	// (b) again with more processes in the group.
	for _, n := range o.scaling {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		progress("(b) fraudwatch, %d processes, over %d events", n, o.events)
		run := *fw
		run.replicas, run.group = n, fmt.Sprintf("bench-fw%d-%s", n, suffix)
		res, err := run.measure(ctx, func() (int64, error) { return scriptCalls(ctx, rdb) }, nil)
		if err != nil {
			return err
		}
		tbl.add("b", fmt.Sprintf("fraudwatch, %d processes in one group", n), fmt.Sprintf("%.0f events/s", res.eventsPerSec),
			fmt.Sprintf("%.2f × 1 process; peak RSS %s a process", res.eventsPerSec/b, mib(res.peakRSS)))
	}

	// (c) the naive consumer.
	n := min(o.naiveEvents, o.events)
	progress("(c) naive Go consumer over %d events", n)
	naive, err := naiveConsumer(ctx, brokers, rdb, "bench-naive-"+suffix, "c", []string{orders, refunds}, n)
	if err != nil {
		return err
	}
	tbl.add("c", fmt.Sprintf("naive Go consumer (one awaited script per rule, one commit per message), %s events", thousands(n)),
		fmt.Sprintf("%.0f events/s", naive), fmt.Sprintf("(b) is %.1f × this", b/naive))

	tbl.print(os.Stdout)
	return nil
}

// scriptCalls is how many scripts Redis has run so far.
func scriptCalls(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				v, _ := strconv.ParseInt(calls, 10, 64)
				n += v
			}
		}
	}
	return n, nil
}

// machine describes where the bench ran.
func machine(ctx context.Context, rdb *redis.Client, kafka string) string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	redisVersion := "?"
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				redisVersion = v
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s; Redis %s and %s on the same machine, over loopback; %s",
		runtime.NumCPU(), cpu, runtime.Version(), redisVersion, kafka, time.Now().UTC().Format("2006-01-02"))
}

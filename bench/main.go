// Command bench measures fraudwatch's throughput against the ceilings Redis
// sets and against the other ways of doing the same job, in one run on one
// machine, and prints one table (docs/performance.md). Run it with
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

	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

type options struct {
	events         int
	customers      int
	refunds        float64
	partitions     int
	naiveEvents    int
	backtestEvents int
	ceilingFor     time.Duration
	scriptsFor     time.Duration
	latencyFor     time.Duration
	latencyWarm    time.Duration
	latencyRate    float64
	latencyNice    int
	routedAlerts   int
	routedRate     float64
	trace          bool
	cpuProfile     string
	latencyProfile string
	windows        bool
	warmup         bool
	rules          string
	clusters       []int
	sizingEvents   int
	gomemlimit     string
	buckets        int
	scaling        []int
	contenders     string
	kafka          string
	brokers        string
	redis          string
	secondRedis    string
	seed           uint64
}

func main() {
	var o options
	flag.IntVar(&o.events, "events", 1_000_000, "events fraudwatch processes")
	flag.IntVar(&o.customers, "customers", 100_000, "customers the events come from")
	flag.Float64Var(&o.refunds, "refunds", 0.05, "share of events that are refunds")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions of the orders and refunds topics")
	flag.IntVar(&o.naiveEvents, "naive-events", 100_000, "events the naive consumer processes (it is slow)")
	flag.IntVar(&o.backtestEvents, "backtest-events", 100_000, "events fraudwatch backtest replays (0: no backtest rows)")
	flag.DurationVar(&o.ceilingFor, "ceiling-for", 5*time.Second, "how long each ceiling is measured")
	flag.DurationVar(&o.scriptsFor, "scripts-for", 5*time.Second, "how long the seed-style script and incr_and_check run side by side, at 1 and at 8 windows a call, each after a pass over 100,000 groups (0: not at all)")
	flag.DurationVar(&o.latencyFor, "latency-for", 20*time.Second, "how long latency is measured at half the rate")
	flag.DurationVar(&o.latencyWarm, "latency-warmup", 15*time.Second, "how long the latency run's producer writes, unmeasured, before latency is measured: a fresh broker took a core for its first seconds of small produce requests")
	flag.Float64Var(&o.latencyRate, "latency-rate", 0, "events/s while latency is measured (0: half of fraudwatch's rate)")
	flag.IntVar(&o.latencyNice, "latency-nice", -10, "the niceness redis-server's main thread runs at during the latency run, when it runs on this machine: -10 gives it a core before the broker, the producer and fraudwatch, as a Redis with cores of its own has one (needs CAP_SYS_NICE; the latency row says what was set); 0: as started")
	flag.IntVar(&o.routedAlerts, "routed-alerts", 100, "crossing orders whose alerts' latency to Slack, a webhook and PagerDuty is measured (0: none); at most what PagerDuty's budget carries (120, and 2 a second)")
	flag.Float64Var(&o.routedRate, "routed-rate", 10, "crossing orders a second in the routed alerts' run")
	flag.BoolVar(&o.trace, "latency-trace", false, "print each second of the latency run: its latency and stages, the batches, each process's CPU and wait for a core, Redis's keys, memory, expiry and latency spikes, fraudwatch's GC (docs/performance.md, Latency at half load)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "where (b)'s measured process writes a CPU profile of its run, its latency run included (run --cpuprofile; go tool pprof -top FILE)")
	flag.StringVar(&o.latencyProfile, "latency-profile", "", "where a CPU profile of (b)'s process over its first latency run's measured part is written (taken from its /debug/pprof/, metrics.pprof on for that run; go tool pprof -top FILE)")
	flag.BoolVar(&o.warmup, "warmup", true, "run (b) once unmeasured first, so that its first row is not a cold machine's")
	flag.BoolVar(&o.windows, "windows", true, "measure (b) again with sliding windows, a distinct rule and without evidence")
	flag.StringVar(&o.rules, "rules", "", "a rules file instead of the four rules for (b)'s runs, but for the windows rows and the sizing rows' memory (each has its own); the rows still name the four rules")
	flag.StringVar(&o.kafka, "kafka", "real", `"real": the broker at -brokers; "fake": an in-process kfake`)
	flag.StringVar(&o.brokers, "brokers", os.Getenv("FRAUDWATCH_BENCH_KAFKA_BROKERS"), "Kafka brokers, host:port,...")
	flag.StringVar(&o.redis, "redis", os.Getenv("FRAUDWATCH_BENCH_REDIS_ADDR"), "Redis address, host:port")
	flag.StringVar(&o.secondRedis, "second-redis", os.Getenv("FRAUDWATCH_BENCH_SECOND_REDIS_ADDR"), "a second server, host:port, on which (b) is measured once more, its latency and memory too (make bench starts Redis 8.2.3 there; empty: no such rows)")
	flag.Uint64Var(&o.seed, "seed", 1, "workload seed")
	flag.StringVar(&o.contenders, "contenders", "cde", "which of the other contenders (c), (d) and (e) to run, e.g. \"c\" or \"\"")
	flag.IntVar(&o.sizingEvents, "sizing-events", 200_000, "events of each sizing run (0: no sizing runs)")
	memLimitFlag(flag.CommandLine, &o.gomemlimit)
	flag.IntVar(&o.buckets, "buckets", 0, "fraudwatch's redis.buckets in (b)'s runs (0: its default, 16 on one Redis and 256 on a cluster)")
	clusters := flag.String("cluster", "1,3", "sizes (masters) of the Redis Clusters to measure (b) on, comma-separated (empty: none)")
	scaling := flag.String("scaling", "2,4", "numbers of fraudwatch processes to measure besides 1, comma-separated (empty: none)")
	flag.Parse()
	for f := range strings.SplitSeq(*scaling, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 1 {
			o.scaling = append(o.scaling, n)
		}
	}

	for f := range strings.SplitSeq(*clusters, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			o.clusters = append(o.clusters, n)
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

// bench is one run: the servers it measures against, the workload every
// contender processes, and the table it fills.
type bench struct {
	o         options
	brokers   []string
	rdb       *redis.Client
	tbl       *table
	suffix    string // makes topics and groups this run's own
	orders    string
	refunds   string
	seedCalls float64 // (a): the seed-style script's calls/s
	// seedPerCall is the seed-style script's Redis µs a call in (a)'s
	// side-by-side rows; 0 when they did not run.
	seedPerCall float64
	fwEvents    float64 // (b): fraudwatch's events/s, one process
	fwCeiling   float64 // the seed-style ceiling right after (b)'s first row (ceilingAfter); 0 with -ceiling-for 0
	dir         string  // the run's files: fraudwatch's binary, configs
	fw          *fraudwatchRun
	sizing      sizing
	slow        *slowest // the longest counting calls of (b)'s runs
}

func run(ctx context.Context, o options) error {
	if o.redis == "" {
		return fmt.Errorf("no Redis: set -redis or FRAUDWATCH_BENCH_REDIS_ADDR (make bench starts one)")
	}
	if err := checkRouted(o.routedAlerts, o.routedRate); err != nil {
		return err
	}
	memLimit, err := memLimitNote(o.gomemlimit)
	if err != nil {
		return err
	}
	b := &bench{o: o, brokers: strings.Split(o.brokers, ","), tbl: &table{},
		suffix: strconv.FormatInt(time.Now().UnixNano(), 36)}
	kafkaName := "Kafka " + os.Getenv("FRAUDWATCH_BENCH_KAFKA_VERSION")
	switch o.kafka {
	case "fake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return fmt.Errorf("start kfake: %w", err)
		}
		defer c.Close()
		b.brokers, kafkaName = c.ListenAddrs(), "kfake (in-process, not a real broker)"
	case "real":
		if o.brokers == "" {
			return fmt.Errorf("no Kafka: set -brokers or FRAUDWATCH_BENCH_KAFKA_BROKERS, or -kafka fake")
		}
	default:
		return fmt.Errorf("-kafka must be real or fake, not %q", o.kafka)
	}
	b.rdb = redis.NewClient(&redis.Options{Addr: o.redis, MaxRetries: -1, PoolSize: 64})
	defer b.rdb.Close()
	if err := flushSync(ctx, b.rdb); err != nil {
		return fmt.Errorf("redis %s: %w", o.redis, err)
	}
	b.tbl.machine = machine(ctx, b.rdb, kafkaName) + memLimit
	slow, restore, err := watchSlowlog(ctx, b.rdb)
	if err != nil {
		return err
	}
	defer restore()
	b.slow = slow

	dir, err := os.MkdirTemp("", "fraudwatch-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b.dir = dir
	steps := []func(context.Context) error{b.ceilings, b.sideBySide, b.produce, b.fraudwatch}
	if o.secondRedis != "" {
		steps = append(steps, b.secondServer) // right after (b), for the two to compare
	}
	if o.routedAlerts > 0 {
		steps = append(steps, b.routed)
	}
	if o.windows {
		steps = append(steps, b.windows)
	}
	steps = append(steps, b.longestCalls)
	steps = append(steps, b.scaling, b.cluster)
	if o.sizingEvents > 0 {
		steps = append(steps, b.sizingRuns)
	}
	steps = append(steps, b.backtest, b.scoredBacktest)
	for i, step := range []func(context.Context) error{b.naive, b.node, b.streams} {
		if strings.ContainsRune(o.contenders, rune('c'+i)) {
			steps = append(steps, step)
		}
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	b.tbl.print(os.Stdout)
	return nil
}

// ceilings measures (a): how many script calls Redis runs a second, for
// the seed's one-event script and for ours.
func (b *bench) ceilings(ctx context.Context) error {
	seed := redis.NewScript(seedbench.Script())
	progress("(a) ceiling of a seed-style incr_and_check, pipelined EVALSHA for %v", b.o.ceilingFor)
	var err error
	b.seedCalls, err = ceiling(ctx, b.rdb, seed, seedCall("a:seed"), 4, 256, b.o.ceilingFor, nil)
	if err != nil {
		return err
	}
	b.tbl.add("a", "Redis ceiling: seed-style incr_and_check (GET, INCRBY, TTL/EXPIRE), pipelined EVALSHA from Go", fmt.Sprintf("%.0f calls/s", b.seedCalls), "")
	own, err := ownCeilings(ctx, b.rdb, b.o.ceilingFor)
	if err != nil {
		return err
	}
	for _, c := range own {
		b.tbl.add("a", c.name, fmt.Sprintf("%.0f calls/s", c.perSec), fmt.Sprintf("%.2f × the seed-style script", c.perSec/b.seedCalls))
	}
	return nil
}

// produce writes the workload, once, for every contender to read.
func (b *bench) produce(ctx context.Context) error {
	b.orders, b.refunds = "bench.orders."+b.suffix, "bench.refunds."+b.suffix
	return b.produceTo(ctx, b.workload(b.o.events, b.o.seed), b.orders, b.refunds, b.o.partitions)
}

// produceTo creates the topics a fraudwatch run needs, orders and refunds
// with partitions each, and writes w to them.
func (b *bench) produceTo(ctx context.Context, w workload, orders, refunds string, partitions int) error {
	if err := createTopics(ctx, b.brokers, partitions, orders, refunds); err != nil {
		return err
	}
	if err := createTopics(ctx, b.brokers, 1, orders+".dlq", orders+".outcomes"); err != nil {
		return err
	}
	nOrders, nRefunds, _ := w.counts()
	progress("producing %d events (%d orders, %d refunds) to %d partitions", w.events, nOrders, nRefunds, partitions)
	began := time.Now()
	if err := w.produce(ctx, b.brokers, orders, refunds); err != nil {
		return err
	}
	progress("produced in %v", time.Since(began).Round(time.Millisecond))
	return nil
}

func (b *bench) workload(events int, seed uint64) workload {
	return workload{events: events, customers: b.o.customers, refunds: b.o.refunds, seed: seed}
}

// latencyWorkload is the latency run's traffic: (b)'s, scaled to its
// events, so that its groups go through the same states as (b)'s do (as
// many events a customer, from nothing to about 10 by the end), in a
// population of its own. On (b)'s customers instead, whose windows still
// hold (b)'s events, nearly every event came within evidence of a
// threshold or crossed one, a heavier load an event than (b)'s: at half
// (b)'s rate the run fell behind (docs/performance.md, Latency at half load).
func (b *bench) latencyWorkload(events int) workload {
	w := b.workload(events, b.o.seed+1)
	w.customers = max(int(float64(b.o.customers)*float64(events)/float64(b.o.events)), 1)
	w.population = "lat-"
	return w
}

// fraudwatch measures (b) with one process: throughput over the whole
// workload, then, with every event still in its window, Redis memory, then
// latency at half the throughput, then, the windows gone, the seed-style
// ceiling again (ceilingAfter): after the latency run, which needs them.
func (b *bench) fraudwatch(ctx context.Context) error {
	bin, err := buildFraudwatch(ctx, b.dir)
	if err != nil {
		return err
	}
	b.fw = &fraudwatchRun{bin: bin, dir: b.dir, brokers: b.brokers, redis: []string{b.o.redis}, orders: b.orders, refunds: b.refunds,
		group: "bench-fw-" + b.suffix, prefix: "fw", replicas: 1, events: b.o.events, memLimit: b.o.gomemlimit, buckets: b.o.buckets}
	if b.o.rules != "" {
		data, err := os.ReadFile(b.o.rules)
		if err != nil {
			return fmt.Errorf("-rules: %w", err)
		}
		b.fw.rules = string(data)
	}
	if err := b.warmUp(ctx, *b.fw, b.rdb, ""); err != nil {
		return err
	}
	if err := flushSync(ctx, b.rdb); err != nil {
		return err
	}
	progress("(b) fraudwatch, 1 process, over %d events", b.o.events)
	b.fw.cpuProfile, b.fw.pprof = b.o.cpuProfile, b.o.latencyProfile != ""
	defer func() { b.fw.cpuProfile, b.fw.pprof = "", false }() // the runs that copy b.fw after it profile nothing
	w, err := b.inWindow(ctx, b.rdb, b.o.redis, b.orders, b.refunds)
	if err != nil {
		return err
	}
	res, err := b.fw.measure(ctx, b.redis(ctx), w.measure)
	if err != nil {
		return err
	}
	if res.untimed != "" {
		// Every other (b) row is a ratio of this one.
		return fmt.Errorf("(b)'s first row: %s (give -events more)", res.untimed)
	}
	b.fwEvents, b.sizing.single = res.eventsPerSec, res
	if err := b.slow.since(ctx, b.rdb, res.slowFrom); err != nil {
		return err
	}
	if b.fwCeiling, err = b.ceilingAfter(ctx, b.rdb, ""); err != nil {
		return err
	}
	_, _, evaluations := b.workload(b.o.events, b.o.seed).counts()
	b.tbl.add("b", fmt.Sprintf("fraudwatch, 1 process, %s events (%s rule evaluations)", thousands(b.o.events), thousands(evaluations)),
		fmt.Sprintf("%.0f events/s", b.fwEvents),
		fmt.Sprintf("%.0f script calls/s; %.2f × (a) seed-style ÷ %d rules", res.callsPerSec, b.fwEvents/(b.seedCalls/rulesPerOrder), rulesPerOrder)+
			afterNote(b.fwEvents, b.seedCalls, b.fwCeiling, "(a)'s"))
	b.tbl.add("b", "where Redis's time goes, per event", res.redis.String(),
		fmt.Sprintf("redis-server used %.0f %% of a core, fraudwatch %.0f %% (%.1f µs of CPU an event)", 100*res.redis.core, 100*res.cores, 1e6*res.cores/b.fwEvents)+res.rest()+b.perChange(res.redis, evaluations))
	b.latencyRows(w, "")
	b.tbl.add("b", "fraudwatch's memory", fmt.Sprintf("peak RSS %s", mib(res.peakRSS)), "RSS at the start, middle and end of the run: "+res.rssCurve())
	b.memoryRow(w, "")
	return b.keyspaceCeiling(ctx, w.windows)
}

// redis snapshots what Redis has done so far.
func (b *bench) redis(ctx context.Context) func() (redisSnapshot, error) {
	return func() (redisSnapshot, error) { return snapshotRedis(ctx, b.rdb) }
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
	// Valkey's redis_version is the Redis it is compatible with: its own
	// name and version are what Version reports.
	server, err := redistest.Version(ctx, rdb)
	if err != nil {
		server = "Redis ?"
	}
	return fmt.Sprintf("%d cores (%s), %s; %s and %s on the same machine, over loopback; %s",
		runtime.NumCPU(), cpu, runtime.Version(), server, kafka, time.Now().UTC().Format("2006-01-02"))
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// fraudwatchRun is one measured run of the real binary: processes
// replicas in one group over the pre-produced workload.
type fraudwatchRun struct {
	bin      string
	dir      string
	brokers  []string
	redis    []string // one Redis, or a cluster's nodes
	cluster  bool
	orders   string
	refunds  string
	group    string
	prefix   string
	replicas int
	events   int
	rules    string // the rules file; rulesYAML when empty
	extra    string // more of the configuration, appended (receivers:)
	// cpuProfile, when set, is where the first replica writes a CPU
	// profile of its whole run (run --cpuprofile), at its shutdown.
	cpuProfile string
	// memLimit, when set, is the replicas' GOMEMLIMIT, in place of the
	// environment's (-gomemlimit).
	memLimit string
	// buckets, when set, is the replicas' redis.buckets (-buckets).
	buckets int
	// pprof turns the replicas' metrics.pprof on (-latency-profile).
	pprof bool
}

// result is what a contender achieved.
type result struct {
	eventsPerSec float64
	callsPerSec  float64 // script calls Redis ran, per second
	redis        redisProfile
	cores        float64      // cores the processes used together
	machine      machineShare // what the whole machine did meanwhile
	peakRSS      int64        // bytes, the largest of the processes
	rssSamples   []int64      // bytes, over the run (the first process)
	slowFrom     int64        // the SLOWLOG id the run's calls come after
	// untimed, when set, says why the run has no rates: its events were
	// all processed before the bench first saw any (a small run, such as
	// bench-smoke's sizing runs of 5,000 events). Its rates are then 0,
	// not figures; its memory is still measured.
	untimed string
}

// row adds a run's row to (b): its events/s and note, or "not timed" and
// why, so that a run too short to time never reads as 0 events/s or a
// ratio of it.
func (b *bench) row(what string, res result, note func() string) {
	if res.untimed != "" {
		b.tbl.add("b", what, "not timed", res.untimed)
		return
	}
	b.tbl.add("b", what, fmt.Sprintf("%.0f events/s", res.eventsPerSec), note())
}

// buildFraudwatch builds the binary as a user would.
func buildFraudwatch(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "fraudwatch")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/fraudwatch")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build fraudwatch: %w", err)
	}
	return bin, nil
}

// config writes the configuration and rules of one replica.
func (r *fraudwatchRun) config(i int, metrics string) (string, error) {
	dir := filepath.Join(r.dir, "replica-"+strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rules := r.rules
	if rules == "" {
		rules = rulesYAML
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		return "", err
	}
	cfg := testkit.Process{Brokers: r.brokers, Group: r.group, Orders: r.orders, Refunds: r.refunds,
		DeadLetter: r.orders + ".dlq", Alerts: r.alerts(), Outcomes: r.orders + ".outcomes", RedisAddrs: r.redis, Cluster: r.cluster,
		Prefix: r.prefix, Metrics: metrics, Pprof: r.pprof, Rules: "rules.yaml"}
	if r.buckets > 0 {
		cfg.Redis = []string{"buckets: " + strconv.Itoa(r.buckets)}
	}
	yaml := cfg.YAML() + r.extra
	path := filepath.Join(dir, "fraudwatch.yaml")
	return path, os.WriteFile(path, []byte(yaml), 0o644)
}

// replica is one running fraudwatch process.
type replica struct {
	cmd     *exec.Cmd
	metrics string
	done    chan error
}

// alerts is the run's own alerts topic. A run's group is new, and its
// dispatchers read the alerts topic from its start: one topic shared by
// the bench's runs had each run verify against Redis, and log as dropped
// (an ERROR each), every alert the runs before it published, about 1,300
// a run of (b), work that was not the run's own.
func (r *fraudwatchRun) alerts() string { return r.orders + ".alerts." + r.group }

// start runs the replicas and returns once each serves its metrics.
func (r *fraudwatchRun) start(ctx context.Context) ([]*replica, error) {
	var out []*replica
	partitions, err := partitionsOf(ctx, r.brokers, r.orders)
	if err != nil {
		return out, err
	}
	if err := createTopics(ctx, r.brokers, partitions, r.alerts()); err != nil {
		return out, err
	}
	for i := range r.replicas {
		addr, err := freeAddr()
		if err != nil {
			return out, err
		}
		path, err := r.config(i, addr)
		if err != nil {
			return out, err
		}
		logf, err := os.Create(filepath.Join(filepath.Dir(path), "fraudwatch.log"))
		if err != nil {
			return out, err
		}
		args := []string{"run", "--config", path, "--log-level", "warn"}
		if r.cpuProfile != "" && i == 0 {
			args = append(args, "--cpuprofile", r.cpuProfile)
		}
		cmd := exec.Command(r.bin, args...)
		if r.memLimit != "" {
			cmd.Env = withEnv(os.Environ(), "GOMEMLIMIT", r.memLimit)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return out, fmt.Errorf("start fraudwatch: %w", err)
		}
		rep := &replica{cmd: cmd, metrics: "http://" + addr + "/metrics", done: make(chan error, 1)}
		go func() { rep.done <- cmd.Wait(); logf.Close() }()
		out = append(out, rep)
	}
	for _, rep := range out {
		for {
			if _, err := scrape(ctx, rep.metrics); err == nil {
				break
			}
			select {
			case err := <-rep.done:
				rep.done <- err // for stop, which waits on it too
				return out, fmt.Errorf("fraudwatch exited at start (%v); see its log in %s", err, r.dir)
			case <-ctx.Done():
				return out, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return out, nil
}

// stop ends the replicas as an operator would, with SIGTERM.
func stop(reps []*replica) {
	for _, rep := range reps {
		_ = rep.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, rep := range reps {
		select {
		case <-rep.done:
		case <-time.After(40 * time.Second):
			_ = rep.cmd.Process.Kill()
			<-rep.done
		}
	}
}

// processedQuery narrows a scrape to the two counters processed reads: it
// asks every 50 to 250 ms while a run is measured (scrapeEvery), and the
// whole page, written out each time, took about 3 % of fraudwatch's CPU in
// (b).
var processedQuery = "?" + url.Values{"name[]": {"fraudwatch_events_consumed_total", "fraudwatch_events_invalid_total"}}.Encode()

// processed is how many events the replicas are done with, valid or not.
func processed(ctx context.Context, reps []*replica) (float64, error) {
	var sum float64
	for _, rep := range reps {
		m, err := scrape(ctx, rep.metrics+processedQuery)
		if err != nil {
			return 0, err
		}
		sum += m["fraudwatch_events_consumed_total"] + m["fraudwatch_events_invalid_total"]
	}
	return sum, nil
}

// measure runs the replicas over the workload already in the topics and
// times them from when they are first seen to have processed events to
// their last, so that joining the group is not counted. after, when set, runs while they are
// still up, once they are done.
func (r *fraudwatchRun) measure(ctx context.Context, redis func() (redisSnapshot, error), after func(reps []*replica, res *result) error) (result, error) {
	reps, err := r.start(ctx)
	defer stop(reps)
	if err != nil {
		return result{}, err
	}
	var (
		first, last time.Time
		res         result
		redis0      redisSnapshot
		cpu0        float64
		machine0    machineShare
		n0          float64 // events done when first seen
	)
	rssEvery, every := time.Now(), scrapeEvery(first, 0, 0, r.events)
	for last.IsZero() {
		select {
		case <-ctx.Done():
			return result{}, ctx.Err()
		case <-time.After(every):
		}
		n, err := processed(ctx, reps)
		if err != nil {
			return result{}, fmt.Errorf("read fraudwatch's metrics: %w", err)
		}
		if first.IsZero() && n > 0 {
			first, n0 = time.Now(), n
			if redis0, err = redis(); err != nil {
				return result{}, err
			}
			cpu0 = cpuOf(reps)
			machine0, _ = machineNow()
		}
		if time.Since(rssEvery) >= 500*time.Millisecond {
			rssEvery = time.Now()
			if rss, err := procStatus(reps[0].cmd.Process.Pid, "VmRSS"); err == nil {
				res.rssSamples = append(res.rssSamples, rss)
			}
		}
		if int(n) >= r.events {
			last = time.Now()
		}
		every = scrapeEvery(first, n0, n, r.events)
	}
	redis1, err := redis()
	if err != nil {
		return result{}, err
	}
	if secs, timed := timedFor(first, last, n0, r.events); timed {
		res.cores = (cpuOf(reps) - cpu0) / secs
		if m, err := machineNow(); err == nil && machine0.busy > 0 {
			res.machine = m.per(machine0, secs)
		}
		res.eventsPerSec = (float64(r.events) - n0) / secs
		res.callsPerSec = (redis1.scriptCalls() - redis0.scriptCalls()) / secs
		res.redis = redis1.profile(redis0, float64(r.events)-n0, secs)
	} else {
		res.untimed = fmt.Sprintf("its %s events were all processed before the bench first saw any: too few to time", thousands(r.events))
	}
	res.slowFrom = redis0.slowID
	if after != nil {
		if err := after(reps, &res); err != nil {
			return result{}, err
		}
	}
	for _, rep := range reps {
		if hwm, err := procStatus(rep.cmd.Process.Pid, "VmHWM"); err == nil {
			res.peakRSS = max(res.peakRSS, hwm)
		}
	}
	return res, nil
}

// timedFor is how long a run was timed, from the scrape that first saw
// n0 of its events processed to the one that saw them all, and whether
// that timed anything: a run over before its first scrape has no events
// and no time to divide, and its rates would read 0 events/s and NaN.
func timedFor(first, last time.Time, n0 float64, events int) (float64, bool) {
	secs := last.Sub(first).Seconds()
	return secs, float64(events)-n0 >= 1 && secs > 0
}

// scrapeEvery is how long measure waits for its next scrape: 50 ms until
// the replicas are first seen and near the end, which bounds the error of
// the run's time, and between, a quarter of what the rate so far leaves,
// up to 250 ms. A scrape, however narrow its name[] query, gathers the
// whole registry: at 50 ms throughout, scrapes took about 5 % of
// fraudwatch's CPU in (b) (its profile, 2026-12-06).
func scrapeEvery(first time.Time, n0, n float64, events int) time.Duration {
	const least, most = 50 * time.Millisecond, 250 * time.Millisecond
	if first.IsZero() || n <= n0 {
		return least
	}
	left := time.Duration(float64(time.Since(first)) * (float64(events) - n) / (n - n0))
	return min(max(left/4, least), most)
}

// cpuOf is the CPU seconds the replicas have used; one that cannot be
// read counts as none, and the figure says less.
func cpuOf(reps []*replica) float64 {
	var sum float64
	for _, rep := range reps {
		if s, err := cpuSeconds(rep.cmd.Process.Pid); err == nil {
			sum += s
		}
	}
	return sum
}

// rssCurve describes RSS over the run: at its first, middle and last
// samples.
func (r result) rssCurve() string {
	s := r.rssSamples
	if len(s) == 0 {
		return "no samples"
	}
	return fmt.Sprintf("%s, %s, %s", mib(s[0]), mib(s[len(s)/2]), mib(s[len(s)-1]))
}

// procStatus reads a size field (VmRSS, VmHWM) of /proc/PID/status, in
// bytes.
func procStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New(field + " not in /proc status")
}

// freeAddr is a loopback address nobody listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

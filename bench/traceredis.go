package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// latencyThreshold is what the trace sets Redis's latency monitor to, in
// ms: every event class (command, fast-command, expire-cycle, fork, ...)
// that took longer in a second is named in that second's line.
const latencyThreshold = "5"

// redisView is what Redis says of itself at one moment, for the trace:
// its expiry's work so far, the keys of database 0, and the latency
// monitor's latest spike of each event class.
type redisView struct {
	expired, capped, expireMS float64 // expired_keys, expired_time_cap_reached_count, expire_cycle_cpu_milliseconds
	keys, expires             int64   // database 0's keys, and those with a TTL
	spikes                    []spike // each event class's latest
}

// spike is one of LATENCY LATEST's rows: an event class, when it last
// passed the threshold (Unix seconds) and how long it took then (ms).
type spike struct {
	event string
	at    int64
	ms    int64
}

// watchLatency sets Redis's latency monitor to latencyThreshold, resets
// its history, and returns what puts the threshold back.
func watchLatency(ctx context.Context, rdb *redis.Client) (restore func(), err error) {
	was, err := rdb.ConfigGet(ctx, "latency-monitor-threshold").Result()
	if err != nil {
		return func() {}, fmt.Errorf("read latency-monitor-threshold: %w", err)
	}
	if err := rdb.ConfigSet(ctx, "latency-monitor-threshold", latencyThreshold).Err(); err != nil {
		return func() {}, fmt.Errorf("set latency-monitor-threshold: %w", err)
	}
	if err := rdb.Do(ctx, "LATENCY", "RESET").Err(); err != nil {
		return func() {}, fmt.Errorf("reset Redis's latency history: %w", err)
	}
	return func() {
		if v, ok := was["latency-monitor-threshold"]; ok {
			_ = rdb.ConfigSet(context.WithoutCancel(ctx), "latency-monitor-threshold", v).Err()
		}
	}, nil
}

// viewRedis reads INFO stats and keyspace and LATENCY LATEST: bounded
// work (one INFO, one LATENCY of a dozen rows at most).
func viewRedis(ctx context.Context, rdb *redis.Client) (redisView, error) {
	var v redisView
	info, err := rdb.Info(ctx, "stats", "keyspace").Result()
	if err != nil {
		return v, fmt.Errorf("redis info stats keyspace: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(rest, 64)
		switch name {
		case "expired_keys":
			v.expired = f
		case "expired_time_cap_reached_count":
			v.capped = f
		case "expire_cycle_cpu_milliseconds":
			v.expireMS = f
		case "db0": // keys=N,expires=N,avg_ttl=N
			for kv := range strings.SplitSeq(rest, ",") {
				k, n, _ := strings.Cut(kv, "=")
				switch k {
				case "keys":
					v.keys, _ = strconv.ParseInt(n, 10, 64)
				case "expires":
					v.expires, _ = strconv.ParseInt(n, 10, 64)
				}
			}
		}
	}
	rows, err := rdb.Do(ctx, "LATENCY", "LATEST").Slice()
	if err != nil {
		return v, fmt.Errorf("redis latency latest: %w", err)
	}
	v.spikes = parseSpikes(rows)
	return v, nil
}

// parseSpikes reads LATENCY LATEST's rows: event, time, latest ms, then
// fields newer servers add (the all-time max, sums), which are not read.
func parseSpikes(rows []any) []spike {
	var out []spike
	for _, r := range rows {
		f, ok := r.([]any)
		if !ok || len(f) < 3 {
			continue
		}
		event, _ := f[0].(string)
		at, _ := f[1].(int64)
		latest, _ := f[2].(int64)
		out = append(out, spike{event: event, at: at, ms: latest})
	}
	return out
}

// redisText is what Redis did between two views: keys expired, the
// expiry's CPU and how often it hit its time cap, database 0's keys with a
// TTL, and the event classes that passed the latency monitor's threshold
// in the second that ended at now (each with its latest spike, in ms).
func redisText(last, now redisView, from, to time.Time) string {
	var over []string
	for _, s := range now.spikes {
		if s.at > from.Unix() && s.at <= to.Unix() {
			over = append(over, fmt.Sprintf("%s %d ms", s.event, s.ms))
		}
	}
	slices.Sort(over)
	spikes := "none over " + latencyThreshold + " ms"
	if len(over) > 0 {
		spikes = strings.Join(over, ", ")
	}
	return fmt.Sprintf("Redis expired %.0f keys (%.0f ms of expire cycle, %.0f at its time cap), %d with a TTL; Redis's latency events: %s",
		math.Max(now.expired-last.expired, 0), math.Max(now.expireMS-last.expireMS, 0), math.Max(now.capped-last.capped, 0), now.expires, spikes)
}

// gcQuery narrows a scrape to the Go collector's GC pauses: the trace asks
// for it every second.
const gcQuery = "?name[]=go_gc_duration_seconds"

// gcOf is how many GC cycles the replicas have finished, and the seconds
// their stop-the-world pauses took, from go_gc_duration_seconds.
func gcOf(ctx context.Context, reps []*replica) (cycles, paused float64, err error) {
	for _, rep := range reps {
		fams, err := scrapeFamilies(ctx, rep.metrics+gcQuery)
		if err != nil {
			return 0, 0, err
		}
		for _, m := range fams["go_gc_duration_seconds"].GetMetric() {
			cycles += float64(m.GetSummary().GetSampleCount())
			paused += m.GetSummary().GetSampleSum()
		}
	}
	return cycles, paused, nil
}

// runQueueWait is the seconds pid's threads (its main thread alone unless
// all) have spent runnable but waiting for a core, from the kernel's
// schedstat: the time a process that had work could not do it because
// the machine's cores were taken.
func runQueueWait(pid int, all bool) (float64, error) {
	paths := []string{"/proc/" + strconv.Itoa(pid) + "/schedstat"}
	if all {
		var err error
		if paths, err = filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat"); err != nil || len(paths) == 0 {
			return 0, fmt.Errorf("threads of %d: %v", pid, err)
		}
	}
	var ns float64
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		f := strings.Fields(string(data)) // on-CPU ns, waiting ns, timeslices
		if len(f) < 2 {
			return 0, fmt.Errorf("%s: unexpected %q", p, data)
		}
		w, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		ns += w
	}
	return ns / 1e9, nil
}

// redisPid is the process id of rdb's server when it runs on this machine
// (a redis-server or valkey-server by that id), else 0.
func redisPid(ctx context.Context, rdb *redis.Client) int {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			comm, err := os.ReadFile("/proc/" + v + "/comm")
			if err == nil && (strings.HasPrefix(string(comm), "redis") || strings.HasPrefix(string(comm), "valkey")) {
				return pid
			}
		}
	}
	return 0
}

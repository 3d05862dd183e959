package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// redisSnapshot is what Redis has done so far: per command, its calls and
// the microseconds it spent in them (INFO commandstats, where commands a
// script runs are counted too), and the CPU seconds redis-server used.
type redisSnapshot struct {
	commands    map[string]commandStat
	cpu         float64
	replicasCPU float64 // a cluster's replicas', counted in cpu too
	// slowID is the newest SLOWLOG entry's id (-1: none), from which a
	// run's longest calls are read (slowest.since); a cluster's is -1.
	slowID int64
}

type commandStat struct {
	name        string
	calls, usec float64
}

func snapshotRedis(ctx context.Context, rdb *redis.Client) (redisSnapshot, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return redisSnapshot{}, fmt.Errorf("redis info: %w", err)
	}
	s := redisSnapshot{commands: map[string]commandStat{}}
	if s.slowID, err = newestSlow(ctx, rdb); err != nil {
		return redisSnapshot{}, fmt.Errorf("redis slowlog: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if cmd, ok := strings.CutPrefix(name, "cmdstat_"); ok {
			st, err := seedbench.ParseStat(rest)
			if err != nil {
				return redisSnapshot{}, fmt.Errorf("redis info %s: %w", name, err)
			}
			s.commands[cmd] = commandStat{name: cmd, calls: st.Calls, usec: st.Usec}
		} else if name == "used_cpu_user" || name == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(rest, 64)
			s.cpu += f
		}
	}
	return s, nil
}

// snapshotCluster sums what a cluster's nodes have done: the commands of
// its masters (a replica applies the writes its master's scripts made,
// which are no work of a script) and the CPU of all of them.
func snapshotCluster(ctx context.Context, masters, replicas []*redis.Client) (redisSnapshot, error) {
	sum := redisSnapshot{commands: map[string]commandStat{}, slowID: -1}
	for i, node := range append(masters[:len(masters):len(masters)], replicas...) {
		s, err := snapshotRedis(ctx, node)
		if err != nil {
			return sum, err
		}
		sum.cpu += s.cpu
		if i >= len(masters) {
			sum.replicasCPU += s.cpu
			continue
		}
		for name, st := range s.commands {
			t := sum.commands[name]
			t.name, t.calls, t.usec = name, t.calls+st.calls, t.usec+st.usec
			sum.commands[name] = t
		}
	}
	return sum, nil
}

// scriptCalls is how many scripts Redis ran.
func (s redisSnapshot) scriptCalls() float64 {
	return s.commands["evalsha"].calls + s.commands["eval"].calls
}

// redisProfile is where Redis's time went between two snapshots, per
// event processed.
type redisProfile struct {
	core     float64       // share of one core redis-server used
	replicas float64       // of which a cluster's replicas used
	scripts  float64       // µs per event inside EVALSHA, the commands they ran included
	commands []commandStat // per event, the most costly first
}

// profile says where Redis's time went between before and s, over events
// processed in secs seconds.
func (s redisSnapshot) profile(before redisSnapshot, events, secs float64) redisProfile {
	p := redisProfile{core: (s.cpu - before.cpu) / secs, replicas: (s.replicasCPU - before.replicasCPU) / secs}
	for name, st := range s.commands {
		was := before.commands[name]
		d := commandStat{name, (st.calls - was.calls) / events, (st.usec - was.usec) / events}
		switch {
		case name == "evalsha" || name == "eval":
			p.scripts += d.usec
		case d.usec < 0.05:
			// Commands too rare to matter here (the alert path's).
		case name == "info" || name == "hello" || strings.HasPrefix(name, "script|") || strings.HasPrefix(name, "client|"):
			// The bench's own and the clients' handshakes.
		default:
			p.commands = append(p.commands, d)
		}
	}
	slices.SortFunc(p.commands, func(a, b commandStat) int { return cmp.Compare(b.usec, a.usec) })
	return p
}

// String reads like "25.1 µs in scripts: commands 8.5 µs (HMGET 5.2 µs in
// 3.81 calls, ...), Lua and redis.call themselves 16.6 µs": what the
// scripts' commands cost, and what running the scripts costs beyond them.
func (p redisProfile) String() string {
	var inner float64
	parts := make([]string, len(p.commands))
	for i, c := range p.commands {
		inner += c.usec
		parts[i] = fmt.Sprintf("%s %.1f µs in %.2f calls", strings.ToUpper(c.name), c.usec, c.calls)
	}
	return fmt.Sprintf("%.1f µs in scripts: commands %.1f µs (%s), Lua and redis.call themselves %.1f µs",
		p.scripts, inner, strings.Join(parts, ", "), p.scripts-inner)
}

// cpuSeconds is the CPU time a process has used, from /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which may hold spaces, in parens.
	_, rest, ok := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, data)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, data)
	}
	return (utime + stime) / clockTicks, nil
}

// machineCPU is the CPU time all cores have been busy and have been in
// all, from /proc/stat: busy ÷ all between two readings is how much of the
// machine everything on it used.
func machineCPU() (busy, all float64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return statCPU(line)
}

// machineShare is what the machine's cores did between two readings of
// /proc/stat, in cores: busy (everything on it) and stolen (time the
// hypervisor gave to other machines, which no process here sees).
type machineShare struct{ busy, steal float64 }

// machineNow reads /proc/stat's busy and steal times so far, in seconds.
func machineNow() (machineShare, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineShare{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	busy, _, err := statCPU(line)
	if err != nil {
		return machineShare{}, err
	}
	var steal float64
	if f := strings.Fields(line); len(f) > 8 {
		steal, _ = strconv.ParseFloat(f[8], 64)
	}
	return machineShare{busy / clockTicks, steal / clockTicks}, nil
}

// per is the share from m0 to m over secs seconds, in cores.
func (m machineShare) per(m0 machineShare, secs float64) machineShare {
	return machineShare{(m.busy - m0.busy) / secs, (m.steal - m0.steal) / secs}
}

// statCPU reads the first line of /proc/stat: user, nice, system, idle,
// iowait, irq, softirq, steal, then guest and guest_nice, which user and
// nice already count. Idle and iowait are not busy; steal, time the
// hypervisor gave to others, is neither busy nor counted.
func statCPU(line string) (busy, all float64, err error) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected %q", line)
	}
	for i, v := range f[1:8] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: unexpected %q", line)
		}
		all += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, all, nil
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc's times.
const clockTicks = 100

// rest says what the machine's other processes (the broker, the producer,
// the kernel's own work) took while a run ran, and the time stolen from
// it: a Redis that shares the machine's cores is slower a call when they
// take more, which its own figures do not show.
func (r result) rest() string {
	if r.machine.busy == 0 {
		return ""
	}
	rest := max(r.machine.busy-r.redis.core-r.cores, 0)
	return fmt.Sprintf("; the rest of the machine %.0f %% of a core, %.0f %% stolen by the hypervisor", 100*rest, 100*r.machine.steal)
}

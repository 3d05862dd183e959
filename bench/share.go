package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// cpuTaken is what the processes of a latency run had used at one moment:
// CPU seconds of redis-server, the replicas, the broker (when
// scripts/bench.sh names it) and the bench itself (its producer), the
// machine's busy and total CPU time, the script calls Redis had run, and
// how long redis-server's main thread and the replicas' threads had been
// runnable but waiting for a core (the kernel's schedstat).
type cpuTaken struct {
	at                time.Time
	redis, fw         float64
	broker, self      float64
	busy, all         float64
	calls             float64
	redisWait, fwWait float64
}

// cpuWatch takes cpuTaken of one Redis (pid, when it runs here) and the
// replicas; a figure that cannot be read counts as none.
type cpuWatch struct {
	rdb  *redis.Client
	pid  int
	reps []*replica
}

func newCPUWatch(ctx context.Context, rdb *redis.Client, reps []*replica) cpuWatch {
	return cpuWatch{rdb: rdb, pid: redisPid(ctx, rdb), reps: reps}
}

func (c cpuWatch) take(ctx context.Context) (s cpuTaken) {
	s.at = time.Now()
	if r, err := snapshotRedis(ctx, c.rdb); err == nil {
		s.redis, s.calls = r.cpu, r.scriptCalls()
	}
	s.fw = cpuOf(c.reps)
	s.broker = brokerCPU()
	s.self, _ = cpuSeconds(os.Getpid())
	s.busy, s.all, _ = machineCPU()
	if c.pid > 0 {
		s.redisWait, _ = runQueueWait(c.pid, false)
	}
	for _, rep := range c.reps {
		w, _ := runQueueWait(rep.cmd.Process.Pid, true)
		s.fwWait += w
	}
	return s
}

// cpuShare is what each process used between two cpuTakens, in percent of
// a core (the machine's busy share in percent of all its cores), and the
// script calls an event.
type cpuShare struct {
	redis, fw, broker, self, machine float64
	redisWait, fwWait                float64
	callsPerEvent                    float64
}

// since is the share from last to s, events having been processed
// meanwhile.
func (s cpuTaken) since(last cpuTaken, events float64) cpuShare {
	secs := max(s.at.Sub(last.at).Seconds(), 1e-9)
	pct := func(a, b float64) float64 { return 100 * (a - b) / secs }
	return cpuShare{
		redis: pct(s.redis, last.redis), fw: pct(s.fw, last.fw), broker: pct(s.broker, last.broker), self: pct(s.self, last.self),
		machine:   100 * (s.busy - last.busy) / max(s.all-last.all, 1),
		redisWait: pct(s.redisWait, last.redisWait), fwWait: pct(s.fwWait, last.fwWait),
		callsPerEvent: (s.calls - last.calls) / max(events, 1),
	}
}

// String is the share as the latency row and the trace say it.
func (c cpuShare) String() string {
	return fmt.Sprintf("%.2f script calls an event; CPU redis-server %.0f %%, fraudwatch %.0f %%, the broker %.0f %%, the bench %.0f %%, the machine %.0f %% busy; waiting for a core: redis-server %.0f %% of the time, fraudwatch's threads %.0f %%",
		c.callsPerEvent, c.redis, c.fw, c.broker, c.self, c.machine, c.redisWait, c.fwWait)
}

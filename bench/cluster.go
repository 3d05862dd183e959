package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// cluster measures (b) on Redis Cluster: one process against a cluster of
// each size in -cluster (each master with a replica), and two processes
// against the largest. On a machine of few cores the masters, their
// replicas, the broker and fraudwatch share them, which bounds what more
// masters can give; the rows say how busy each was. They give no script
// time: with more servers than cores, a script's wall time (which
// commandstats counts) includes the time its server waited for a core.
func (b *bench) cluster(ctx context.Context) error {
	for i, masters := range b.o.clusters {
		procs := []int{1}
		if i == len(b.o.clusters)-1 && masters > 1 {
			procs = append(procs, 2)
		}
		if err := b.clusterRows(ctx, masters, procs); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) clusterRows(ctx context.Context, masters int, procs []int) error {
	progress("starting a Redis Cluster of %d master(s), each with a replica", masters)
	c, err := redistest.NewCluster(filepath.Join(b.dir, fmt.Sprintf("cluster-%d", masters)), masters)
	if err != nil {
		return fmt.Errorf("redis cluster: %w", err)
	}
	defer c.Stop()
	serving, err := c.Masters(ctx)
	if err != nil {
		return err
	}
	var mc, rc []*redis.Client
	for _, addr := range c.Addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		if slices.Contains(serving, addr) {
			mc = append(mc, rdb)
		} else {
			rc = append(rc, rdb)
		}
	}
	snapshot := func() (redisSnapshot, error) { return snapshotCluster(ctx, mc, rc) }
	if len(mc) == 1 {
		if err := b.waitCost(ctx, mc[0]); err != nil {
			return err
		}
	}
	for _, n := range procs {
		for _, rdb := range mc {
			if err := flushSync(ctx, rdb); err != nil {
				return err
			}
		}
		progress("(b) fraudwatch, %d process(es), Redis Cluster of %d master(s), over %d events", n, masters, b.o.events)
		run := *b.fw
		run.redis, run.cluster, run.replicas = c.Addrs, true, n
		run.group = fmt.Sprintf("bench-fw-cluster%d-%d-%s", masters, n, b.suffix)
		res, err := run.measure(ctx, snapshot, nil)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("fraudwatch, %d process%s, Redis Cluster of %d master%s (each with a replica)", n, plural(n, "es"), masters, plural(masters, "s"))
		b.row(what, res, func() string {
			return fmt.Sprintf("%.2f × 1 process on one Redis; redis-servers %.0f %% of a core in all (masters %.0f %%, replicas %.0f %%), fraudwatch %.0f %%",
				res.eventsPerSec/b.fwEvents, 100*res.redis.core, 100*(res.redis.core-res.redis.replicas), 100*res.redis.replicas, 100*res.cores)
		})
		if n == 1 && res.untimed == "" {
			b.sizing.cluster = append(b.sizing.cluster, clusterFigure{masters: masters, res: res})
		}
	}
	return nil
}

func plural(n int, suffix string) string {
	if n == 1 {
		return ""
	}
	return suffix
}

// waitCost measures what waiting for a replica would cost (WAIT, which
// fraudwatch does not send). It runs the seed-style script's ceiling on a
// master with a replica, in pipelines of 256 calls as a batch of (b) sends,
// with and without a WAIT for the replica at the end of each pipeline.
func (b *bench) waitCost(ctx context.Context, master *redis.Client) error {
	const conns, depth = 4, 256
	seed := redis.NewScript(seedbench.Script())
	progress("(a) ceiling of a seed-style incr_and_check on a cluster master with a replica, without and with WAIT, for %v each", b.o.ceilingFor)
	without, err := ceiling(ctx, master, seed, seedCall("a:wait"), conns, depth, b.o.ceilingFor, nil)
	if err != nil {
		return err
	}
	var pipelines, short atomic.Int64
	with, err := ceiling(ctx, master, seed, seedCall("a:wait"), conns, depth, b.o.ceilingFor, func(pipe redis.Pipeliner) func() error {
		wait := pipe.Do(ctx, "WAIT", 1, 1000) // one replica, a second at most
		return func() error {
			acked, err := wait.Int64()
			pipelines.Add(1)
			if acked < 1 {
				short.Add(1)
			}
			return err
		}
	})
	if err != nil {
		return err
	}
	// Each client waits for its pipeline's answer before the next: the
	// time a pipeline takes is the clients over the pipelines a second.
	perPipeline := func(callsPerSec float64) float64 { return conns / (callsPerSec / depth) }
	b.tbl.add("a", "Redis ceiling: seed-style incr_and_check on a Redis Cluster master with a replica, pipelines of 256 calls",
		fmt.Sprintf("%.0f calls/s", without), fmt.Sprintf("%.2f × the seed-style script on one Redis", without/b.seedCalls))
	b.tbl.add("a", "the same with WAIT 1 (the replica has the writes) at the end of each pipeline",
		fmt.Sprintf("%.0f calls/s", with), fmt.Sprintf("%.2f × without; a pipeline took %s instead of %s; %d of %d WAITs timed out",
			with/without, ms(perPipeline(with)), ms(perPipeline(without)), short.Load(), pipelines.Load()))
	return nil
}

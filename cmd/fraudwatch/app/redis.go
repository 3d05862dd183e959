package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// checkEviction warns, loudly, of each Redis (each master of a cluster)
// whose maxmemory-policy lets it evict keys: a Redis that runs full
// evicts windows, marks, cooldowns and delivery records without a word,
// and with them counts, alerts and the once-only posting. noeviction
// refuses writes instead, which /readyz reports. A Redis that does not
// let us read its configuration (CONFIG renamed or denied, as managed
// services do) is not checked.
func checkEviction(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	check := func(ctx context.Context, c *redis.Client) error {
		got, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return err
		}
		policy, ok := got["maxmemory-policy"]
		if !ok {
			return errors.New("CONFIG GET maxmemory-policy answered no policy")
		}
		if policy != "noeviction" {
			log.Warn("redis may evict fraudwatch's keys: set maxmemory-policy to noeviction, or evicted windows, cooldowns and delivery records silently break counts and once-only alerts",
				"maxmemory_policy", policy, "redis_addr", c.Options().Addr)
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	default:
		err = errors.New("unknown kind of client")
	}
	if err != nil {
		log.Debug("redis maxmemory-policy not checked", "err", err)
	}
}

// checkRedis is the start's look at Redis. Loading the scripts proves it
// reachable; an outage is not fatal: events wait for Redis, /readyz
// reports it, and calls load the scripts when it is back. Reachable, it
// must not evict, and no live replica may count in other buckets: that
// one is the error that ends the run.
func (a *App) checkRedis(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.lua.Load(lctx); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("redis not reachable at start; events will wait for it", "err", err)
		}
		return nil
	}
	checkEviction(lctx, a.rdb, a.log)
	if err := a.buckets.check(lctx); errors.Is(err, errBucketsConflict) {
		return fmt.Errorf("app: %w", err)
	} else if err != nil {
		a.log.Warn("redis.buckets not checked against the other replicas at start", "err", err)
	}
	return nil
}

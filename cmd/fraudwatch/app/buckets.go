package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Replicas that count a group in different buckets (redis.buckets) split
// its windows between two keys, and neither half may cross its threshold:
// nothing fails, alerts are just missed. So each replica keeps its count
// in one key under the prefix (lua.Keys.CountingBuckets), rewritten every
// bucketsEvery to live bucketsLease: a replica that starts while another
// count lives there refuses to run, and one that finds another count while
// it runs says so (an ERROR, fraudwatch_counting_buckets_conflict 1).
const (
	bucketsLease = 30 * time.Second
	bucketsEvery = 10 * time.Second
)

// bucketsStore is what the guard needs of Redis.
type bucketsStore interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	SetArgs(ctx context.Context, key string, value any, a redis.SetArgs) *redis.StatusCmd
	TTL(ctx context.Context, key string) *redis.DurationCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
}

type bucketsGuard struct {
	rdb      bucketsStore
	key      string
	n        string
	log      *slog.Logger
	conflict prometheus.Gauge
}

// errBucketsConflict is a live replica counting in other buckets.
var errBucketsConflict = errors.New("replicas under this key prefix count in different buckets")

func newBucketsGuard(rdb bucketsStore, key string, n int, log *slog.Logger, reg prometheus.Registerer) (*bucketsGuard, error) {
	g := &bucketsGuard{rdb: rdb, key: key, n: strconv.Itoa(n), log: log, conflict: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fraudwatch_counting_buckets_conflict",
		Help: "1 while another replica of this key prefix counts in other buckets (redis.buckets), as the last check found; else 0.",
	})}
	if err := reg.Register(g.conflict); err != nil {
		return nil, fmt.Errorf("app: register metrics: %w", err)
	}
	return g, nil
}

// check is the start's: it takes the key when no replica holds it, and
// refuses (errBucketsConflict) when one that counts in other buckets
// does, without writing over it. Any other error is Redis's.
func (g *bucketsGuard) check(ctx context.Context) error {
	took, err := g.rdb.SetNX(ctx, g.key, g.n, bucketsLease).Result()
	if err != nil || took {
		if err != nil {
			return fmt.Errorf("app: take %s: %w", g.key, err)
		}
		return nil
	}
	held, err := g.rdb.Get(ctx, g.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil // it just ran out: the next refresh takes it
	case err != nil:
		return fmt.Errorf("app: read %s: %w", g.key, err)
	case held != g.n && !g.leased(ctx):
		// No replica writes it without a lifetime: another client did (a
		// PERSIST, a restore), and no live replica is behind it.
		g.log.Warn("counting buckets key held a value without a lifetime, not a replica's; taken", "key", g.key, "held", quoteHeld(held))
		if err := g.rdb.Set(ctx, g.key, g.n, bucketsLease).Err(); err != nil {
			return fmt.Errorf("app: take %s: %w", g.key, err)
		}
	case held != g.n:
		return fmt.Errorf("%w: this one counts in %s (redis.buckets), a replica that wrote %s less than %v ago in %s; "+
			"stop every replica before changing redis.buckets (docs/operations.md, To counting buckets)",
			errBucketsConflict, g.n, quoteHeld(held), bucketsLease, g.key)
	}
	return nil
}

// leased reports whether the key has a lifetime, as every replica's write
// gives it; an error counts as leased, so that the start refuses rather
// than takes.
func (g *bucketsGuard) leased(ctx context.Context) bool {
	ttl, err := g.rdb.TTL(ctx, g.key).Result()
	return err != nil || ttl != -1
}

// refresh writes the replica's count again and reads what was there: a
// count of another replica's means both count at once.
func (g *bucketsGuard) refresh(ctx context.Context) {
	old, err := g.rdb.SetArgs(ctx, g.key, g.n, redis.SetArgs{Get: true, TTL: bucketsLease}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		g.conflict.Set(0) // no replica wrote in the last bucketsLease
	case err != nil:
		// Redis's trouble shows in the scripts' errors and /readyz.
		g.log.Debug("counting buckets not checked", "err", err)
	case old != g.n:
		g.conflict.Set(1)
		g.log.Error("another replica counts in other buckets: windows are split between them and may miss their thresholds; "+
			"give every replica the same redis.buckets", "counting_buckets", g.n, "other_buckets", quoteHeld(old), "key", g.key)
	default:
		g.conflict.Set(0)
	}
}

// run refreshes until ctx ends.
func (g *bucketsGuard) run(ctx context.Context) {
	t := time.NewTicker(bucketsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.refresh(ctx)
		}
	}
}

// quoteHeld shows what another writer left in the key, bounded: it is
// Redis contents, not necessarily a replica's.
func quoteHeld(v string) string {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 1<<16 {
		return v
	}
	return fmt.Sprintf("a value not a count (%d bytes)", len(v))
}

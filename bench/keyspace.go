package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// keyspaceCeiling measures the seed-style ceiling again over as many
// counters as (b) left windows in Redis, all made before the timer
// starts, each looked up once in the measurement: a yardstick whose keys,
// like (b)'s windows, are found among that many, not among the 100,000
// that (a)'s ceiling cycles and that stay in the CPU's caches. It is a
// reference beside (b)'s first row, for what bounds it (docs/performance.md,
// Redis's one core); the goals stay against (a)'s ceiling. Its yardstick
// over 100,000 keys is the ceiling measured right after (b)'s first row
// (b.fwCeiling, ceilingAfter), just before it. It empties (b)'s Redis
// first and after.
func (b *bench) keyspaceCeiling(ctx context.Context, keys int) error {
	if keys < 1 {
		return nil
	}
	if err := flushSync(ctx, b.rdb); err != nil {
		return err
	}
	again := b.fwCeiling
	script := redis.NewScript(seedbench.Script())
	progress("(a) ceiling of a seed-style incr_and_check over %d counters made first, (b)'s windows, for %v", keys, b.o.ceilingFor)
	began := time.Now()
	if err := fillCounters(ctx, b.rdb, "a:ks", keys); err != nil {
		return err
	}
	progress("made %d counters in %v", keys, time.Since(began).Round(time.Millisecond))
	calls, err := ceiling(ctx, b.rdb, script, keyspaceCall("a:ks", keys), 4, 256, b.o.ceilingFor, nil)
	if err != nil {
		return err
	}
	if err := flushSync(ctx, b.rdb); err != nil {
		return err
	}
	b.tbl.add("a", fmt.Sprintf("Redis ceiling: seed-style incr_and_check over (b)'s keyspace, %s counters made first, after (b)", thousands(keys)),
		fmt.Sprintf("%.0f calls/s", calls),
		fmt.Sprintf("%.2f × the same script over 100,000 keys right before (%.0f calls/s; %.2f × the first row), %.1f calls a counter; (b) is %.2f × this ÷ %d rules (a reference: the goals are against the first row)",
			calls/again, again, again/b.seedCalls, calls*b.o.ceilingFor.Seconds()/float64(keys), b.fwEvents/(calls/rulesPerOrder), rulesPerOrder))
	return nil
}

// keyspaceCall counts into the counters fillCounters made, in turn.
func keyspaceCall(prefix string, keys int) scriptCall {
	return func(i int) ([]string, []any) {
		return []string{prefix + ":{" + strconv.Itoa(i%keys) + "}"}, []any{1, 600, 1_000_000}
	}
}

// fillCounters makes keys counters as keyspaceCall names them, each at 1
// with a TTL, so that the seed-style script finds every one running.
func fillCounters(ctx context.Context, rdb *redis.Client, prefix string, keys int) error {
	const depth = 1000
	for from := 0; from < keys; from += depth {
		pipe := rdb.Pipeline()
		for i := from; i < min(from+depth, keys); i++ {
			pipe.Set(ctx, prefix+":{"+strconv.Itoa(i)+"}", 1, 10*time.Minute)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("make the keyspace's counters: %w", err)
		}
	}
	return nil
}

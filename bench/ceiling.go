package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptCall is one call of a script: its keys and arguments for the i-th
// call of a ceiling run.
type scriptCall func(i int) (keys []string, args []any)

// ceiling measures how many calls of script Redis runs per second while
// conns clients keep it busy, each sending pipelines of depth calls, for
// d: the most any consumer of that script can reach on this Redis. end,
// when set, adds its commands to the end of each pipeline and returns what
// checks their answers.
func ceiling(ctx context.Context, rdb *redis.Client, script *redis.Script, call scriptCall, conns, depth int, d time.Duration,
	end func(redis.Pipeliner) func() error) (float64, error) {
	if err := script.Load(ctx, rdb).Err(); err != nil {
		return 0, fmt.Errorf("load script: %w", err)
	}
	var (
		next  atomic.Int64
		calls atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	start := time.Now()
	deadline := start.Add(d)
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				pipe := rdb.Pipeline()
				for range depth {
					keys, args := call(int(next.Add(1)))
					script.EvalSha(ctx, pipe, keys, args...)
				}
				check := func() error { return nil }
				if end != nil {
					check = end(pipe)
				}
				_, err := pipe.Exec(ctx)
				if err == nil {
					err = check()
				}
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					return
				}
				calls.Add(int64(depth))
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, fmt.Errorf("run script: %w", first)
	}
	return float64(calls.Load()) / time.Since(start).Seconds(), nil
}

// seedCall counts into one of 100,000 keys, as four rules over a large
// population do.
func seedCall(prefix string) scriptCall {
	return func(i int) ([]string, []any) {
		return []string{prefix + ":{" + strconv.Itoa(i%100_000) + "}"}, []any{1, 600, 1_000_000}
	}
}

// projectScript reads one of fraudwatch's own scripts from lua/, as the
// binary embeds it.
func projectScript(name string) (*redis.Script, error) {
	src, err := os.ReadFile("lua/" + name + ".lua")
	if err != nil {
		return nil, fmt.Errorf("read the project's %s script (run the bench from the repository root): %w", name, err)
	}
	return redis.NewScript(string(src)), nil
}

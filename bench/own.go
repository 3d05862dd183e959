package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

type namedCeiling struct {
	name   string
	perSec float64
}

// ownCeilings measures fraudwatch's own counting script the way the
// seed-style one is measured: pipelined EVALSHA through lua.Batch, as the
// engine sends it, one event and one rule a call over 100,000 groups; and
// one event into two rules a call, as rules grouping by the same field
// share one.
func ownCeilings(ctx context.Context, rdb *redis.Client, d time.Duration) ([]namedCeiling, error) {
	s, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		return nil, err
	}
	if err := s.Load(ctx); err != nil {
		return nil, err
	}
	var out []namedCeiling
	for _, rules := range []int{1, 2} {
		progress("(a) ceiling of fraudwatch's incr_and_check, %d rule(s) a call, for %v", rules, d)
		perSec, err := ownCeiling(ctx, s, rules, d)
		if err != nil {
			return nil, err
		}
		name := "Redis ceiling: fraudwatch's incr_and_check, one event and rule a call"
		if rules > 1 {
			name = fmt.Sprintf("Redis ceiling: fraudwatch's incr_and_check, one event and %d rules of one group a call", rules)
		}
		out = append(out, namedCeiling{name, perSec})
	}
	return out, nil
}

func ownCeiling(ctx context.Context, s *lua.Scripts, rules int, d time.Duration) (float64, error) {
	const conns, depth = 4, 256
	var (
		next  atomic.Int64
		calls atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	deadline := start.Add(d)
	for c := range conns {
		src := lua.Source("bench", c) // each client its own partition, in order
		wg.Go(func() {
			offset := int64(0)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				b := s.Batch()
				for range depth {
					i := next.Add(1)
					tag := "a:own:{" + strconv.FormatInt(i%100_000, 10) + "}:"
					call := &lua.Call{Kind: lua.Count, Source: src, Offsets: tag + "o"}
					for r := range rules {
						name := tag + strconv.Itoa(r)
						call.Windows = append(call.Windows, lua.Window{Key: name, Marks: name + ":crossed", Length: 600 * time.Second, Threshold: 1_000_000})
						call.Changes = append(call.Changes, lua.Change{Window: r, Offset: offset, ID: lua.IDOf(strconv.FormatInt(i, 10)), Amount: 1})
					}
					offset++
					if err := b.Add(call); err != nil {
						panic(err)
					}
				}
				if err := b.Exec(ctx); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				calls.Add(depth)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(calls.Load()) / time.Since(start).Seconds(), nil
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// usedMemory is Redis's used_memory, in bytes.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// memoryNow is Redis's used_memory without its SLOWLOG. The bench has Redis
// keep up to slowMaxLen calls of slowFrom or longer, each with up to 32 of
// its arguments copied (about 3 KB for a counting call of many keys): read
// around a run, used_memory counted the log's growth as the run's own (182
// bytes an event of (b) where a warmed-up run, its log already full, read
// 129), and more for designs with more slow calls. So the log is emptied
// first; slow (nil for a server whose log the bench does not read) reads
// its entries before that, with read, or else marks them read (those of
// the runs before, a warm-up's). Redis numbers its entries on across a
// reset, so what slow reads later is what came after.
func memoryNow(ctx context.Context, rdb *redis.Client, slow *slowest, read bool) (int64, error) {
	if slow != nil {
		if err := slow.take(ctx, rdb, read); err != nil {
			return 0, err
		}
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		return 0, fmt.Errorf("redis slowlog reset: %w", err)
	}
	return usedMemory(ctx, rdb)
}

// flushSync empties Redis and returns once the memory is freed: Valkey 8
// frees a plain FLUSHALL's keys in the background (lazyfree-lazy-user-flush),
// so used_memory read right after it still counted them.
func flushSync(ctx context.Context, rdb *redis.Client) error {
	return rdb.Do(ctx, "FLUSHALL", "SYNC").Err()
}

// countersOnly is what the same counts take in the simplest store: one
// plain counter with the window's TTL for each of fraudwatch's windows
// (keys of kind f and w under prefix in rdb's database), and no records.
// It writes them into plain, a client of another database of the same
// Redis, measures, and removes them at once. Deleting them from
// fraudwatch's database would leave Redis resizing its key table, and
// freeing them in the background would keep it busy, for seconds of the
// latency measured next.
func countersOnly(ctx context.Context, rdb, plain *redis.Client, prefix string) (bytes int64, windows int, err error) {
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	n := 0
	read, write := rdb.Pipeline(), plain.Pipeline()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		vals := make([]*redis.StringCmd, len(keys))
		strs := make([]*redis.StringCmd, len(keys))
		ttls := make([]*redis.DurationCmd, len(keys))
		for i, k := range keys {
			// A fixed window (kind f) is a string, or a hash that holds
			// its count in c when its rule keeps evidence: both are asked,
			// and the one of the other type is refused. A sliding one is a
			// hash (kind w) that holds it in v.
			if strings.Contains(k, "}:f:") {
				vals[i], strs[i] = read.HGet(ctx, k, "c"), read.Get(ctx, k)
			} else {
				vals[i] = read.HGet(ctx, k, "v")
			}
			ttls[i] = read.PTTL(ctx, k)
		}
		if _, err := read.Exec(ctx); err != nil && err != redis.Nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return err
		}
		for i := range keys {
			if strs[i] != nil && strs[i].Err() == nil {
				vals[i] = strs[i]
			}
		}
		for i, k := range keys {
			ttl := ttls[i].Val()
			if ttl <= 0 {
				ttl = 10 * time.Minute
			}
			// The counter's name as a one-key-per-rule store would have it,
			// and its count alone.
			name := "plain:" + strings.TrimPrefix(k, prefix+":")
			write.Set(ctx, name, vals[i].Val(), ttl)
			n++
		}
		_, err := write.Exec(ctx)
		keys = keys[:0]
		return err
	}
	for _, kind := range []string{"f", "w"} {
		iter := rdb.Scan(ctx, 0, prefix+":{*}:"+kind+":*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				if err := flush(); err != nil {
					return 0, 0, err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return 0, 0, err
		}
	}
	if err := flush(); err != nil {
		return 0, 0, err
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	if err := plain.Do(ctx, "FLUSHDB", "SYNC").Err(); err != nil {
		return 0, 0, err
	}
	return after - before, n, nil
}

// countKeys is how many keys match pattern.
func countKeys(ctx context.Context, rdb *redis.Client, pattern string) (int, error) {
	n := 0
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	return n, iter.Err()
}

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

// countersOnly is what the same counts take as the simplest store would
// keep them: one plain counter with the window's TTL for each of
// fraudwatch's windows (keys of kind w under prefix), no records. It writes
// them, measures, and removes them again.
func countersOnly(ctx context.Context, rdb *redis.Client, prefix string) (bytes int64, windows int, err error) {
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	var plain []string
	iter := rdb.Scan(ctx, 0, prefix+":{*}:w:*", 1000).Iterator()
	pipe := rdb.Pipeline()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		vals := make([]*redis.StringCmd, len(keys))
		ttls := make([]*redis.DurationCmd, len(keys))
		for i, k := range keys {
			vals[i] = pipe.HGet(ctx, k, "v")
			ttls[i] = pipe.PTTL(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return err
		}
		for i, k := range keys {
			ttl := ttls[i].Val()
			if ttl <= 0 {
				ttl = 10 * time.Minute
			}
			// The counter's name as a one-key-per-rule store would have it.
			name := "plain:" + strings.TrimPrefix(k, prefix+":")
			pipe.Set(ctx, name, vals[i].Val(), ttl)
			plain = append(plain, name)
		}
		_, err := pipe.Exec(ctx)
		keys = keys[:0]
		return err
	}
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
	if err := flush(); err != nil {
		return 0, 0, err
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	for i := 0; i < len(plain); i += 1000 {
		if err := rdb.Unlink(ctx, plain[i:min(i+1000, len(plain))]...).Err(); err != nil {
			return 0, 0, err
		}
	}
	return after - before, len(plain), nil
}

package redistest

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// FixedCount is a fixed window's count as incr_and_check keeps it: a
// string's, or a hash's field c when its rule keeps evidence
// (lua/incr_and_check.lua); redis.Nil when there is none.
func FixedCount(ctx context.Context, rdb redis.Cmdable, key string) (string, error) {
	v, err := rdb.Get(ctx, key).Result()
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return rdb.HGet(ctx, key, "c").Result()
	}
	return v, err
}

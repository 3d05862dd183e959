package main

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

type namedCeiling struct {
	name   string
	perSec float64
}

// ownCeilings measures fraudwatch's own counting script the way the
// seed-style one is measured: pipelined EVALSHA, one event and rule a call.
func ownCeilings(ctx context.Context, rdb *redis.Client, d time.Duration) ([]namedCeiling, error) {
	incr, err := projectScript("incr_and_check")
	if err != nil {
		return nil, err
	}
	progress("(a) ceiling of fraudwatch's incr_and_check for %v", d)
	perSec, err := ceiling(ctx, rdb, incr, func(i int) ([]string, []any) {
		tag := "a:own:{" + strconv.Itoa(i%100_000) + "}"
		id := "ev-" + strconv.Itoa(i)
		return []string{tag + ":count", tag + ":seen", tag + ":crossed:" + id},
			[]any{1, 600, 1_000_000, id, 10_000, 604_800}
	}, 4, 256, d)
	if err != nil {
		return nil, err
	}
	return []namedCeiling{{"Redis ceiling: fraudwatch's incr_and_check, one event and rule a call", perSec}}, nil
}

package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// The machine's cores slow down for minutes at a time, every process alike
// (docs/performance.md, Goals): a (b) row in such a spell against (a)'s
// ceiling, measured minutes before, carries the spell in its ratio. So the
// seed-style ceiling is measured again right after each (b) row on a
// server, as (a) measured it, and the rows give their ratios against it
// too, beside today's.

// ceilingAfter measures the seed-style ceiling on rdb right after a (b)
// row, once what needs the row's windows has run: it empties rdb first, so
// that the windows share Redis with none of it, and after, so that the
// next run finds Redis as it would have. 0 with -ceiling-for 0, and then
// the rows say nothing of it. on names the server in the progress line.
func (b *bench) ceilingAfter(ctx context.Context, rdb *redis.Client, on string) (float64, error) {
	if b.o.ceilingFor <= 0 {
		return 0, nil
	}
	if err := flushSync(ctx, rdb); err != nil {
		return 0, err
	}
	progress("(a) ceiling of a seed-style incr_and_check again%s, right after that row, for %v", on, b.o.ceilingFor)
	calls, err := ceiling(ctx, rdb, redis.NewScript(seedbench.Script()), seedCall("a:seed"), 4, 256, b.o.ceilingFor, nil)
	if err != nil {
		return 0, err
	}
	return calls, flushSync(ctx, rdb)
}

// afterNote is a row's events/s against the ceiling measured right after
// it and against the mean of that and the one before (named by before),
// each ÷ the rules; "" when either was not measured.
func afterNote(rate, ceilBefore, ceilAfter float64, before string) string {
	if ceilBefore <= 0 || ceilAfter <= 0 {
		return ""
	}
	return fmt.Sprintf("; %.2f × the seed-style ceiling ÷ %d measured right after it (%.0f calls/s, %s %s), %.2f × the mean of the two ceilings ÷ %d",
		rate/(ceilAfter/rulesPerOrder), rulesPerOrder, ceilAfter, apart(ceilAfter, ceilBefore), before,
		rate/((ceilBefore+ceilAfter)/2/rulesPerOrder), rulesPerOrder)
}

// normalised is a row's ratio to (b)'s first row with each divided by the
// ceiling measured right after it: a slow spell over one of them slows its
// ceiling too, and drops out. 0 when a ceiling was not measured.
func normalised(rate, ceil, first, firstCeil float64) float64 {
	if ceil <= 0 || firstCeil <= 0 || first <= 0 {
		return 0
	}
	return (rate / ceil) / (first / firstCeil)
}

// vsFirstNote is a windows row's ratio to the first row normalised by the
// ceilings right after each, and its ceiling against (a)'s; "" when the
// ceilings were not measured.
func vsFirstNote(rate, ceil, first, firstCeil, seed float64) string {
	n := normalised(rate, ceil, first, firstCeil)
	if n == 0 || seed <= 0 {
		return ""
	}
	return fmt.Sprintf(", %.2f × with each ÷ the seed-style ceiling measured right after it (%.0f calls/s after this row, %s (a)'s)", n, ceil, apart(ceil, seed))
}

// apart says how far a ceiling is from another: "-27 % from".
func apart(ceil, from float64) string {
	return fmt.Sprintf("%+.0f %% from", 100*(ceil/from-1))
}

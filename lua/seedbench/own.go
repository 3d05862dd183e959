package seedbench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

// The bound of issue 40's experiment (cheapcall/bare.lua): the commands
// incr_and_check gives a call of changes to running windows that cross
// nothing, an HGET of its bucket's offset, an INCRBY a change and an HSET
// of the offset, with nothing checked. No script that reads and writes its
// bucket's offset, as counting each event once needs, costs Redis less for
// the same changes: Config.Bound measures it in incr_and_check's place.
//
//go:embed cheapcall/bare.lua
var boundSrc string

// retention is lua.Config.Retention's default, the crossing marks' life,
// in seconds.
var retention = int64(lua.DefaultRetention / time.Second)

// countKeys are an incr_and_check call's keys: its bucket's offsets, then
// each window's counter and marks.
func countKeys(c *lua.Call) []any {
	keys := []any{c.Offsets}
	for _, w := range c.Windows {
		keys = append(keys, w.Key, w.Marks)
	}
	return keys
}

// textCall is c as lua.Batch sent it to incr_and_check before its numbers
// were packed (issue 40): the arguments the bound and the experiment's
// text variants take.
func textCall(c *lua.Call) [][2][]any {
	args := []any{c.Source, retention, len(c.Windows)}
	for _, w := range c.Windows {
		args = append(args, int64(w.Length/time.Second), w.Threshold)
	}
	for _, ch := range c.Changes {
		args = append(args, ch.Window+1, ch.Offset, string(ch.ID[:]), ch.Amount)
	}
	return [][2][]any{{countKeys(c), args}}
}

// runOwn sends calls to incr_and_check, or to the bound, and returns the
// counters it answered, a change each, in order.
func (p *Pair) runOwn(ctx context.Context, calls []*lua.Call) ([]int64, error) {
	if p.bound != nil {
		return p.runBound(ctx, calls)
	}
	batch := p.scripts.Batch()
	for _, c := range calls {
		if err := batch.Add(c); err != nil {
			return nil, fmt.Errorf("seedbench: %w", err)
		}
	}
	if err := batch.Exec(ctx); err != nil {
		return nil, fmt.Errorf("seedbench: incr_and_check: %w", err)
	}
	var current []int64
	for _, c := range calls {
		for _, r := range c.Results {
			if r.Err != nil {
				return nil, fmt.Errorf("seedbench: incr_and_check: %w", r.Err)
			}
			current = append(current, r.Current)
		}
	}
	return current, nil
}

// runBound sends calls to the bound, pipelined, and returns the counters
// it answered, a change each, in order.
func (p *Pair) runBound(ctx context.Context, calls []*lua.Call) ([]int64, error) {
	pipe := p.own.Pipeline()
	cmds := make([]*redis.Cmd, 0, len(calls))
	for _, c := range calls {
		kv := textCall(c)[0]
		keys := make([]string, len(kv[0]))
		for i, k := range kv[0] {
			keys[i] = k.(string)
		}
		cmds = append(cmds, p.bound.EvalSha(ctx, pipe, keys, kv[1]...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("seedbench: the bound: %w", err)
	}
	var current []int64
	for i, cmd := range cmds {
		reply, err := cmd.Int64Slice()
		if err != nil || len(reply) != 2*len(calls[i].Changes) {
			return nil, fmt.Errorf("seedbench: the bound answered %v: %w", reply, errors.Join(err, lua.ErrUnexpectedReply))
		}
		for j := 0; j < len(reply); j += 2 {
			current = append(current, reply[j])
		}
	}
	return current, nil
}

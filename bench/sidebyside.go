package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// sideBySide measures (a)'s side-by-side rows: what the seed-style script
// and incr_and_check cost Redis per window change under one load, as
// go test -bench Seed ./lua measures it (package seedbench), at 1 and at
// 8 windows a call, each run on two private redis-servers for -scripts-for.
// It runs before any workload is produced, while the broker and the
// bench's Redis are idle, and it sends to one server at a time: a script's
// time in commandstats is wall time, which a server waiting for a core
// would add to.
func (b *bench) sideBySide(ctx context.Context) error {
	if b.o.scriptsFor <= 0 {
		return nil
	}
	// Then the bound under the same load: no script that reads and writes
	// its bucket's offset costs less (issue 40's targets: calls of 1 at 1.2
	// × the seed-style script's, of 8 at 0.7 ×).
	rows := []struct {
		bound      bool
		what, note string
	}{
		{false, "Redis µs per window change, side by side, a private redis-server each: seed-style script (a change a call) and incr_and_check, ",
			"incr_and_check %.1f µs a change; %s changes each (go test -bench Seed ./lua)"},
		{true, "the same, the bound in incr_and_check's place: its commands alone, nothing checked (HGET of the offset, an INCRBY a change, HSET), ",
			"the bound %.1f µs a change; %s changes each (lua/seedbench/cheapcall/bare.lua): a script that counts each event once costs Redis no less"},
	}
	var seedUsec, changes float64
	for _, row := range rows {
		for _, windows := range []int{1, 8} {
			r, err := b.sideBySideRun(ctx, windows, row.bound)
			if err != nil {
				return err
			}
			if !row.bound {
				seedUsec, changes = seedUsec+r.SeedUsec, changes+float64(r.Changes)
			}
			calls := "1 window a call"
			if windows > 1 {
				calls = strconv.Itoa(windows) + " windows a call"
			}
			b.tbl.add("a", row.what+calls, fmt.Sprintf("%.2f ×", r.Ratio()),
				fmt.Sprintf("seed-style %.1f µs a call, "+row.note, r.Seed(), r.Own(), thousands(int(r.Changes))))
		}
	}
	b.seedPerCall = seedUsec / changes
	return nil
}

func (b *bench) sideBySideRun(ctx context.Context, windows int, bound bool) (seedbench.Result, error) {
	var clients [2]*redis.Client
	for i := range clients {
		dir := filepath.Join(b.dir, "side-by-side-"+strconv.Itoa(windows)+"-"+strconv.FormatBool(bound)+"-"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return seedbench.Result{}, err
		}
		srv, err := redistest.NewServer(dir)
		if err != nil {
			return seedbench.Result{}, fmt.Errorf("side by side: %w", err)
		}
		defer srv.Stop()
		clients[i] = redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		defer clients[i].Close()
	}
	own := "incr_and_check"
	if bound {
		own = "the bound"
	}
	progress("(a) side by side: the seed-style script and %s, %d window(s) a call: a pass over every group, then %v", own, windows, b.o.scriptsFor)
	p, err := seedbench.New(ctx, seedbench.Config{Windows: windows, Bound: bound}, clients[0], clients[1])
	if err != nil {
		return seedbench.Result{}, err
	}
	for deadline := time.Now().Add(b.o.scriptsFor); ; {
		if err := p.Step(ctx); err != nil {
			return seedbench.Result{}, err
		}
		if !time.Now().Before(deadline) {
			return p.Result(ctx)
		}
	}
}

// perChange says what (b)'s scripts cost Redis per window change: the
// profile's µs per event over the four rules' evaluations, a window change
// each (an order changes 4 windows, a refund 1). It compares that with the
// seed-style script's µs a call side by side; the issue 26 target is 1.0
// or less. With -rules the changes per event are not known, and it says
// nothing.
func (b *bench) perChange(p redisProfile, evaluations int) string {
	if b.o.rules != "" {
		return ""
	}
	changes := float64(evaluations) / float64(b.o.events)
	s := fmt.Sprintf("; %.1f µs of script per window change (%.2f changes an event)", p.scripts/changes, changes)
	if b.seedPerCall > 0 {
		s += fmt.Sprintf(", %.2f × the seed-style script's %.1f µs a call (a, side by side)", p.scripts/changes/b.seedPerCall, b.seedPerCall)
	}
	return s
}

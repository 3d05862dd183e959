package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// Redis memory around a run leaves out the SLOWLOG's growth: with every
// call logged, a thousand calls of 30 arguments of 100 bytes grow
// used_memory by megabytes (the positive signal), memoryNow by what the
// calls stored (nothing); the slow calls are read first, or marked read.
func TestMemoryLeavesOutTheSlowlog(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Connect(t, redistest.Start(t).Addr)
	if err := rdb.ConfigSet(ctx, "slowlog-max-len", "5000").Err(); err != nil {
		t.Fatal(err)
	}
	logged := func(on bool) {
		// Every call while on; none else, as the bench's threshold logs
		// none of the SLOWLOG's and INFO's own commands.
		v := map[bool]string{true: "0", false: "10000000"}[on]
		if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slow := &slowest{byScript: map[string]slowCall{}, scripts: map[string]string{}, read: -1}
	calls := func() {
		logged(true)
		defer logged(false)
		args := make([]any, 30)
		for i := range args {
			args[i] = strings.Repeat("a", 100)
		}
		// One at a time: a pipeline of them would grow the client's query
		// buffer by megabytes, which Redis counts in used_memory and trims
		// when its cron gets to it, between the readings or not.
		for range 1000 {
			if err := rdb.Eval(ctx, "return 1", nil, args...).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw0 := used(t, rdb)
	calls()
	if grew := used(t, rdb) - raw0; grew < 1<<20 {
		t.Fatalf("used_memory grew %d bytes with the calls logged, want megabytes", grew)
	}
	mem0, err := memoryNow(ctx, rdb, slow, false)
	if err != nil {
		t.Fatal(err)
	}
	marked := slow.read
	if marked < 1000 {
		t.Fatalf("the calls before were not marked read: %d", marked)
	}
	calls()
	mem1, err := memoryNow(ctx, rdb, slow, true)
	if err != nil {
		t.Fatal(err)
	}
	if grew := mem1 - mem0; grew > 64<<10 {
		t.Fatalf("memoryNow grew %d bytes over calls that store nothing", grew)
	}
	if slow.read <= marked || slow.dropped {
		t.Fatalf("the run's calls were not read: read %d (from %d), dropped %v", slow.read, marked, slow.dropped)
	}
	if n := rdb.SlowLogLen(ctx).Val(); n != 0 {
		t.Fatalf("SLOWLOG holds %d entries after, want it emptied", n)
	}
}

func used(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	m, err := usedMemory(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

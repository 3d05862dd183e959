package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// A second's line names the event classes whose latest spike fell in that
// second, and what Redis expired meanwhile.
func TestRedisText(t *testing.T) {
	from := time.Unix(1000, 200e6)
	to := time.Unix(1001, 300e6)
	last := redisView{expired: 10, capped: 1, expireMS: 5}
	tests := []struct {
		name   string
		now    redisView
		want   []string
		absent []string
	}{
		{"quiet", redisView{expired: 10, capped: 1, expireMS: 5, expires: 7},
			[]string{"expired 0 keys (0 ms of expire cycle, 0 at its time cap), 7 with a TTL", "none over 5 ms"}, nil},
		{"expiring", redisView{expired: 5010, capped: 3, expireMS: 45, spikes: []spike{{"expire-cycle", 1001, 26}, {"command", 999, 80}}},
			[]string{"expired 5000 keys (40 ms of expire cycle, 2 at its time cap)", "expire-cycle 26 ms"}, []string{"command"}},
		{"two classes", redisView{spikes: []spike{{"fast-command", 1001, 7}, {"command", 1001, 31}}},
			[]string{"command 31 ms, fast-command 7 ms"}, nil},
	}
	for _, tt := range tests {
		got := redisText(last, tt.now, from, to)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tt.name, got, w)
			}
		}
		for _, a := range tt.absent {
			if strings.Contains(got, a) {
				t.Errorf("%s: %q names %q, a spike of another second", tt.name, got, a)
			}
		}
	}
}

// LATENCY LATEST's rows, of three fields or more (newer servers add some),
// become spikes; others are skipped.
func TestParseSpikes(t *testing.T) {
	rows := []any{
		[]any{"command", int64(1001), int64(31), int64(900)},
		[]any{"fork", int64(1002), int64(12), int64(12), int64(24), int64(2)},
		[]any{"short"},
		"not a row",
	}
	got := parseSpikes(rows)
	want := []spike{{"command", 1001, 31}, {"fork", 1002, 12}}
	if len(got) != len(want) {
		t.Fatalf("spikes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("spike %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// A real redis-server: the trace finds its process, reads its view, sets
// the latency monitor and puts it back; favourRedis sets its niceness and
// puts it back.
func TestRedisOnThisMachine(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := redistest.Connect(t, s.Addr)
	pid := redisPid(ctx, rdb)
	if pid == 0 {
		t.Fatal("redisPid found no local redis-server")
	}
	if err := rdb.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	restore, err := watchLatency(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if got := rdb.ConfigGet(ctx, "latency-monitor-threshold").Val()["latency-monitor-threshold"]; got != latencyThreshold {
		t.Errorf("latency-monitor-threshold %q while traced, want %q", got, latencyThreshold)
	}
	v, err := viewRedis(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if v.keys != 1 || v.expires != 1 {
		t.Errorf("keys %d, expires %d; want 1 and 1", v.keys, v.expires)
	}
	restore()
	if got := rdb.ConfigGet(ctx, "latency-monitor-threshold").Val()["latency-monitor-threshold"]; got != "0" {
		t.Errorf("latency-monitor-threshold %q after, want 0 as before", got)
	}
	if _, err := runQueueWait(pid, false); err != nil {
		t.Errorf("redis-server's wait: %v", err)
	}
	if _, err := runQueueWait(os.Getpid(), true); err != nil {
		t.Errorf("the test's threads' wait: %v", err)
	}

	// Raising a niceness needs no privilege; lowering it back may, so the
	// restore is checked only where it is allowed. The server inherits the
	// test's own niceness.
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, pid)
	if err != nil {
		t.Fatal(err)
	}
	was := 20 - prio
	if was == 19 {
		t.Skip("redis-server runs at nice 19 already: nothing to raise")
	}
	back, note, err := favourRedis(ctx, rdb, was+1)
	if err != nil {
		t.Fatal(err)
	}
	if prio, _ := syscall.Getpriority(syscall.PRIO_PROCESS, pid); 20-prio != was+1 {
		t.Errorf("nice %d after favourRedis(%d) (%s), want %d", 20-prio, was+1, note, was+1)
	}
	back()
	if prio, _ := syscall.Getpriority(syscall.PRIO_PROCESS, pid); 20-prio != was && os.Geteuid() == 0 {
		t.Errorf("nice %d after restore, want %d as before", 20-prio, was)
	}
}

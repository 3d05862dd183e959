package lua_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// BenchmarkLargestCall times one counting call of each kind at its
// largest (lua.MaxWindows windows of one bucket, the kind's MaxChanges
// changes, every window new), as Redis's SLOWLOG measures it, on a private
// redis-server: every other client of a Redis waits while a script runs,
// and the design aims for under 1 ms (docs/performance.md). "crossing"
// windows cross their threshold at their last change; the others never
// do. Reported as µs/call, the fastest of the op's calls.
// sales_decr's refunds find their windows empty (they are clamped).
//
//	go test -run x -bench LargestCall ./lua
func BenchmarkLargestCall(b *testing.B) {
	for _, kind := range lua.Kinds() {
		for _, crossing := range []bool{false, true} {
			if crossing && kind == lua.Refund {
				continue // a refund crosses nothing
			}
			name := fmt.Sprintf("%s %dx%d crossing=%v", kind, lua.MaxWindows, kind.MaxChanges(), crossing)
			b.Run(name, func(b *testing.B) {
				benchLargestCall(b, kind, kind.MaxChanges(), crossing)
			})
		}
	}
}

// benchLargestCall times calls of kind with changes changes over
// lua.MaxWindows new windows.
func benchLargestCall(b *testing.B, kind lua.Kind, changes int, crossing bool) {
	rdb := redistest.Connect(b, redistest.Start(b).Addr)
	s, err := lua.New(lua.Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	keys, err := lua.NewKeys("fw")
	if err != nil {
		b.Fatal(err)
	}
	groups := oneBucket(keys, lua.MaxWindows)
	fastest := time.Duration(0)
	n := 0
	for b.Loop() {
		took, err := largestCall(b.Context(), rdb, s, keys, groups, kind, changes, crossing, n)
		if err != nil {
			b.Fatal(err)
		}
		if fastest == 0 || took < fastest {
			fastest = took
		}
		n++
	}
	b.ReportMetric(float64(fastest.Microseconds()), "µs/call")
}

// oneBucket is n groups of one hash tag, as one call's windows must be.
func oneBucket(keys lua.Keys, n int) []lua.Group {
	var groups []lua.Group
	for i := 0; len(groups) < n; i++ {
		g := keys.Group([]string{fmt.Sprintf("c-%d", i)})
		if len(groups) == 0 || g.Tag() == groups[0].Tag() {
			groups = append(groups, g)
		}
	}
	return groups
}

// largestCall makes one call of kind with changes changes, spread over new
// windows (run n's own) in turn, and returns how long Redis took to run it
// (SLOWLOG, every command logged).
func largestCall(ctx context.Context, rdb *redis.Client, s *lua.Scripts, keys lua.Keys, groups []lua.Group, kind lua.Kind,
	changes int, crossing bool, n int) (time.Duration, error) {
	rule := fmt.Sprintf("r%d", n)
	threshold := int64(changes/len(groups) + 100) // never reached
	if crossing {
		threshold = int64(changes / len(groups)) // every window's last change
	}
	ws := make([]lua.Window, len(groups))
	for i, g := range groups {
		ws[i] = lua.Window{Key: keys.Counter(g, rule), Marks: keys.Marks(g, rule), Length: 10 * time.Minute, Threshold: threshold}
		if !kind.Counter() {
			ws[i].Key, ws[i].Values, ws[i].Sliding = keys.Window(g, rule), keys.Values(g, rule), true
		}
	}
	at := time.Now().UnixMilli()
	chs := make([]lua.Change, changes)
	for j := range chs {
		chs[j] = lua.Change{Window: j % len(ws), Offset: int64(j), ID: lua.IDOf(fmt.Sprintf("e-%d", j)), Amount: 1, At: at,
			Value: lua.ValueOf(fmt.Sprintf("v-%d", j))}
	}
	b := s.Batch()
	src, offsets := lua.Source("orders", n), keys.Offsets(groups[0])
	c := &lua.Call{Kind: kind, Source: src, Offsets: offsets, Windows: ws, Changes: chs}
	if err := b.Add(c); err != nil {
		return 0, err
	}
	// The script is loaded before (NOSCRIPT's fallback would be logged too).
	if err := s.Load(ctx); err != nil {
		return 0, err
	}
	if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		return 0, err
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		return 0, err
	}
	if err := b.Exec(ctx); err != nil {
		return 0, err
	}
	// A refused change would time a call that did nothing.
	seen := make([]int64, len(ws))
	for i, r := range c.Results {
		w := chs[i].Window
		seen[w]++
		if r.Err != nil || r.Late || r.First != (crossing && seen[w] == threshold) {
			return 0, fmt.Errorf("change %d answered %+v", i, r)
		}
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return 0, err
	}
	for _, l := range logs {
		if len(l.Args) > 0 && l.Args[0] == "evalsha" {
			return l.Duration, nil
		}
	}
	return 0, fmt.Errorf("no EVALSHA in SLOWLOG")
}

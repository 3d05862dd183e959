package lua

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// BenchmarkIncrAndCheck is what Redis spends on incr_and_check per window
// change, from its own commandstats (redis-µs/window), on a private
// redis-server so that no other test's calls count: pipelines of 64 calls
// of 1 or 8 windows (one change each, groups of one bucket a call, cycling
// over 100,000 groups), as the engine sends them under a backlog. Script
// layouts are compared with it (README, Performance): it moves by a few
// percent from run to run, where make bench's rates move by up to a tenth.
//
//	go test -run x -bench IncrAndCheck ./lua
func BenchmarkIncrAndCheck(b *testing.B) {
	for _, windows := range []int{1, 8} {
		b.Run(strconv.Itoa(windows)+" windows a call", func(b *testing.B) {
			srv := redistest.Start(b)
			rdb := redistest.Connect(b, srv.Addr)
			s, err := New(Config{}, rdb, prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Load(b.Context()); err != nil {
				b.Fatal(err)
			}
			const pipe = 64
			src := Source("orders", 0)
			var event, offset int64
			for b.Loop() {
				batch := s.Batch()
				for range pipe {
					tag := "b:{" + strconv.FormatInt(event%256, 10) + "}:"
					c := &Count{Source: src, Offsets: tag + "o"}
					for w := range windows {
						event++
						key := tag + strconv.FormatInt(event%100_000, 10)
						c.Windows = append(c.Windows, Window{Key: key, Marks: key + ":x", Length: 10 * time.Minute, Threshold: 1_000_000})
						c.Changes = append(c.Changes, Change{Window: w, Offset: offset, ID: IDOf(strconv.FormatInt(event, 10)), Amount: 100})
						offset++
					}
					if err := batch.Count(c); err != nil {
						b.Fatal(err)
					}
				}
				if err := batch.Exec(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			info, err := rdb.Info(b.Context(), "commandstats").Result()
			if err != nil {
				b.Fatal(err)
			}
			calls, usec := evalshaStats(info)
			if calls == 0 {
				b.Fatal("no EVALSHA in commandstats")
			}
			b.ReportMetric(usec/(calls*float64(windows)), "redis-µs/window")
		})
	}
}

// evalshaStats reads EVALSHA's calls and total µs from INFO commandstats.
func evalshaStats(info string) (calls, usec float64) {
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls = f
			case "usec":
				usec = f
			}
		}
	}
	return calls, usec
}

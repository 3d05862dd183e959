package lua_test

import (
	"strconv"
	"testing"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/lua/seedbench"
)

// BenchmarkSeedSideBySide runs the seed-style script and incr_and_check
// under the same load, a private redis-server each, and reports what each
// cost Redis per window change from its own commandstats, and their ratio
// (docs/performance.md): the issue 26 target is a ratio of 1.0 or less.
// The load (package seedbench): pipelines of 64 calls, 16 partitions at
// increasing offsets, 256 buckets, 100,000 groups whose windows all exist
// before the timer starts, 1 or 8 windows an incr_and_check call; the
// seed-style script changes one window a call. An op is one pipeline of
// incr_and_check calls and the seed-style calls of the same changes.
//
//	go test -run x -bench Seed ./lua
func BenchmarkSeedSideBySide(b *testing.B) {
	for _, windows := range []int{1, 8} {
		b.Run(strconv.Itoa(windows)+" windows a call", func(b *testing.B) {
			seed := redistest.Connect(b, redistest.Start(b).Addr)
			own := redistest.Connect(b, redistest.Start(b).Addr)
			p, err := seedbench.New(b.Context(), seedbench.Config{Windows: windows}, seed, own)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := p.Step(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			r, err := p.Result(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.Seed(), "seed-µs/change")
			b.ReportMetric(r.Own(), "incr-µs/change")
			b.ReportMetric(r.Ratio(), "ratio")
		})
	}
}

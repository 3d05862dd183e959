package lua

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// incrAndCheckGet is incr_and_check as it was before a counter's head was
// read with GETRANGE: a window whose rule keeps evidence read whole (GET)
// and, with its entries, written whole (SET KEEPTTL) at every change.
//
//go:embed testdata/incr_and_check_get.lua
var incrAndCheckGet string

//go:embed testdata/incr_and_check_incrfirst.lua
var incrAndCheckIncrFirst string

// countingScenario is a load of incr_and_check calls on fixed windows whose
// rule keeps evidence, each holding entries after its count (D1).
type countingScenario struct {
	name    string
	entries int // a window's entries, 37 bytes each, after its count; -1: a plain counter, no RS
	perCall int // windows a call, one change each
}

var countingScenarios = []countingScenario{
	{"a plain counter, calls of 1", -1, 1},
	{"no entries yet, calls of 1", 0, 1},
	{"1 entry, calls of 1", 1, 1},
	{"2 entries, calls of 1", 2, 1},
	{"10 entries, calls of 1", 10, 1},
	{"2 entries, calls of 8", 2, 8},
	{"10 entries, calls of 8", 10, 8},
}

// BenchmarkCounterWithEvidenceSideBySide counts each scenario's changes
// through incr_and_check as it was (GET and SET of the whole string) and as
// it is (GETRANGE of the value's first 45 bytes; past 44 bytes, SETRANGE
// over the count), and as an experiment (INCRBY first), on a private
// redis-server, and reports Redis's time a change (INFO commandstats:
// EVALSHA's microseconds, the script's commands included). Each window is
// counted from 1 to 6, below its threshold: the count keeps its length, as
// most changes do. Each iteration runs every scenario once with each
// script: run it 5 times for medians.
//
//	go test -run x -bench CounterWithEvidenceSideBySide -benchtime 5x ./lua
func BenchmarkCounterWithEvidenceSideBySide(b *testing.B) {
	rdb := redistest.Connect(b, redistest.Start(b).Addr)
	ctx := b.Context()
	scripts := []struct {
		name   string
		script *redis.Script
	}{{"GET", redis.NewScript(prelude + incrAndCheckGet)}, {"GETRANGE", incrAndCheck}, {"INCRBY first", redis.NewScript(prelude + incrAndCheckIncrFirst)}}
	got, sizes := map[string][]float64{}, map[string]int64{}
	for b.Loop() {
		// Each goes first in turn, an iteration each: the first of a pair
		// warms Redis's allocator for the second.
		slices.Reverse(scripts)
		for _, sc := range countingScenarios {
			for _, s := range scripts {
				usec, size, err := runCountingScenario(ctx, rdb, s.script, sc)
				if err != nil {
					b.Fatalf("%s, %s: %v", sc.name, s.name, err)
				}
				got[sc.name+"/"+s.name] = append(got[sc.name+"/"+s.name], usec)
				sizes[sc.name+"/"+s.name] = size
			}
		}
	}
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, sc := range countingScenarios {
		line := sc.name + ":"
		for _, s := range scripts {
			line += fmt.Sprintf(" %s %.2f µs a change, %d bytes a window;", s.name, median(got[sc.name+"/"+s.name]), sizes[sc.name+"/"+s.name])
		}
		b.Log(line)
	}
}

// runCountingScenario seeds 4,000 windows as sc has them and counts each 5
// times through script, and returns Redis's µs a change and a window's
// bytes after (MEMORY USAGE).
func runCountingScenario(ctx context.Context, rdb *redis.Client, script *redis.Script, sc countingScenario) (float64, int64, error) {
	const windows, rounds = 4000, 5
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, 0, err
	}
	if err := script.Load(ctx, rdb).Err(); err != nil {
		return 0, 0, err
	}
	pipe := rdb.Pipeline()
	for w := range windows {
		value := "1" // "1" RS entry RS entry ..., or "1" RS before any
		for e := range sc.entries {
			text := fmt.Sprintf("%d:%d:", w, e)
			value += EvidenceSep + text + strings.Repeat("x", 37-len(text))
		}
		if sc.entries == 0 {
			value += EvidenceSep
		}
		if sc.entries < 0 {
			value = "1" // its rule keeps evidence, but its count is far from its threshold
		}
		pipe.Set(ctx, fmt.Sprintf("{b}:w%d", w), value, 600*time.Second)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, err
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return 0, 0, err
	}
	changes := 0
	for round := range rounds {
		pipe := rdb.Pipeline()
		for first := 0; first < windows; first += sc.perCall {
			var ws []Window
			var cs []Change
			keys := []string{fmt.Sprintf("{b}:o%d", first)}
			for k := range sc.perCall {
				key := fmt.Sprintf("{b}:w%d", first+k)
				keys = append(keys, key, key+":crossed")
				ws = append(ws, Window{Key: key, Marks: key + ":crossed", Length: 600 * time.Second, Threshold: 1000, Evidence: true})
				cs = append(cs, Change{Window: k, Offset: int64(round*sc.perCall + k), Amount: 1})
			}
			packed, err := packCount(nil, time.Hour, ws, cs)
			if err != nil {
				return 0, 0, err
			}
			script.EvalSha(ctx, pipe, keys, "p:0", string(packed))
			changes += len(cs)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			return 0, 0, err
		}
		for _, cmd := range cmds {
			v, err := cmd.(*redis.Cmd).Int64Slice()
			if err != nil || len(v) < 2 || v[0] != int64(round+2) {
				return 0, 0, fmt.Errorf("a call answered %v, %v; want a count of %d", v, err, round+2)
			}
		}
	}
	usec, _, err := evalshaMicroseconds(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	// Every window has the same shape: the first's size is each one's.
	size, err := rdb.MemoryUsage(ctx, "{b}:w0").Result()
	if err != nil {
		return 0, 0, err
	}
	return usec / float64(changes), size, nil
}

package lua

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// evidenceAddBefore is evidence_add as it was before issue 40: a
// window's evidence rewritten whole at every call (GET, the string
// rebuilt, PTTL, SET), newest first, with its count.
//
//go:embed testdata/evidence_add_before.lua
var evidenceAddBefore string

// evidenceAddUnpacked is evidence_add as it was before its arguments were
// packed: three arguments an entry (window, text, mark), each checked by a
// Lua pattern.
//
//go:embed testdata/evidence_add_unpacked.lua
var evidenceAddUnpacked string

// evidenceAddAppend is evidence_add writing a window's new entries with
// one APPEND, trimmed as evidence_add trims: what APPEND's room to grow
// costs in memory, and saves in time (not kept: Performance, Evidence).
//
//go:embed testdata/evidence_add_append.lua
var evidenceAddAppend string

// evidenceScenario is a load of evidence_add calls: windows that each get
// entries, one an order, 8 windows a call (a batch's bucket).
type evidenceScenario struct {
	name    string
	windows int
	entries func(w int) int // how many entries window w gets
	text    int             // bytes an entry
	slides  bool
}

var evidenceScenarios = []evidenceScenario{
	// (b)'s count rules: a window keeps from evidence short of its
	// threshold, so at most keep entries, the last a crossing.
	// (b)'s entries: 44 bytes before issue 40, 37 in base 36.
	{"fixed, 1-10 entries", 4000, func(w int) int { return 1 + w%10 }, 44, false},
	{"fixed, 1-10 entries of 37 bytes", 4000, func(w int) int { return 1 + w%10 }, 37, false},
	{"sliding, 1-10 entries", 4000, func(w int) int { return 1 + w%10 }, 44, true},
	// An amount's window keeps from half its threshold: more than keep.
	{"fixed, 40 entries", 1000, func(int) int { return 40 }, 44, false},
}

// BenchmarkEvidenceSideBySide runs each scenario's calls through
// evidence_add as it was before, with its arguments unpacked (GET, SET),
// appending, and as it is (packed), on a private redis-server,
// each on a database of its own, and reports Redis's time a call and an
// entry (INFO commandstats: EVALSHA's microseconds, the script's commands
// included) and its memory a window (MEMORY USAGE of the evidence keys).
// Each iteration runs every scenario once with each script: run it 3 times
// for medians.
//
//	go test -run x -bench EvidenceSideBySide -benchtime 3x ./lua
func BenchmarkEvidenceSideBySide(b *testing.B) {
	rdb := redistest.Connect(b, redistest.Start(b).Addr)
	ctx := b.Context()
	scripts := []struct {
		name   string
		script *redis.Script
	}{
		{"before", redis.NewScript(evidenceAddBefore)}, {"unpacked", redis.NewScript(evidenceAddUnpacked)},
		{"append", redis.NewScript(evidenceAddAppend)}, {"packed", evidenceAdd},
	}
	type figures struct{ call, entry, commands, window []float64 }
	got := map[string]*figures{}
	for b.Loop() {
		for _, sc := range evidenceScenarios {
			for _, s := range scripts {
				call, entry, commands, window, err := runEvidenceScenario(ctx, rdb, s.script, sc)
				if err != nil {
					b.Fatalf("%s, %s: %v", sc.name, s.name, err)
				}
				k := sc.name + "/" + s.name
				if got[k] == nil {
					got[k] = &figures{}
				}
				f := got[k]
				f.call, f.entry, f.window = append(f.call, call), append(f.entry, entry), append(f.window, window)
				f.commands = append(f.commands, commands)
			}
		}
	}
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	// One line a scenario: go test cuts a benchmark's log at 10 lines.
	for _, sc := range evidenceScenarios {
		line := sc.name + ":"
		for _, s := range scripts {
			f := got[sc.name+"/"+s.name]
			line += fmt.Sprintf(" %s %.1f µs a call (%.2f an entry, %.1f commands), %.0f bytes a window;",
				s.name, median(f.call), median(f.entry), median(f.commands), median(f.window))
		}
		b.Log(line)
	}
}

// runEvidenceScenario runs sc's calls through script on an empty
// database and returns Redis's µs a call and an entry, the script's
// commands a call, and the bytes a window's evidence takes at the end.
func runEvidenceScenario(ctx context.Context, rdb *redis.Client, script *redis.Script, sc evidenceScenario) (float64, float64, float64, float64, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, 0, 0, 0, err
	}
	if err := script.Load(ctx, rdb).Err(); err != nil {
		return 0, 0, 0, 0, err
	}
	pipe := rdb.Pipeline()
	for w := range sc.windows {
		pipe.Set(ctx, fmt.Sprintf("{b}:w%d", w), "1", 600e9) // the window, with its life
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, 0, 0, err
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return 0, 0, 0, 0, err
	}
	calls, entries := 0, 0
	for round := 0; ; round++ {
		// Each round gives every window with entries left one, 8 windows a call.
		var due []int
		for w := range sc.windows {
			if round < sc.entries(w) {
				due = append(due, w)
			}
		}
		if len(due) == 0 {
			break
		}
		pipe := rdb.Pipeline()
		for c := range slices.Chunk(due, 8) {
			keys, args, err := evidenceScenarioCall(script, sc, c, round)
			if err != nil {
				return 0, 0, 0, 0, err
			}
			script.EvalSha(ctx, pipe, keys, args...)
			calls++
			entries += len(c)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		for _, cmd := range cmds {
			if v, err := cmd.(*redis.Cmd).Slice(); err != nil || (len(v) == 1 && v[0] == int64(-1)) {
				return 0, 0, 0, 0, fmt.Errorf("a call answered %v, %v", v, err)
			}
		}
	}
	usec, commands, err := evalshaMicroseconds(ctx, rdb)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	pipe = rdb.Pipeline()
	usages := make([]*redis.IntCmd, sc.windows)
	for w := range sc.windows {
		usages[w] = pipe.MemoryUsage(ctx, fmt.Sprintf("{b}:e%d", w), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, 0, 0, err
	}
	bytes := int64(0)
	for _, u := range usages {
		bytes += u.Val()
	}
	return usec / float64(calls), usec / float64(entries), commands / float64(calls), float64(bytes) / float64(sc.windows), nil
}

// evidenceScenarioCall is a call of sc's windows c, an entry each, in
// round: packed by the encoder for evidence_add, else three arguments an
// entry, as the scripts before it take them.
func evidenceScenarioCall(script *redis.Script, sc evidenceScenario, c []int, round int) ([]string, []any, error) {
	e := &Evidence{}
	for i, w := range c {
		text := strconv.Itoa(w) + ":" + strconv.Itoa(round) + ":"
		text += strings.Repeat("x", max(sc.text-len(text), 0))
		e.Windows = append(e.Windows, EvidenceWindow{Key: fmt.Sprintf("{b}:e%d", w), Window: fmt.Sprintf("{b}:w%d", w),
			Keep: 10, TTL: 600 * time.Second, Slides: sc.slides})
		// The 10th is the crossing of a count's window of 10.
		e.Entries = append(e.Entries, EvidenceEntry{Window: i, Text: text, List: round == 9})
	}
	if script == evidenceAdd {
		return packEvidence(e)
	}
	keys := make([]string, 0, 2*len(c))
	args := []any{len(c)}
	for _, w := range e.Windows {
		keys = append(keys, w.Key, w.Window)
		args = append(args, w.Keep, 600, map[bool]string{false: "0", true: "1"}[w.Slides])
	}
	for _, en := range e.Entries {
		args = append(args, en.Window+1, en.Text, map[bool]string{false: "0", true: "1"}[en.List])
	}
	return keys, args, nil
}

// evalshaMicroseconds is EVALSHA's microseconds in INFO commandstats, and
// how many other commands ran (the scripts').
func evalshaMicroseconds(ctx context.Context, rdb *redis.Client) (float64, float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	usec, others := -1.0, 0.0
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
		if !ok || name == "info" || name == "config|resetstat" {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			v, ok := strings.CutPrefix(field, "usec=")
			if k, isCalls := strings.CutPrefix(field, "calls="); isCalls && name != "evalsha" {
				n, _ := strconv.ParseFloat(k, 64)
				others += n
			}
			if ok && name == "evalsha" {
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if usec < 0 {
		return 0, 0, fmt.Errorf("no EVALSHA in INFO commandstats")
	}
	return usec, others, nil
}

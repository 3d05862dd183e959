package seedbench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// Each variant of the experiment that counts answers as today's
// incr_and_check does, call for call, and leaves its windows and marks
// as it does, on a real Redis: new windows, crossings, an event's several
// windows at one offset, increments above 1, calls sent again (a
// redelivery, answered from the marks and the counters), and changes a
// script refuses (a window index out of range, a threshold of 0).
func TestCheapCallVariantsAnswerAsToday(t *testing.T) {
	rdb := redistest.Connect(t, redistest.Start(t).Addr)
	today, _ := lua.Text(lua.IncrAndCheckName)
	vs, err := variants()
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		name   string
		script *redis.Script
		encode func(c *lua.Call) [][2][]any
	}
	runs := []run{{"today", redis.NewScript(today), todayCall}}
	for _, v := range vs {
		if v.works && v.file != "" && v.file != "bare.lua" {
			src, err := v.source()
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{v.name, redis.NewScript(src), v.encode})
		}
	}
	rng := rand.New(rand.NewPCG(40, 1))
	var sent []*lua.Call     // calls made, to send again
	seen := map[string]int{} // what today's script answered, by kind
	for step := range 400 {
		c := randomCall(rng, int64(10*step), step)
		again := step > 10 && rng.IntN(8) == 0
		if again {
			c = sent[rng.IntN(len(sent))]
		} else {
			sent = append(sent, c)
		}
		var want []int64
		for r, run := range runs {
			got := runCall(t, rdb, run.script, run.encode(withPrefix(c, prefix(r)))[0])
			if r == 0 {
				want = got
				for i := 0; i+1 < len(got); i += 2 {
					seen[answerKind(got[i], got[i+1], again)]++
				}
			} else if !slices.Equal(got, want) {
				t.Fatalf("step %d (sent again %v): %s answered %v, today's script %v", step, again, run.name, got, want)
			}
		}
	}
	for _, kind := range []string{"crossed", "crossed, sent again", "counted", "counted, sent again", "refused"} {
		if seen[kind] == 0 {
			t.Errorf("no change was answered %s (%v): the calls do not test it", kind, seen)
		}
	}
	for r := 1; r < len(runs); r++ {
		for w := range 12 {
			if got, want := state(t, rdb, prefix(r), w), state(t, rdb, prefix(0), w); got != want {
				t.Errorf("window %d: %s left %s, today's script %s", w, runs[r].name, got, want)
			}
		}
	}
}

func answerKind(current, first int64, again bool) string {
	kind := map[int64]string{1: "crossed", 0: "counted", -1: "refused"}[first]
	if again && first != -1 {
		kind += ", sent again"
	}
	return kind
}

func prefix(run int) string { return "v" + strconv.Itoa(run) }

// withPrefix is c with its keys under p.
func withPrefix(c *lua.Call, p string) *lua.Call {
	out := *c
	out.Offsets = p + c.Offsets
	out.Windows = slices.Clone(c.Windows)
	for i := range out.Windows {
		out.Windows[i].Key, out.Windows[i].Marks = p+c.Windows[i].Key, p+c.Windows[i].Marks
	}
	return &out
}

// randomCall is a call of one to four windows of 12, from
// one partition, of one to three events each changing one to all of them
// at one offset, with small thresholds, so that windows start and cross.
func randomCall(rng *rand.Rand, offset int64, step int) *lua.Call {
	c := &lua.Call{Kind: lua.Count, Source: "p0", Offsets: ":{b}:o"}
	n := 1 + rng.IntN(4)
	for _, w := range rng.Perm(12)[:n] {
		threshold := int64(3 + w%5)
		if w == 11 {
			threshold = 0 // refused: its changes answer {-1, -1}
		}
		c.Windows = append(c.Windows, lua.Window{Key: ":{b}:f:" + strconv.Itoa(w), Marks: ":{b}:m:" + strconv.Itoa(w),
			Length: time.Duration(60+w) * time.Second, Threshold: threshold})
	}
	for e := range 1 + rng.IntN(3) {
		id := lua.IDOf(strconv.Itoa(step) + "-" + strconv.Itoa(e))
		for i := range n {
			if i > 0 && rng.IntN(2) == 0 {
				continue
			}
			window := i
			if rng.IntN(40) == 0 {
				window = n // out of range: refused
			}
			c.Changes = append(c.Changes, lua.Change{Window: window, Offset: offset + int64(e), ID: id, Amount: 1 + int64(rng.IntN(3)/2)})
		}
	}
	return c
}

func runCall(t *testing.T, rdb *redis.Client, script *redis.Script, kv [2][]any) []int64 {
	t.Helper()
	keys := make([]string, len(kv[0]))
	for i, k := range kv[0] {
		keys[i] = k.(string)
	}
	got, err := script.Run(t.Context(), rdb, keys, kv[1]...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// state is window w's under prefix p: its counter, whether it has a TTL,
// and its marks.
func state(t *testing.T, rdb *redis.Client, p string, w int) string {
	key, marks := p+":{b}:f:"+strconv.Itoa(w), p+":{b}:m:"+strconv.Itoa(w)
	// A string, as the variants keep it and today's script a window
	// that keeps no evidence, or a hash's field c.
	v, _ := redistest.FixedCount(t.Context(), rdb, key)
	ttl := rdb.TTL(t.Context(), key).Val() > 0
	m := rdb.HGetAll(t.Context(), marks).Val()
	mttl := len(m) == 0 || rdb.TTL(t.Context(), marks).Val() > 0
	return fmt.Sprintf("counter %q (TTL %v), marks %v (TTL %v)", v, ttl, m, mttl)
}

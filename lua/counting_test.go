package lua

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

func newScripts(t *testing.T) (*Scripts, redis.UniversalClient, string) {
	t.Helper()
	rdb := redistest.Client(t)
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb, redistest.Prefix(t)
}

// testWindow is a window under the test's prefix. Its keys are in the
// prefix's hash tag, or in {t} when it has none: a call's keys share one.
func testWindow(prefix, name string, length time.Duration, threshold int64) Window {
	if !strings.Contains(prefix, "{") {
		prefix += ":{t}"
	}
	return Window{Key: prefix + ":" + name, Marks: prefix + ":" + name + ":crossed", Length: length, Threshold: threshold}
}

// offsetsOf is the bucket's offsets key of a test's window: beside it, in
// its hash tag.
func offsetsOf(w Window) string { return w.Key[:strings.LastIndexByte(w.Key, ':')] + ":o" }

// ev is one event of a test: its partition's source, offset and id.
type ev struct {
	src    string
	offset int64
	id     string
	amount int64
}

// count runs one incr_and_check call of the events into the windows (each
// event into each window) and returns the results, event by event.
func count(t *testing.T, s *Scripts, windows []Window, evs ...ev) []Counted {
	t.Helper()
	res, err := tryCount(t.Context(), s, windows, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func tryCount(ctx context.Context, s *Scripts, windows []Window, evs ...ev) ([]Counted, error) {
	c := &Count{Source: evs[0].src, Offsets: offsetsOf(windows[0]), Windows: windows}
	for _, e := range evs {
		for w := range windows {
			c.Changes = append(c.Changes, Change{Window: w, Offset: e.offset, ID: IDOf(e.id), Amount: e.amount})
		}
	}
	b := s.Batch()
	if err := b.Count(c); err != nil {
		return nil, err
	}
	return c.Results, b.Exec(ctx)
}

// refund runs one sales_decr call of the refunds against the windows.
func refund(t *testing.T, s *Scripts, windows []Window, evs ...ev) []Refunded {
	t.Helper()
	r := &Refund{Source: evs[0].src, Offsets: offsetsOf(windows[0]), Windows: windows}
	for _, e := range evs {
		for w := range windows {
			r.Changes = append(r.Changes, Change{Window: w, Offset: e.offset, ID: IDOf(e.id), Amount: e.amount})
		}
	}
	b := s.Batch()
	if err := b.Refund(r); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r.Results
}

func value(t *testing.T, rdb redis.UniversalClient, w Window) int64 {
	t.Helper()
	n, err := rdb.Get(t.Context(), w.Key).Int64()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

func TestCountFirstCross(t *testing.T) {
	type step struct {
		inc     int64
		current int64
		first   bool
	}
	tests := []struct {
		name      string
		threshold int64
		steps     []step
	}{
		{"counts cross at the threshold once", 3, []step{{1, 1, false}, {1, 2, false}, {1, 3, true}, {1, 4, false}}},
		{"threshold 1 crosses at the first event", 1, []step{{1, 1, true}, {1, 2, false}}},
		{"an amount jumps past the threshold", 1_000_000, []step{{400_000, 400_000, false}, {700_000, 1_100_000, true}, {5, 1_100_005, false}}},
		{"exactly at the threshold", 100, []step{{100, 100, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			w := testWindow(prefix, "w", time.Minute, tt.threshold)
			// One event a call, and then all of them in one call into a
			// second window, from another partition: the answers must
			// agree.
			var all []ev
			for i, st := range tt.steps {
				e := ev{"0:t", int64(i), fmt.Sprint("e", i), st.inc}
				all = append(all, ev{"1:t", e.offset, e.id, e.amount})
				got := count(t, s, []Window{w}, e)[0]
				if got.Err != nil || got.Current != st.current || got.First != st.first {
					t.Fatalf("step %d: %+v, want current %d first %v", i, got, st.current, st.first)
				}
			}
			w2 := testWindow(prefix, "w2", time.Minute, tt.threshold)
			for i, got := range count(t, s, []Window{w2}, all...) {
				if got.Current != tt.steps[i].current || got.First != tt.steps[i].first {
					t.Fatalf("in one call, step %d: %+v", i, got)
				}
			}
			if v := value(t, rdb, w); v != tt.steps[len(tt.steps)-1].current {
				t.Fatalf("counter = %d", v)
			}
		})
	}
}

// One call counts an event into every window of a group, each with its
// own threshold.
func TestCountIntoSeveralWindows(t *testing.T) {
	s, _, prefix := newScripts(t)
	ws := []Window{testWindow(prefix, "count", time.Minute, 2), testWindow(prefix, "amount", time.Minute, 1000)}
	c := &Count{Source: "0:t", Offsets: offsetsOf(ws[0]), Windows: ws, Changes: []Change{
		{Window: 0, Offset: 1, ID: IDOf("a"), Amount: 1}, {Window: 1, Offset: 1, ID: IDOf("a"), Amount: 600},
		{Window: 0, Offset: 2, ID: IDOf("b"), Amount: 1}, {Window: 1, Offset: 2, ID: IDOf("b"), Amount: 600},
	}}
	b := s.Batch()
	if err := b.Count(c); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []Counted{{Current: 1}, {Current: 600}, {Current: 2, First: true}, {Current: 1200, First: true}}
	for i := range want {
		if c.Results[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, c.Results[i], want[i])
		}
	}
}

func TestExactlyOneFirstCrossUnderRace(t *testing.T) {
	s, _, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 100)
	// 20 replicas, each with its own partitions, race 10 events each.
	firsts := firstCrossings(t, 20, func(r int) ([]Counted, error) {
		var all []Counted
		for i := range 10 { // a call each, so that the replicas interleave
			res, err := tryCount(context.Background(), s, []Window{w}, ev{fmt.Sprintf("%d:t", r), int64(i), fmt.Sprintf("r%d-e%d", r, i), 1})
			if err != nil {
				return all, err
			}
			all = append(all, res...)
		}
		return all, nil
	})
	if firsts != 1 {
		t.Fatalf("%d events crossed first, want exactly 1", firsts)
	}
}

// firstCrossings runs call for replicas 0..n-1 at once and counts the
// changes answered "crossed first".
func firstCrossings(t *testing.T, n int, call func(replica int) ([]Counted, error)) int {
	t.Helper()
	var mu sync.Mutex
	firsts := 0
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			res, err := call(r)
			if err != nil {
				t.Error(err)
				return
			}
			for _, c := range res {
				if c.First {
					mu.Lock()
					firsts++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return firsts
}

func TestWindowTTL(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "w", 30*time.Second, 100)
	count(t, s, []Window{w}, ev{"0:t", 0, "e0", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl <= 29*time.Second || ttl > 30*time.Second {
		t.Fatalf("new window TTL = %v, want its length", ttl)
	}
	// A running window keeps its end.
	rdb.Expire(ctx, w.Key, 10*time.Second)
	count(t, s, []Window{w}, ev{"0:t", 1, "e1", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl > 10*time.Second {
		t.Fatalf("a later event extended the window to %v", ttl)
	}
	// A window that lost its TTL gets its length again when it reaches
	// its threshold: it is not asked before, which saves a TTL a change.
	rdb.Persist(ctx, w.Key)
	count(t, s, []Window{w}, ev{"0:t", 2, "e2", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl != -1 {
		t.Fatalf("TTL = %v below the threshold, want none yet", ttl)
	}
	rdb.IncrBy(ctx, w.Key, 96)
	count(t, s, []Window{w}, ev{"0:t", 3, "e3", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl <= 29*time.Second {
		t.Fatalf("TTL = %v at the threshold, want the window set again", ttl)
	}
	// A redelivery writes nothing, so it cannot arm a window either.
	rdb.Persist(ctx, w.Key)
	count(t, s, []Window{w}, ev{"0:t", 3, "e3", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl != -1 {
		t.Fatalf("TTL = %v after a redelivery, want it untouched", ttl)
	}
}

func TestWindowEnds(t *testing.T) {
	t.Parallel() // a second waiting for the window to end
	s, rdb, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Second, 2)
	if got := count(t, s, []Window{w}, ev{"0:t", 0, "e0", 1}, ev{"0:t", 1, "e1", 1}); !got[1].First {
		t.Fatalf("%+v, want the second event to cross", got)
	}
	waitGone(t, rdb, w.Key)
	got := count(t, s, []Window{w}, ev{"0:t", 2, "e2", 1}, ev{"0:t", 3, "e3", 1})
	if got[0].Current != 1 || !got[1].First {
		t.Fatalf("after the window: %+v, want a new window that crosses again", got)
	}
}

func waitGone(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(t.Context(), key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("window never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kafka redelivers a partition from its committed offset after a crash or
// a rebalance: everything at or below the last counted offset is known.
func TestRedeliveriesCountOnce(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 3)
	run := []ev{{"0:t", 10, "a", 1}, {"0:t", 11, "b", 1}, {"0:t", 12, "c", 1}, {"0:t", 13, "d", 1}}
	first := count(t, s, []Window{w}, run...)
	for range 3 {
		again := count(t, s, []Window{w}, run...)
		for i := range run {
			if again[i].First != first[i].First {
				t.Fatalf("redelivered %s: first %v, want %v as the first time", run[i].id, again[i].First, first[i].First)
			}
		}
		if !again[2].First || again[2].Current != 3 {
			t.Fatalf("the crossing event redelivered: %+v, want {3 true}", again[2])
		}
	}
	// A redelivery from the middle of the run, then new events.
	got := count(t, s, []Window{w}, ev{"0:t", 12, "c", 1}, ev{"0:t", 13, "d", 1}, ev{"0:t", 14, "e", 1})
	if !got[0].First || got[1].First || got[2].Current != 5 {
		t.Fatalf("%+v", got)
	}
	if v := value(t, rdb, w); v != 5 {
		t.Fatalf("counter = %d, want 5: each event once", v)
	}
	// Another partition's offsets are its own.
	if got := count(t, s, []Window{w}, ev{"1:t", 0, "x", 1}); got[0].Current != 6 {
		t.Fatalf("partition 1's offset 0 = %+v, want counted", got)
	}
}

// Offsets go to the script as they are, up to the 15 digits it takes: a
// partition far into its life skips what it counted by offset alone.
func TestLargeOffsetsCountOnce(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	for _, base := range []int64{250, 1 << 31, 1 << 40, 999_999_999_999_990} { // offsets have at most 15 digits
		t.Run(fmt.Sprint(base), func(t *testing.T) {
			w := testWindow(prefix, fmt.Sprint("w", base), time.Minute, 100)
			id := func(s string) string { return fmt.Sprint(base, s) } // new in each run
			count(t, s, []Window{w}, ev{"0:t", base, id("a"), 1}, ev{"0:t", base + 6, id("b"), 1})
			// Below and at the last offset counted: skipped, though the ids
			// are new; above it: counted.
			got := count(t, s, []Window{w}, ev{"0:t", base + 5, id("c"), 1}, ev{"0:t", base + 6, id("d"), 1}, ev{"0:t", base + 7, id("e"), 1})
			if got[2].Current != 3 {
				t.Fatalf("%+v, want offsets %d and %d skipped and %d counted", got, base+5, base+6, base+7)
			}
			if v := value(t, rdb, w); v != 3 {
				t.Fatalf("counter = %d, want 3", v)
			}
		})
	}
}

// The scripts know an event by its offset alone: a second record of it at
// a later offset (a producer's retry) is the consumer's to drop before any
// script (consumer's retries), so here it counts, in either script.
func TestScriptsKnowEventsByOffset(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 100)
	count(t, s, []Window{w}, ev{"0:t", 1, "a", 1}, ev{"0:t", 2, "b", 1}, ev{"0:t", 3, "a", 1})
	if v := value(t, rdb, w); v != 3 {
		t.Fatalf("counter = %d, want 3", v)
	}
	refund(t, s, []Window{w}, ev{"1:t", 1, "r", 1}, ev{"1:t", 2, "r", 1})
	if v := value(t, rdb, w); v != 1 {
		t.Fatalf("after refunds counter = %d, want 1", v)
	}
}

// A crossing event redelivered after its window ended still hands its
// alert off, and does not count into the new window, whether that window
// is empty or was opened by events of other partitions. The bucket's
// offsets live as long as the marks.
func TestACrossingIsRememberedPastItsWindow(t *testing.T) {
	t.Parallel() // a second waiting for the window to end
	s, rdb, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Second, 2)
	count(t, s, []Window{w}, ev{"0:t", 0, "a", 1}, ev{"0:t", 1, "b", 1})
	waitGone(t, rdb, w.Key)
	if got := count(t, s, []Window{w}, ev{"0:t", 1, "b", 1})[0]; got != (Counted{Current: 2, First: true}) {
		t.Fatalf("b after its window: %+v, want its crossing", got)
	}
	if rdb.Exists(t.Context(), w.Key).Val() != 0 {
		t.Fatal("the redelivered crossing event opened a new window")
	}
	count(t, s, []Window{w}, ev{"3:t", 0, "z", 1}) // another partition opens a window
	if got := count(t, s, []Window{w}, ev{"0:t", 1, "b", 1})[0]; !got.First {
		t.Fatalf("b in another partition's window: %+v, want its crossing", got)
	}
	if v := value(t, rdb, w); v != 1 {
		t.Fatalf("counter = %d, want 1", v)
	}
	for _, key := range []string{w.Marks, offsetsOf(w)} {
		if ttl := rdb.TTL(t.Context(), key).Val(); ttl < 6*24*time.Hour {
			t.Fatalf("%s lives %v, want the retention", key, ttl)
		}
	}
}

func TestRefunds(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "amount", time.Minute, 1_000_000_000)
	if got := refund(t, s, []Window{w}, ev{"0:r", 0, "r0", 100})[0]; got != (Refunded{}) {
		t.Fatalf("refund without a window = %+v, want {0 false}", got)
	}
	if rdb.Exists(ctx, w.Key).Val() != 0 {
		t.Fatal("a refund without a window wrote one")
	}
	count(t, s, []Window{w}, ev{"0:o", 0, "o0", 1000})
	rdb.Expire(ctx, w.Key, 20*time.Second)
	got := refund(t, s, []Window{w}, ev{"0:r", 1, "r1", 300}, ev{"0:r", 2, "r2", 900}, ev{"0:r", 3, "r3", 5})
	want := []Refunded{{Remaining: 700}, {Remaining: 0, Clamped: true}, {}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("refund %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl <= 0 || ttl > 20*time.Second {
		t.Fatalf("TTL = %v, want the window's end kept", ttl)
	}
	// Redelivered: subtracted once.
	count(t, s, []Window{w}, ev{"0:o", 1, "o1", 1000})
	refund(t, s, []Window{w}, ev{"0:r", 4, "r4", 100})
	refund(t, s, []Window{w}, ev{"0:r", 4, "r4", 100})
	if v := value(t, rdb, w); v != 900 {
		t.Fatalf("window = %d, want 900: the refund subtracted once", v)
	}
	// A run, redelivered: known by its offsets.
	var run []ev
	for i := range 20 {
		run = append(run, ev{"0:r", int64(10 + i), fmt.Sprint("run", i), 1})
	}
	refund(t, s, []Window{w}, run...)
	refund(t, s, []Window{w}, run...)
	if v := value(t, rdb, w); v != 880 {
		t.Fatalf("window = %d, want 880: each of the run subtracted once", v)
	}
}

func TestNumbersStayExact(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "w", time.Minute, 1<<53-1)
	// Past 2^53 doubles round; Redis's int64 arithmetic does not.
	count(t, s, []Window{w}, ev{"0:t", 0, "a", 1 << 53}, ev{"0:t", 1, "b", 1})
	if v := rdb.Get(ctx, w.Key).Val(); v != "9007199254740993" {
		t.Fatalf("counter = %s, want 9007199254740993", v)
	}
	refund(t, s, []Window{w}, ev{"0:r", 0, "r", 2})
	if v := rdb.Get(ctx, w.Key).Val(); v != "9007199254740991" {
		t.Fatalf("after a refund of 2: %s", v)
	}
	// One call that crosses 2^53 between its changes.
	w2 := testWindow(prefix, "w2", time.Minute, 1<<53-1)
	rdb.Set(ctx, w2.Key, "9007199254740982", 0) // 2^53 - 10
	count(t, s, []Window{w2}, ev{"0:t", 2, "a2", 5}, ev{"0:t", 3, "b2", 10}, ev{"0:t", 4, "c2", 1})
	if v := rdb.Get(ctx, w2.Key).Val(); v != "9007199254740998" {
		t.Fatalf("counter = %s, want 9007199254740998", v)
	}
	rdb.Set(ctx, w2.Key, "9007199254740993", 0)
	refund(t, s, []Window{w2}, ev{"0:r", 1, "r1", 1}, ev{"0:r", 2, "r2", 3})
	if v := rdb.Get(ctx, w2.Key).Val(); v != "9007199254740989" {
		t.Fatalf("after refunds across 2^53: %s, want 9007199254740989", v)
	}
	// The crossing is decided exactly past 2^53 too: 2^53 - 1 is crossed
	// by the increment that leaves the counter at 2^53 + 1, and not by the
	// next one.
	w3, d := testWindow(prefix, "w3", time.Minute, 1<<53-1), IDOf("d")
	rdb.Set(ctx, w3.Key, "9007199254740990", 0) // 2^53 - 2
	got := count(t, s, []Window{w3}, ev{"0:t", 5, "d", 3}, ev{"0:t", 6, "e", 1})
	if !got[0].First || got[1].First {
		t.Fatalf("%+v, want the first change to cross", got)
	}
	if m := rdb.HGet(ctx, w3.Marks, string(d[:])).Val(); m != "9007199254740993" {
		t.Fatalf("crossing mark = %q, want the exact counter", m)
	}
	// A counter already at the threshold, 2^53 - 1, is not crossed by an
	// increment of 2: in doubles 2^53 + 1 is 2^53, and 2^53 - 2 would be
	// taken for the counter before.
	rdb.Set(ctx, w3.Key, "9007199254740991", 0)
	if got := count(t, s, []Window{w3}, ev{"0:t", 8, "g", 2}); got[0].First {
		t.Fatalf("%+v: crossed from the threshold itself", got)
	}
	// A counter that would pass 2^62 stays there instead of failing.
	rdb.Set(ctx, w.Key, "4611686018427387900", 0)
	got = count(t, s, []Window{w}, ev{"0:t", 9, "f", 999_999_999_999_999_999})
	if got[0].Err != nil || got[0].Current != 1<<62 {
		t.Fatalf("%+v, want saturation at 2^62", got)
	}
}

func TestUnusableArgumentsWriteNothing(t *testing.T) {
	_, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "w", time.Minute, 10)
	o := offsetsOf(w)
	args := func(change ...any) []any {
		return append([]any{"0:t", 3600, 1, 60, 10}, change...)
	}
	for n, tc := range []struct {
		name string
		args []any
	}{
		{"window index 0", args(0, 5, "12345678", 1)},
		{"window index too large", args(2, 5, "12345678", 1)},
		{"offset negative", args(1, -5, "12345678", 1)},
		{"offset with a leading zero", args(1, "05", "12345678", 1)},
		{"offset 16 digits", args(1, "1000000000000000", "12345678", 1)},
		{"short id", args(1, 5, "1234567", 1)},
		{"increment 0", args(1, 5, "12345678", 0)},
		{"increment a fraction", args(1, 5, "12345678", "1.5")},
		{"increment 19 digits", args(1, 5, "12345678", "1000000000000000000")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bad change is refused, the good one after it counts.
			all := append(tc.args, 1, 10+n, fmt.Sprintf("good%04d", n), 1)
			got, err := incrAndCheck.Run(ctx, rdb, []string{o, w.Key, w.Marks}, all...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 4 || got[0] != -1 || got[1] != -1 || got[2] != int64(n+1) {
				t.Fatalf("reply %v, want {-1 -1} then a count", got)
			}
		})
	}
	// A window with an unusable length or threshold refuses its changes;
	// another window of the call still counts. So does a window whose key
	// holds no counter (another type, not an integer, about to overflow).
	w2 := testWindow(prefix, "w2", time.Minute, 10)
	for n, bad := range [][]any{{0, 10}, {60, -10}, {60, "1e3"}} {
		got, err := incrAndCheck.Run(ctx, rdb, []string{o, w2.Key, w2.Marks, w.Key, w.Marks},
			"0:t", 3600, 2, bad[0], bad[1], 60, 10, 1, 20+n, fmt.Sprintf("bad%05d", n), 1, 2, 20+n, fmt.Sprintf("bad%05d", n), 1).Int64Slice()
		if err != nil || len(got) != 4 || got[0] != -1 || got[1] != -1 || got[2] < 1 {
			t.Fatalf("window %v: reply %v, %v; want {-1 -1} then a count", bad, got, err)
		}
	}
	if rdb.Exists(ctx, w2.Key, w2.Marks).Val() != 0 {
		t.Fatal("a refused window was written")
	}
	for n, held := range []func() error{
		func() error { return rdb.HSet(ctx, w2.Key, "v", 1).Err() },
		func() error { return rdb.Set(ctx, w2.Key, "ten", 0).Err() },
		func() error { return rdb.Set(ctx, w2.Key, "9223372036854775807", 0).Err() },
	} {
		rdb.Del(ctx, w2.Key)
		if err := held(); err != nil {
			t.Fatal(err)
		}
		before := rdb.Dump(ctx, w2.Key).Val()
		got, err := incrAndCheck.Run(ctx, rdb, []string{o, w2.Key, w2.Marks, w.Key, w.Marks},
			"0:t", 3600, 2, 60, 10, 60, 10, 1, 30+n, fmt.Sprintf("held%04d", n), 1, 2, 30+n, fmt.Sprintf("held%04d", n), 1).Int64Slice()
		if err != nil || len(got) != 4 || got[0] != -1 || got[1] != -1 || got[2] < 1 {
			t.Fatalf("held %d: reply %v, %v; want {-1 -1} then a count", n, got, err)
		}
		if rdb.Dump(ctx, w2.Key).Val() != before {
			t.Fatalf("held %d: the window was written", n)
		}
	}
	rdb.Del(ctx, o, w.Key, w.Marks)
	goodChange := []any{1, 5, "12345678", 1}
	for _, tc := range []struct {
		name string
		keys []string
		args []any
	}{
		{"no source", []string{o, w.Key, w.Marks}, append([]any{"", 3600, 1, 60, 10}, goodChange...)},
		{"lifetime 0", []string{o, w.Key, w.Marks}, append([]any{"0:t", 0, 1, 60, 10}, goodChange...)},
		{"keys not two a window and the offsets", []string{w.Key, w.Marks}, append([]any{"0:t", 3600, 1, 60, 10}, goodChange...)},
		{"no changes", []string{o, w.Key, w.Marks}, []any{"0:t", 3600, 1, 60, 10}},
		{"half a change", []string{o, w.Key, w.Marks}, append([]any{"0:t", 3600, 1, 60, 10}, 1, 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := incrAndCheck.Run(ctx, rdb, tc.keys, tc.args...).Int64Slice()
			if err != nil || len(got) != 2 || got[0] != -1 || got[1] != -1 {
				t.Fatalf("reply %v, %v; want {-1 -1}", got, err)
			}
			if rdb.Exists(ctx, o, w.Key, w.Marks).Val() != 0 {
				t.Fatal("a refused call wrote")
			}
			if len(tc.keys) != 3 {
				return // sales_decr would take these keys as the offsets and a window
			}
			// sales_decr takes the source, the offsets' lifetime and the
			// changes.
			got, err = salesDecr.Run(ctx, rdb, tc.keys[:2], append([]any{tc.args[0], tc.args[1]}, tc.args[5:]...)...).Int64Slice()
			if err != nil || len(got) != 2 || got[0] != -1 || got[1] != -1 {
				t.Fatalf("sales_decr reply %v, %v; want {-1 -1}", got, err)
			}
			if rdb.Exists(ctx, o, w.Key, w.Marks).Val() != 0 {
				t.Fatal("a refused sales_decr call wrote")
			}
		})
	}
}

// A change refused by the script is the change's error, not the batch's,
// and counts in the errors metric.
func TestRefusedChangesAreReportedAndCounted(t *testing.T) {
	s, _, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 10)
	c := &Count{Source: "0:t", Offsets: offsetsOf(w), Windows: []Window{w}, Changes: []Change{
		{Window: 0, Offset: -1, ID: IDOf("a"), Amount: 1}, {Window: 0, Offset: 1, ID: IDOf("b"), Amount: 1},
	}}
	b := s.Batch()
	if err := b.Count(c); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.Results[0].Err != ErrInvalidArguments || c.Results[1].Err != nil || c.Results[1].Current != 1 {
		t.Fatalf("results %+v", c.Results)
	}
	if n := testutil.ToFloat64(s.errors.WithLabelValues(IncrAndCheckName)); n != 1 {
		t.Fatalf("script errors = %v, want 1", n)
	}
}

// A window holds its counter alone, and the bucket's offsets one field per
// partition with its last offset, however many events they count.
func TestMemoryOfAWindowIsBounded(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 1_000_000)
	for p := range 3 {
		var evs []ev
		for i := range 200 {
			evs = append(evs, ev{fmt.Sprintf("%d:t", p), int64(i), fmt.Sprint(p, "-", i), 1})
		}
		count(t, s, []Window{w}, evs...)
	}
	if v := rdb.Get(t.Context(), w.Key).Val(); v != "600" {
		t.Fatalf("window = %q, want the counter 600", v)
	}
	fields := rdb.HGetAll(t.Context(), offsetsOf(w)).Val()
	if len(fields) != 3 {
		t.Fatalf("offsets hold %d fields, want one per partition", len(fields))
	}
	for f, v := range fields {
		if v != "199" {
			t.Fatalf("field %s holds %q: want the last offset", f, v)
		}
	}
}

func TestScriptFlushIsSurvived(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w, amount := testWindow(prefix, "w", time.Minute, 250), testWindow(prefix, "amount", time.Minute, 1_000_000)
	for i := range 4 {
		// Other packages' tests share this server; their calls load the
		// scripts again the same way.
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// An event's windows of one bucket go in one call: the bucket
		// remembers the offsets it applied.
		got := count(t, s, []Window{w, amount}, ev{"0:o", int64(i), fmt.Sprint("o", i), 100})[0]
		if want := int64(100 * (i + 1)); got.Current != want || got.First != (i == 2) {
			t.Fatalf("count after flush %d: %+v", i, got)
		}
		rdb.ScriptFlush(ctx)
		refund(t, s, []Window{amount}, ev{"0:r", int64(i), fmt.Sprint("r", i), 50})
		rdb.ScriptFlush(ctx)
		if _, err := s.ClaimAlert(ctx, prefix+":{t}:cd", prefix+fmt.Sprint(":{t}:rec", i), fmt.Sprint("a", i), 0); err != nil {
			t.Fatalf("claim after flush %d: %v", i, err)
		}
		rdb.ScriptFlush(ctx)
		if err := s.SettleAlert(ctx, prefix+":{t}:cd", prefix+fmt.Sprint(":{t}:rec", i), fmt.Sprint("a", i), true); err != nil {
			t.Fatalf("settle after flush %d: %v", i, err)
		}
	}
	if v := value(t, rdb, amount); v != 200 {
		t.Fatalf("amount = %d, want 200", v)
	}
}

// Calls of one hash tag go in later pipelines, in the order they were
// added; others share one.
func TestBatchRounds(t *testing.T) {
	s, _, prefix := newScripts(t)
	a1, a2 := testWindow(prefix+":{a}", "1", time.Minute, 10), testWindow(prefix+":{a}", "2", time.Minute, 10)
	b := testWindow(prefix+":{b}", "1", time.Minute, 10)
	batch := s.Batch()
	one := func(offset int64) []Change {
		return []Change{{Offset: offset, ID: IDOf(fmt.Sprint(offset)), Amount: 1}}
	}
	calls := []*Count{
		{Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1}, Changes: one(1)},
		{Source: "0:t", Offsets: offsetsOf(b), Windows: []Window{b}, Changes: one(1)},
		{Source: "0:t", Offsets: offsetsOf(a2), Windows: []Window{a2}, Changes: one(2)},
		{Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1}, Changes: one(3)},
	}
	for _, c := range calls {
		if err := batch.Count(c); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	for _, round := range batch.rounds() {
		got = append(got, len(round))
	}
	if fmt.Sprint(got) != "[2 1 1]" {
		t.Fatalf("rounds of %v calls, want [2 1 1]", got)
	}
	if err := batch.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := calls[3].Results[0]; r.Current != 2 {
		t.Fatalf("the last call saw %+v, want the window after the first call", r)
	}
	// A call's keys must share one tag.
	mixed := &Count{Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1, b}, Changes: one(4)}
	if err := s.Batch().Count(mixed); err == nil {
		t.Fatal("Count accepted keys of two hash tags")
	}
	if !strings.Contains(prefix, "{") {
		// On a cluster the test's prefix holds the tag of every key.
		other := &Count{Source: "0:t", Offsets: offsetsOf(b), Windows: []Window{a1}, Changes: one(4)}
		if err := s.Batch().Count(other); err == nil {
			t.Fatal("Count accepted offsets of another hash tag")
		}
	}
}

// An error Redis answers fails the call whole (the batch is retried) and
// counts in the errors metric. Here Redis is full (maxmemory 1 byte, no
// eviction), which refuses a script's first write with OOM: a crossing's
// mark (slide_and_check's first write) must not take that for marks of
// another type and delete the window's marks to write it, nor alert_budget
// its buckets.
func TestRedisErrorsAreCounted(t *testing.T) {
	rdb := redistest.Connect(t, redistest.Start(t).Addr)
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, prefix := t.Context(), redistest.Prefix(t)
	fixed, sliding := testWindow(prefix, "f", time.Minute, 1), slidingWindow(prefix, "s", time.Minute, 0, 1)
	values := distinctWindow(prefix, "d", false, time.Minute, 0, 1)
	// Before Redis is full: a crossing, whose window then ends; its mark
	// stays. A message from the budgets.
	slide(t, s, []Window{sliding}, sev{src: "0:t", offset: 1, id: "a", amount: 1})
	rdb.Del(ctx, sliding.Key)
	budget, all, rate := prefix+":{b}:c", prefix+":{b}:all", Budget{Rate: 1, Burst: 5}
	if ok, _, err := s.TakeBudget(ctx, budget, all, rate, rate); err != nil || !ok {
		t.Fatalf("budget: %v, %v", ok, err)
	}
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		script string
		call   func() error
	}{
		{IncrAndCheckName, func() error {
			_, err := tryCount(ctx, s, []Window{fixed}, ev{"0:t", 2, "b", 1})
			return err
		}},
		{SalesDecrName, func() error {
			b := s.Batch()
			r := &Refund{Source: "0:r", Offsets: offsetsOf(fixed), Windows: []Window{fixed},
				Changes: []Change{{Offset: 2, ID: IDOf("b"), Amount: 1}}}
			if err := b.Refund(r); err != nil {
				t.Fatal(err)
			}
			return b.Exec(ctx)
		}},
		{SlideAndCheckName, func() error {
			_, err := trySlide(ctx, s, []Window{sliding}, sev{src: "0:t", offset: 2, id: "b", amount: 1})
			return err
		}},
		{DistinctAndCheckName, func() error {
			_, err := tryDistinct(ctx, s, []Window{values}, sev{src: "0:t", offset: 2, id: "b", value: "v"})
			return err
		}},
		{AlertBudgetName, func() error {
			_, _, err := s.TakeBudget(ctx, budget, all, rate, rate)
			return err
		}},
	} {
		err := tc.call()
		if _, ok := errors.AsType[redis.Error](err); !ok || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("%s on a full Redis: %v, want Redis's OOM error", tc.script, err)
		}
		if n := testutil.ToFloat64(s.errors.WithLabelValues(tc.script)); n != 1 {
			t.Fatalf("%s: script errors = %v, want 1", tc.script, n)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	id := IDOf("a")
	if !rdb.HExists(ctx, sliding.Marks, string(id[:])).Val() {
		t.Fatal("the window's marks lost their crossing")
	}
	if got := rdb.HGet(ctx, budget, "t").Val(); got != "4" {
		t.Fatalf("the budget holds %q tokens, want the 4 left before Redis was full", got)
	}
}

func TestCallsAreCheckedBeforeTheyAreSent(t *testing.T) {
	s, _, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 3)
	one := []Change{{Offset: 1, ID: IDOf("a"), Amount: 1}}
	o := offsetsOf(w)
	for _, c := range []*Count{
		{Source: "", Offsets: o, Windows: []Window{w}, Changes: one},
		{Source: strings.Repeat("s", 33), Offsets: o, Windows: []Window{w}, Changes: one},
		{Source: "0:t", Offsets: o, Changes: one},
		{Source: "0:t", Offsets: o, Windows: []Window{w}},
		{Source: "0:t", Offsets: o, Windows: []Window{w}, Changes: make([]Change, MaxChanges+1)},
		{Source: "0:t", Windows: []Window{w}, Changes: one},
	} {
		if err := s.Batch().Count(c); err == nil {
			t.Errorf("Count accepted %+v", c)
		}
	}
}

func TestSource(t *testing.T) {
	a, b := Source("orders", 3), Source("refunds", 3)
	if a == b || a != Source("orders", 3) || Source("orders", 4) == a {
		t.Fatalf("sources %q %q: want stable, and apart by topic and partition", a, b)
	}
	if len(Source("a-very-long-topic-name.with.dots", 2147483647)) > 32 {
		t.Fatal("a source is longer than the script takes")
	}
}

func TestRetentionIsTheLifetimeOfMarksAndRecords(t *testing.T) {
	rdb := redistest.Client(t)
	const retention = 2 * time.Hour
	s, err := New(Config{Retention: retention}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if s.Retention() != retention {
		t.Fatalf("Retention() = %v, want %v", s.Retention(), retention)
	}
	ctx := t.Context()
	prefix := redistest.Prefix(t)
	w := testWindow(prefix, "w", time.Minute, 1)
	if got := count(t, s, []Window{w}, ev{"0:t", 0, "e1", 1}); !got[0].First {
		t.Fatalf("count = %+v; want the first crossing", got)
	}
	record := prefix + ":{t}:alert:e1"
	if _, err := s.ClaimAlert(ctx, prefix+":{t}:cooldown", record, "r/e1", time.Minute); err != nil {
		t.Fatal(err)
	}
	claimed := rdb.TTL(ctx, record).Val()
	if err := s.SettleAlert(ctx, prefix+":{t}:cooldown", record, "r/e1", true); err != nil {
		t.Fatal(err)
	}
	for key, ttl := range map[string]time.Duration{
		"crossing marks":          rdb.TTL(ctx, w.Marks).Val(),
		"the bucket's offsets":    rdb.TTL(ctx, offsetsOf(w)).Val(),
		"claimed delivery record": claimed,
		"settled delivery record": rdb.TTL(ctx, record).Val(),
	} {
		if ttl <= retention-time.Minute || ttl > retention {
			t.Errorf("%s TTL = %v, want the retention %v", key, ttl, retention)
		}
	}
}

// reloading is a client that counts the times it is asked to read its
// map of slots again.
type reloading struct {
	*redis.Client
	reloads int
}

func (r *reloading) ReloadState(context.Context) { r.reloads++ }

// A call that gets no answer makes a cluster client read its slot map
// again, so that the retry finds a master that took over; an error
// Redis answered does not.
func TestNoAnswerReloadsTheClusterState(t *testing.T) {
	prefix := redistest.Prefix(t)
	// A Redis that answers with an error: out of memory (maxmemory 1 byte,
	// no eviction), it refuses the claim's write.
	full := redistest.Connect(t, redistest.Start(t).Addr)
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := full.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	dead := redistest.Connect(t, "127.0.0.1:1")
	tests := []struct {
		name        string
		client      *redis.Client
		wantReloads int
	}{
		{"no answer", dead, 1},
		{"an answer", full, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := &reloading{Client: tt.client}
			s, err := New(Config{}, rdb, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ClaimAlert(t.Context(), prefix+":{t}:cd", prefix+":{t}:rec", "a", time.Minute); err == nil {
				t.Fatal("the claim succeeded; want it to fail")
			}
			if rdb.reloads != tt.wantReloads {
				t.Errorf("reloads = %d, want %d", rdb.reloads, tt.wantReloads)
			}
		})
	}
}

// The bucket's offsets outlive every window and mark of the bucket: a call
// that gives a window or a mark its lifetime gives them theirs, and one
// that only adds to running windows leaves it.
func TestOffsetsOutliveWindowsAndMarks(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "w", time.Minute, 3)
	o := offsetsOf(w)
	count(t, s, []Window{w}, ev{"0:t", 0, "a", 1})
	// As if the offsets were written long ago.
	rdb.Expire(ctx, o, time.Hour)
	count(t, s, []Window{w}, ev{"0:t", 1, "b", 1})
	if ttl := rdb.TTL(ctx, o).Val(); ttl > time.Hour {
		t.Fatalf("offsets TTL = %v after adding to a running window, want it left", ttl)
	}
	count(t, s, []Window{w}, ev{"0:t", 2, "c", 1}) // crosses
	if ttl := rdb.TTL(ctx, o).Val(); ttl < rdb.TTL(ctx, w.Marks).Val() {
		t.Fatalf("offsets TTL = %v after a crossing, want at least the mark's", ttl)
	}
	rdb.Expire(ctx, o, time.Hour)
	w2 := testWindow(prefix, "w2", 2*7*24*time.Hour, 3) // longer than the marks
	count(t, s, []Window{w2}, ev{"0:t", 3, "d", 1})
	if ttl := rdb.TTL(ctx, o).Val(); ttl < rdb.TTL(ctx, w2.Key).Val() {
		t.Fatalf("offsets TTL = %v after a new window, want at least its length", ttl)
	}
}

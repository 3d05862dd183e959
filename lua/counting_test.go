package lua

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

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
	c := &Call{Kind: Count, Source: "0:t", Offsets: offsetsOf(ws[0]), Windows: ws, Changes: []Change{
		{Window: 0, Offset: 1, ID: IDOf("a"), Amount: 1}, {Window: 1, Offset: 1, ID: IDOf("a"), Amount: 600},
		{Window: 0, Offset: 2, ID: IDOf("b"), Amount: 1}, {Window: 1, Offset: 2, ID: IDOf("b"), Amount: 600},
	}}
	b := s.Batch()
	if err := b.Add(c); err != nil {
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

func TestRefunds(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "amount", time.Minute, 1_000_000_000)
	if got := refund(t, s, []Window{w}, ev{"0:r", 0, "r0", 100})[0]; got != (Counted{}) {
		t.Fatalf("refund without a window = %+v, want {0 false}", got)
	}
	if rdb.Exists(ctx, w.Key).Val() != 0 {
		t.Fatal("a refund without a window wrote one")
	}
	count(t, s, []Window{w}, ev{"0:o", 0, "o0", 1000})
	rdb.Expire(ctx, w.Key, 20*time.Second)
	got := refund(t, s, []Window{w}, ev{"0:r", 1, "r1", 300}, ev{"0:r", 2, "r2", 900}, ev{"0:r", 3, "r3", 5})
	want := []Counted{{Current: 700}, {Current: 0, Clamped: true}, {}}
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

// Both layouts of a fixed window: a string, and a hash when its rule
// keeps evidence.
func TestNumbersStayExact(t *testing.T) {
	for _, keep := range []int{0, 5} {
		t.Run(fmt.Sprintf("keep %d", keep), func(t *testing.T) { numbersStayExact(t, keep) })
	}
}

func numbersStayExact(t *testing.T, keep int) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	window := func(name string) Window {
		w := testWindow(prefix, name, time.Minute, 1<<53-1)
		if keep > 0 {
			w.Keep, w.From = keep, w.Threshold-int64(keep)+1
		}
		return w
	}
	w := window("w")
	// Past 2^53 doubles round; Redis's int64 arithmetic does not. The
	// scripts take amounts below 2^53 (packed, they are doubles): the Go
	// side refuses the call of a larger one.
	if _, err := tryCount(ctx, s, []Window{w}, ev{"0:t", 0, "a", 1 << 53}); err == nil || !strings.Contains(err.Error(), "2^53") {
		t.Fatalf("an increment of 2^53: %v, want refused", err)
	}
	setCount(t, rdb, w, "9007199254740991", time.Minute) // 2^53 - 1
	count(t, s, []Window{w}, ev{"0:t", 0, "a", 1}, ev{"0:t", 1, "b", 1})
	if v := countOf(t, rdb, w.Key); v != "9007199254740993" {
		t.Fatalf("counter = %s, want 9007199254740993", v)
	}
	refund(t, s, []Window{w}, ev{"0:r", 0, "r", 2})
	if v := countOf(t, rdb, w.Key); v != "9007199254740991" {
		t.Fatalf("after a refund of 2: %s", v)
	}
	// One call that crosses 2^53 between its changes.
	w2 := window("w2")
	setCount(t, rdb, w2, "9007199254740982", time.Minute) // 2^53 - 10
	count(t, s, []Window{w2}, ev{"0:t", 2, "a2", 5}, ev{"0:t", 3, "b2", 10}, ev{"0:t", 4, "c2", 1})
	if v := countOf(t, rdb, w2.Key); v != "9007199254740998" {
		t.Fatalf("counter = %s, want 9007199254740998", v)
	}
	setCount(t, rdb, w2, "9007199254740993", time.Minute)
	refund(t, s, []Window{w2}, ev{"0:r", 1, "r1", 1}, ev{"0:r", 2, "r2", 3})
	if v := countOf(t, rdb, w2.Key); v != "9007199254740989" {
		t.Fatalf("after refunds across 2^53: %s, want 9007199254740989", v)
	}
	// The crossing is decided exactly past 2^53 too: 2^53 - 1 is crossed
	// by the increment that leaves the counter at 2^53 + 1, and not by the
	// next one.
	w3, d := window("w3"), IDOf("d")
	setCount(t, rdb, w3, "9007199254740990", time.Minute) // 2^53 - 2
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
	setCount(t, rdb, w3, "9007199254740991", time.Minute)
	if got := count(t, s, []Window{w3}, ev{"0:t", 8, "g", 2}); got[0].First {
		t.Fatalf("%+v: crossed from the threshold itself", got)
	}
	// A counter that would pass 2^62 stays there instead of failing.
	setCount(t, rdb, w, "4611686018427387900", time.Minute)
	got = count(t, s, []Window{w}, ev{"0:t", 9, "f", 1<<53 - 1})
	if got[0].Err != nil || got[0].Current != 1<<62 {
		t.Fatalf("%+v, want saturation at 2^62", got)
	}

	if got := countOf(t, rdb, w.Key); got != "4611686018427387904" {
		t.Fatalf("counter = %s, want 2^62", got)
	}
	if typ := rdb.Type(ctx, w.Key).Val(); typ != map[bool]string{false: "string", true: "hash"}[keep > 0] {
		t.Fatalf("the window is a %s with keep %d", typ, keep)
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
	if v := countOf(t, rdb, w.Key); v != "600" {
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
	calls := []*Call{
		{Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1}, Changes: one(1)},
		{Source: "0:t", Offsets: offsetsOf(b), Windows: []Window{b}, Changes: one(1)},
		{Source: "0:t", Offsets: offsetsOf(a2), Windows: []Window{a2}, Changes: one(2)},
		{Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1}, Changes: one(3)},
	}
	for _, c := range calls {
		if err := batch.Add(c); err != nil {
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
	mixed := &Call{Kind: Count, Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1, b}, Changes: one(4)}
	if err := s.Batch().Add(mixed); err == nil {
		t.Fatal("Count accepted keys of two hash tags")
	}
	if !strings.Contains(prefix, "{") {
		// On a cluster the test's prefix holds the tag of every key.
		other := &Call{Kind: Count, Source: "0:t", Offsets: offsetsOf(b), Windows: []Window{a1}, Changes: one(4)}
		if err := s.Batch().Add(other); err == nil {
			t.Fatal("Count accepted offsets of another hash tag")
		}
	}
}

// A batch Reset runs the calls added after it only, however many rounds
// the calls before it took, and holds nothing of those.
func TestBatchReset(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	a1, a2 := testWindow(prefix+":{a}", "1", time.Minute, 10), testWindow(prefix+":{a}", "2", time.Minute, 10)
	b := testWindow(prefix+":{b}", "1", time.Minute, 10)
	one := func(offset int64) []Change {
		return []Change{{Offset: offset, ID: IDOf(fmt.Sprint(offset)), Amount: 1}}
	}
	batch := s.Batch()
	run := func(calls ...*Call) {
		t.Helper()
		for _, c := range calls {
			if err := batch.Add(c); err != nil {
				t.Fatal(err)
			}
		}
		var rounds []int
		for _, round := range batch.rounds() {
			rounds = append(rounds, len(round))
		}
		if want := slices.Repeat([]int{1}, len(calls)); !slices.Equal(rounds, want) {
			t.Fatalf("rounds of %v calls, want %v", rounds, want)
		}
		if err := batch.Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Three rounds, then one: the second Exec must not run the first's.
	run(&Call{Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1}, Changes: one(1)},
		&Call{Source: "0:t", Offsets: offsetsOf(a2), Windows: []Window{a2}, Changes: one(2)},
		&Call{Source: "0:t", Offsets: offsetsOf(a1), Windows: []Window{a1}, Changes: one(3)})
	batch.Reset()
	for _, c := range [][]any{batch.args.s[:cap(batch.args.s)]} {
		for i, a := range c {
			if a != nil {
				t.Fatalf("after Reset, argument %d is still %v", i, a)
			}
		}
	}
	last := &Call{Source: "0:t", Offsets: offsetsOf(b), Windows: []Window{b}, Changes: one(1)}
	run(last)
	if batch.Len() != 1 || last.Results[0] != (Counted{Current: 1}) {
		t.Fatalf("after Reset: %d calls, %+v; want 1 call, current 1", batch.Len(), last.Results)
	}
	if v := value(t, rdb, a1); v != 2 {
		t.Fatalf("window a1 = %d after the second Exec, want 2: the first batch's calls ran again", v)
	}
}

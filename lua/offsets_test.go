package lua

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// The four counting scripts share a bucket's offsets, and each call gives
// them its own life: the retention, or its longest window if longer. A call
// whose windows are short must not cut the TTL a longer window's call gave
// them, or the offsets would go while that window still lives, and a
// redelivery after that would count in it twice.
func TestOffsetsLifeIsNeverShortened(t *testing.T) {
	rdb := redistest.Client(t)
	s, err := New(Config{Retention: time.Hour}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	const long, short = 3 * time.Hour, time.Minute
	// Each counts one event (offset off) into a new window of the bucket of
	// prefix.
	type call func(t *testing.T, prefix string, off int64)
	fixed := func(length time.Duration) call {
		return func(t *testing.T, prefix string, off int64) {
			count(t, s, []Window{testWindow(prefix, fmt.Sprint("f", off), length, 100)}, ev{"0:t", off, "e", 1})
		}
	}
	refunded := func(length time.Duration) call {
		return func(t *testing.T, prefix string, off int64) {
			refund(t, s, []Window{testWindow(prefix, fmt.Sprint("r", off), length, 100)}, ev{"0:r", off, "e", 1})
		}
	}
	sliding := func(length time.Duration) call { // lives twice its length
		return func(t *testing.T, prefix string, off int64) {
			slide(t, s, []Window{slidingWindow(prefix, fmt.Sprint("s", off), length, 0, 100)},
				sev{src: "0:t", offset: off, id: "e", amount: 1})
		}
	}
	distinctOf := func(isSliding bool, length time.Duration) call {
		return func(t *testing.T, prefix string, off int64) {
			distinct(t, s, []Window{distinctWindow(prefix, fmt.Sprint("d", off), isSliding, length, 0, 100)},
				sev{src: "0:t", offset: off, id: "e", value: "v"})
		}
	}
	for i, tc := range []struct {
		name        string
		first, then call
	}{
		{"a long fixed window, then a short one", fixed(long), fixed(short)},
		{"a long sliding window, then a short fixed one", sliding(long), fixed(short)},
		{"a long fixed window, then a refund into a short one", fixed(long), refunded(short)},
		{"a long fixed window, then a short sliding one", fixed(long), sliding(short)},
		{"a long fixed distinct window, then a short sliding one", distinctOf(false, long), distinctOf(true, short)},
		{"a long sliding window, then a short distinct one", sliding(long), distinctOf(false, short)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fmt.Sprint(prefix, ":", i)
			offsets := offsetsOf(testWindow(p, "x", time.Minute, 1))
			tc.first(t, p, 1)
			if ttl := rdb.TTL(t.Context(), offsets).Val(); ttl <= long-time.Minute {
				t.Fatalf("after the long window's call the offsets' TTL is %v, want at least %v", ttl, long-time.Minute)
			}
			tc.then(t, p, 2)
			if ttl := rdb.TTL(t.Context(), offsets).Val(); ttl <= long-time.Minute {
				t.Fatalf("after the short window's call the offsets' TTL is %v, want the long window's %v kept", ttl, long)
			}
		})
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

func TestSource(t *testing.T) {
	a, b := Source("orders", 3), Source("refunds", 3)
	if a == b || a != Source("orders", 3) || Source("orders", 4) == a {
		t.Fatalf("sources %q %q: want stable, and apart by topic and partition", a, b)
	}
	if len(Source("a-very-long-topic-name.with.dots", 2147483647)) > 32 {
		t.Fatal("a source is longer than the script takes")
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

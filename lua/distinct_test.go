package lua

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func distinctWindow(prefix, name string, sliding bool, length, lateness time.Duration, threshold int64) Window {
	w := testWindow(prefix, name, length, threshold)
	w.Values = w.Key + ":values"
	w.Sliding, w.Lateness = sliding, lateness
	return w
}

func tryDistinct(ctx context.Context, s *Scripts, windows []Window, evs ...sev) ([]Counted, error) {
	c := &Call{Kind: Distinct, Source: evs[0].src, Offsets: offsetsOf(windows[0]), Windows: windows}
	for _, e := range evs {
		for w := range windows {
			c.Changes = append(c.Changes, changeOf(w, e))
		}
	}
	b := s.Batch()
	if err := b.Add(c); err != nil {
		return nil, err
	}
	return c.Results, b.Exec(ctx)
}

func distinct(t *testing.T, s *Scripts, windows []Window, evs ...sev) []Counted {
	t.Helper()
	res, err := tryDistinct(t.Context(), s, windows, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestDistinctValues(t *testing.T) {
	type step struct {
		at    float64
		value string
		count int64
		first bool
		late  bool
	}
	tests := []struct {
		name      string
		sliding   bool
		threshold int64
		steps     []step
	}{
		{"fixed: the third distinct card crosses once", false, 3, []step{
			{0, "card-a", 1, false, false}, {1, "card-a", 1, false, false}, {2, "card-b", 2, false, false},
			{3, "card-a", 2, false, false}, {4, "card-c", 3, true, false}, {5, "card-d", 4, false, false}}},
		{"fixed: event time does not end a fixed window", false, 2, []step{
			{0, "a", 1, false, false}, {5000, "b", 2, true, false}}},
		{"sliding: values leave the window", true, 3, []step{
			{0, "a", 1, false, false}, {30, "b", 2, false, false}, {61, "c", 2, false, false},
			{62, "a", 3, true, false}}},
		{"sliding: a value seen again stays in", true, 2, []step{
			{0, "a", 1, false, false}, {50, "a", 1, false, false}, {100, "b", 2, true, false}}},
		{"sliding: out of order joins the newest window", true, 3, []step{
			{30, "a", 1, false, false}, {10, "b", 2, false, false}, {20, "c", 3, true, false}}},
		{"sliding: late values are not counted", true, 2, []step{
			{200, "a", 1, false, false}, {10, "b", 1, false, true}, {201, "a", 1, false, false}}},
		{"sliding: falling below and rising again is a new crossing", true, 2, []step{
			{0, "a", 1, false, false}, {1, "b", 2, true, false}, {100, "c", 1, false, false}, {101, "d", 2, true, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, prefix := newScripts(t)
			w := distinctWindow(prefix, "w", tt.sliding, time.Minute, time.Minute, tt.threshold)
			w2 := distinctWindow(prefix, "w2", tt.sliding, time.Minute, time.Minute, tt.threshold)
			var all []sev
			for i, st := range tt.steps {
				e := sev{src: "0:t", offset: int64(i), id: fmt.Sprint("e", i), at: st.at, value: st.value}
				all = append(all, e)
				got := distinct(t, s, []Window{w}, e)[0]
				if got.Err != nil || got.Current != st.count || got.First != st.first || got.Late != st.late {
					t.Fatalf("step %d (%s at %vs): %+v, want count %d first %v late %v", i, st.value, st.at, got, st.count, st.first, st.late)
				}
			}
			// The same events in one call give the same answers (from
			// another partition: the bucket's offsets are w's too).
			for i := range all {
				all[i].src = "1:t"
			}
			for i, got := range distinct(t, s, []Window{w2}, all...) {
				st := tt.steps[i]
				if got.Current != st.count || got.First != st.first || got.Late != st.late {
					t.Fatalf("in one call, step %d: %+v", i, got)
				}
			}
		})
	}
}

// "3 distinct cards per customer in 1 h": 200 replicas race, each with one
// order and its own card; exactly one order crosses.
func TestDistinctFirstCrossUnderRace(t *testing.T) {
	for _, sliding := range []bool{false, true} {
		t.Run(fmt.Sprint("sliding=", sliding), func(t *testing.T) {
			s, _, prefix := newScripts(t)
			w := distinctWindow(prefix, "w", sliding, time.Hour, time.Minute, 3)
			firsts := firstCrossings(t, 200, func(r int) ([]Counted, error) {
				return tryDistinct(context.Background(), s, []Window{w},
					sev{src: fmt.Sprintf("%d:t", r), id: fmt.Sprint("e", r), at: float64(r % 7), value: fmt.Sprint("card-", r)})
			})
			if firsts != 1 {
				t.Fatalf("%d orders crossed first, want exactly 1", firsts)
			}
		})
	}
}

// A window keeps the threshold + 1 latest values, however many it sees.
func TestDistinctMemoryIsBounded(t *testing.T) {
	for _, sliding := range []bool{false, true} {
		t.Run(fmt.Sprint("sliding=", sliding), func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			w := distinctWindow(prefix, "w", sliding, time.Hour, time.Minute, 3)
			var evs []sev
			for i := range 10_000 {
				evs = append(evs, sev{src: "0:t", offset: int64(i), id: fmt.Sprint("e", i), at: float64(i) / 100, value: fmt.Sprint("v", i)})
			}
			firsts := 0
			for len(evs) > 0 {
				n := min(len(evs), Distinct.MaxChanges())
				for _, res := range distinct(t, s, []Window{w}, evs[:n]...) {
					if res.First {
						firsts++
					}
				}
				evs = evs[n:]
			}
			if firsts != 1 {
				t.Fatalf("%d crossings", firsts)
			}
			if n := rdb.ZCard(t.Context(), w.Values).Val(); n != 4 {
				t.Fatalf("%d values kept, want threshold + 1 = 4", n)
			}
			if n := rdb.HLen(t.Context(), w.Key).Val(); n != 1 {
				t.Fatalf("%d fields in the window's hash, want t alone", n)
			}
		})
	}
}

func TestDistinctRedeliveriesCountOnce(t *testing.T) {
	for _, sliding := range []bool{false, true} {
		t.Run(fmt.Sprint("sliding=", sliding), func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			w := distinctWindow(prefix, "w", sliding, time.Minute, time.Minute, 2)
			a := sev{src: "0:t", offset: 1, id: "a", at: 0, value: "x"}
			b := sev{src: "0:t", offset: 2, id: "b", at: 1, value: "y"}
			distinct(t, s, []Window{w}, a, b)
			got := distinct(t, s, []Window{w}, a, b)
			if got[0] != (Counted{Current: 2}) || got[1] != (Counted{Current: 2, First: true}) {
				t.Fatalf("redelivery: %+v", got)
			}
			// The window holds its newest time only: the offsets are the
			// bucket's, in a field of the script's own.
			if f := rdb.HKeys(ctx, w.Key).Val(); !slices.Equal(f, []string{"t"}) {
				t.Fatalf("window fields %v, want t alone", f)
			}
			if o := rdb.HGet(ctx, offsetsOf(w), "d:0:t").Val(); o != "2" {
				t.Fatalf("bucket's offset %q, want 2", o)
			}
			// Its window gone, a redelivered crossing still answers its mark
			// and opens no window: the bucket's offsets outlive the window.
			rdb.Del(ctx, w.Key, w.Values)
			if got := distinct(t, s, []Window{w}, b)[0]; got != (Counted{Current: 2, First: true}) {
				t.Fatalf("b after its window: %+v, want its crossing", got)
			}
			if rdb.Exists(ctx, w.Key, w.Values).Val() != 0 {
				t.Fatal("the redelivered crossing order opened a new window")
			}
			// A new window gives the offsets their lifetime again.
			rdb.Expire(ctx, offsetsOf(w), time.Minute)
			distinct(t, s, []Window{w}, sev{src: "0:t", offset: 3, id: "c", at: 2, value: "z"})
			if ttl := rdb.TTL(ctx, offsetsOf(w)).Val(); ttl < 6*24*time.Hour {
				t.Fatalf("offsets live %v, want the retention", ttl)
			}
		})
	}
}

// An event's changes share its offset: all of them count, in every window
// of the call, and a redelivery of the call counts none.
func TestDistinctAnEventCountsInEachWindow(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ws := []Window{distinctWindow(prefix, "w1", false, time.Minute, 0, 2),
		distinctWindow(prefix, "w2", true, time.Minute, time.Minute, 3)}
	evs := []sev{{src: "0:t", offset: 1, id: "a", at: 0, value: "x"}, {src: "0:t", offset: 2, id: "b", at: 10, value: "y"}}
	for range 2 {
		got := distinct(t, s, ws, evs...)
		if got[2] != (Counted{Current: 2, First: true}) || got[3] != (Counted{Current: 2}) {
			t.Fatalf("%+v, want b counted in both windows, crossing the first", got)
		}
	}
	for _, w := range ws {
		if n := rdb.ZCard(t.Context(), w.Values).Val(); n != 2 {
			t.Fatalf("%s holds %d values, want 2", w.Values, n)
		}
	}
}

// A window written by the old layout (a field per source partition with
// the last offset it counted, and r, its latest ids) is read: what it
// counted is not counted again, and its old fields go once the window
// counts a later offset. The old window counted w (offset 9, crossing the
// threshold of 1), x and y (10 and 11), and keeps the 2 latest values: w is
// no longer among them, so counting offset 9 again would count w twice.
func TestDistinctOldLayoutIsRead(t *testing.T) {
	for _, sliding := range []bool{false, true} {
		t.Run(fmt.Sprint("sliding=", sliding), func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			w := distinctWindow(prefix, "w", sliding, time.Minute, time.Minute, 1)
			at := func(e sev) int64 { return changeOf(0, e).At }
			hash := func(s string) string { h := IDOf(s); return string(h[:]) }
			ws, x, y := sev{src: "0:t", offset: 9, id: "w", at: 0, value: "w"}, sev{src: "0:t", offset: 10, id: "x", at: 1, value: "x"},
				sev{src: "0:t", offset: 11, id: "y", at: 2, value: "y"}
			rdb.HSet(ctx, w.Key, "t", at(y), "0:t", 11, "1:t", 4, "r", "aaaaaaaabbbbbbbbcccccccc")
			rdb.ZAdd(ctx, w.Values, redis.Z{Score: float64(at(x)), Member: hash("x")},
				redis.Z{Score: float64(at(y)), Member: hash("y")})
			rdb.HSet(ctx, w.Marks, hash("w"), 1)
			got := distinct(t, s, []Window{w}, ws, x, y)
			if want := []Counted{{Current: 1, First: true}, {Current: 2}, {Current: 2}}; !slices.Equal(got, want) {
				t.Fatalf("offsets 9 to 11 = %+v, want %+v: counted before", got, want)
			}
			if !rdb.HExists(ctx, w.Key, "0:t").Val() || !rdb.HExists(ctx, w.Key, "r").Val() {
				t.Fatal("old fields gone, though nothing was counted")
			}
			got = distinct(t, s, []Window{w}, sev{src: "0:t", offset: 12, id: "z", at: 3, value: "z"})
			if got[0] != (Counted{Current: 3}) {
				t.Fatalf("offset 12 = %+v, want counted", got)
			}
			f := rdb.HKeys(ctx, w.Key).Val()
			slices.Sort(f)
			if want := []string{"1:t", "t"}; !slices.Equal(f, want) {
				t.Fatalf("fields %v, want %v: partition 0's old offset and r gone, partition 1's kept", f, want)
			}
			// Partition 1's old offset still holds.
			if got := distinct(t, s, []Window{w}, sev{src: "1:t", offset: 4, id: "q", at: 3, value: "q"})[0]; got != (Counted{Current: 2}) {
				t.Fatalf("partition 1's offset 4 = %+v, want counted before", got)
			}
		})
	}
}

// A sliding distinct window never ends while its group stays active, so
// new windows alone would not keep the bucket's offsets alive: a window
// renews them each time its newest time passes a multiple of its length. A
// fixed window's changes do not: it ends, and the next one to start does.
func TestDistinctWindowRenewsTheOffsets(t *testing.T) {
	if epoch%time.Minute.Milliseconds() != 0 {
		t.Fatal("the test's epoch is not at a multiple of the window")
	}
	for _, sliding := range []bool{false, true} {
		t.Run(fmt.Sprint("sliding=", sliding), func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			w := distinctWindow(prefix, "w", sliding, time.Minute, 0, 100)
			offsets := offsetsOf(w)
			distinct(t, s, []Window{w}, sev{src: "0:t", offset: 1, id: "a", at: 0, value: "a"})
			for i, step := range []struct {
				at      float64 // seconds from the epoch
				renewed bool
			}{{1.5, false}, {59.999, false}, {60, true}, {61.5, false}, {150, true}, {149, false}} {
				rdb.Expire(ctx, offsets, 100*time.Second)
				e := sev{src: "0:t", offset: int64(i) + 2, id: fmt.Sprint("e", step.at), at: step.at, value: fmt.Sprint("v", step.at)}
				distinct(t, s, []Window{w}, e)
				if ttl := rdb.TTL(ctx, offsets).Val(); (ttl > 100*time.Second) != (sliding && step.renewed) {
					t.Fatalf("at %v s: the offsets' TTL is %v; renewed: want %v", step.at, ttl, sliding && step.renewed)
				}
			}
			// A fixed window that ends: the next one starts, and renews them.
			rdb.Del(ctx, w.Key, w.Values)
			rdb.Expire(ctx, offsets, 100*time.Second)
			distinct(t, s, []Window{w}, sev{src: "0:t", offset: 1_000_000, id: "n", at: 151, value: "n"})
			if ttl := rdb.TTL(ctx, offsets).Val(); ttl <= 100*time.Second {
				t.Fatalf("a new window left the offsets' TTL at %v", ttl)
			}
		})
	}
}

func TestDistinctWindowTTL(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	fixed := distinctWindow(prefix, "fixed", false, 30*time.Second, 0, 5)
	distinct(t, s, []Window{fixed}, sev{src: "0:t", id: "a", value: "x"})
	rdb.Expire(ctx, fixed.Key, 10*time.Second)
	rdb.Expire(ctx, fixed.Values, 10*time.Second)
	// A running fixed window keeps its end.
	distinct(t, s, []Window{fixed}, sev{src: "0:t", offset: 1, id: "b", value: "y"})
	for _, k := range []string{fixed.Key, fixed.Values} {
		if ttl := rdb.TTL(ctx, k).Val(); ttl > 10*time.Second || ttl <= 0 {
			t.Fatalf("%s: TTL %v, want the window's end kept", k, ttl)
		}
	}
	sliding := distinctWindow(prefix, "sliding", true, 30*time.Second, 30*time.Second, 5)
	distinct(t, s, []Window{sliding}, sev{src: "0:t", offset: 2, id: "a", value: "x"})
	for _, k := range []string{sliding.Key, sliding.Values} {
		if ttl := rdb.TTL(ctx, k).Val(); ttl <= 110*time.Second || ttl > 120*time.Second {
			t.Fatalf("%s: TTL %v, want 2 × (window + lateness)", k, ttl)
		}
	}
}

func TestDistinctUnusableArguments(t *testing.T) {
	_, rdb, prefix := newScripts(t)
	w := distinctWindow(prefix, "w", true, time.Minute, time.Minute, 3)
	// A window: kind, length and lateness (ms), threshold, lifetime (s).
	win := func(kind int, length, late int64, threshold int, ttl int64) packing {
		return packing{}.u8(kind).i64(length).i64(late).u16(threshold).u32(ttl)
	}
	change := func(i int, offset, at int64) packing {
		return packing{}.u8(i).i64(offset).id("aaaaaaaa").i64(at).id("vvvvvvvv")
	}
	good := win(2, 60000, 60000, 3, 240)
	tests := []struct {
		name   string
		window packing
		change packing
	}{
		{"a negative time", good, change(1, 0, -1)},
		{"a time of 10^15", good, change(1, 0, 1e15)},
		{"a negative offset", good, change(1, -1, 1)},
		{"window index 0", good, change(0, 0, 1)},
		{"an unknown window", good, change(2, 0, 1)},
		{"an unknown window type", win(3, 60000, 60000, 3, 240), change(1, 0, 1)},
		{"a threshold of 0", win(1, 60000, 0, 0, 60), change(1, 0, 1)},
		{"a threshold above 10000", win(1, 60000, 0, 10001, 60), change(1, 0, 1)},
		{"a length of 0", win(2, 0, 60000, 3, 240), change(1, 0, 1)},
		{"a length of 10^13 ms", win(2, 1e13, 0, 3, 240), change(1, 0, 1)},
		{"a negative lateness", win(2, 60000, -1, 3, 240), change(1, 0, 1)},
		{"a lifetime of 0", win(1, 60000, 0, 3, 0), change(1, 0, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := append(append(packing{}.u32(60).u8(1), tt.window...), tt.change...)
			got, err := distinctAndCheck.Run(t.Context(), rdb, []string{offsetsOf(w), w.Key, w.Values, w.Marks}, "0:t", []byte(p)).Int64Slice()
			if err != nil || len(got) != 2 || got[0] != -1 || got[1] != -1 {
				t.Fatalf("reply %v, %v", got, err)
			}
			if rdb.Exists(t.Context(), offsetsOf(w), w.Key, w.Values, w.Marks).Val() != 0 {
				t.Fatal("wrote")
			}
		})
	}
}

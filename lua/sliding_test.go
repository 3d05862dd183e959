package lua

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// sev is one event of a sliding or distinct test: its partition's source,
// offset, id, time (seconds from the test's epoch), amount (negative: a
// refund) and distinct value.
type sev struct {
	src    string
	offset int64
	id     string
	at     float64
	amount int64
	value  string
}

// epoch keeps test times far from 0, as real ones are.
const epoch = int64(1_800_000_000_000)

func slidingWindow(prefix, name string, length, lateness time.Duration, threshold int64) Window {
	w := testWindow(prefix, name, length, threshold)
	w.Sliding, w.Lateness = true, lateness
	return w
}

func changeOf(w int, e sev) Change {
	return Change{Window: w, Offset: e.offset, ID: IDOf(e.id), Amount: e.amount,
		At: epoch + int64(e.at*1000), Value: ValueOf(e.value)}
}

func trySlide(ctx context.Context, s *Scripts, windows []Window, evs ...sev) ([]Counted, error) {
	c := &Call{Kind: Slide, Source: evs[0].src, Offsets: offsetsOf(windows[0]), Windows: windows}
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

func slide(t *testing.T, s *Scripts, windows []Window, evs ...sev) []Counted {
	t.Helper()
	res, err := trySlide(t.Context(), s, windows, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An order's value is what its group holds of the window before it, in
// event time, whatever the order its events arrive in.
func TestSlidingValues(t *testing.T) {
	type step struct {
		at    float64 // seconds
		inc   int64
		value int64
		first bool
		late  bool
	}
	o := func(at float64, value int64, first bool) step {
		return step{at: at, inc: 1, value: value, first: first}
	}
	tests := []struct {
		name      string
		threshold int64
		lateness  time.Duration
		steps     []step
	}{
		{"three in a minute cross once", 3, time.Minute,
			[]step{o(0, 1, false), o(10, 2, false), o(20, 3, true), o(30, 4, false)}},
		{"the oldest leaves the window", 3, time.Minute,
			[]step{o(0, 1, false), o(30, 2, false), o(61, 2, false), o(62, 3, true)}},
		{"a burst across a fixed window's end", 3, time.Minute,
			[]step{o(0, 1, false), o(110, 1, false), o(115, 2, false), o(125, 3, true), o(130, 4, false)}},
		{"falling below and rising again is a new crossing", 2, time.Minute,
			[]step{o(0, 1, false), o(1, 2, true), o(100, 1, false), o(101, 2, true)}},
		{"a long pause empties the window", 2, time.Minute,
			[]step{o(0, 1, false), o(10_000, 1, false), o(10_001, 2, true)}},
		{"reversed arrival is judged by the newest window", 3, time.Minute,
			[]step{o(30, 1, false), o(20, 2, false), o(10, 3, true)}},
		{"an order older than its window but within lateness joins its own", 2, time.Minute,
			[]step{o(200, 1, false), o(100, 1, false), o(95, 2, true)}},
		{"an intermediate window crosses", 3, time.Minute,
			[]step{o(90, 1, false), o(40, 2, false), o(0, 2, false), o(30, 3, true)}},
		{"older than window and lateness is late", 2, 10 * time.Second,
			[]step{o(100, 1, false), {at: 20, inc: 1, value: 1, late: true}, o(99, 2, true)}},
		{"amounts", 1000, time.Minute,
			[]step{{at: 0, inc: 600, value: 600}, {at: 5, inc: 300, value: 900}, {at: 70, inc: 500, value: 500}, {at: 71, inc: 500, value: 1000, first: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, prefix := newScripts(t)
			w := slidingWindow(prefix, "w", time.Minute, tt.lateness, tt.threshold)
			w2 := slidingWindow(prefix, "w2", time.Minute, tt.lateness, tt.threshold)
			var all []sev
			for i, st := range tt.steps {
				e := sev{src: "0:t", offset: int64(i), id: fmt.Sprint("e", i), at: st.at, amount: st.inc}
				all = append(all, e)
				got := slide(t, s, []Window{w}, e)[0]
				if got.Err != nil || got.Current != st.value || got.First != st.first || got.Late != st.late {
					t.Fatalf("step %d (at %vs): %+v, want value %d first %v late %v", i, st.at, got, st.value, st.first, st.late)
				}
			}
			// The same events in one call give the same answers (from
			// another partition: the bucket's offsets are w's too).
			for i := range all {
				all[i].src = "1:t"
			}
			for i, got := range slide(t, s, []Window{w2}, all...) {
				st := tt.steps[i]
				if got.Current != st.value || got.First != st.first || got.Late != st.late {
					t.Fatalf("in one call, step %d: %+v", i, got)
				}
			}
		})
	}
}

// What a sliding value may miss is one bucket's worth at the trailing edge:
// orders less than a window less a bucket apart (58.5 s of 60 s) always
// count together; orders a window apart never do.
func TestSlidingErrorBound(t *testing.T) {
	s, _, prefix := newScripts(t)
	width := time.Minute / Span
	w := slidingWindow(prefix, "w", time.Minute, time.Minute, 100)
	got := slide(t, s, []Window{w},
		sev{src: "0:t", offset: 0, id: "a", at: 0, amount: 1},
		sev{src: "0:t", offset: 1, id: "b", at: (time.Minute - width).Seconds() - 0.001, amount: 1},
		sev{src: "0:t", offset: 2, id: "c", at: 60, amount: 1})
	if got[1].Current != 2 || got[2].Current != 2 {
		t.Fatalf("values %d, %d: want the first order counted at 58.5 s and gone at 60 s", got[1].Current, got[2].Current)
	}
}

func TestSlidingRefunds(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	w := slidingWindow(prefix, "w", time.Minute, time.Minute, 1_000_000)
	src := "0:t"
	got := slide(t, s, []Window{w},
		sev{src: src, offset: 0, id: "o1", at: 0, amount: 500},
		sev{src: src, offset: 1, id: "o2", at: 30, amount: 300},
		sev{src: src, offset: 2, id: "r1", at: 40, amount: -400}, // 300 from o2, then 100 from o1
		sev{src: src, offset: 4, id: "o3", at: 65, amount: 10},   // o1's bucket leaves
		sev{src: src, offset: 5, id: "r2", at: 66, amount: -50},  // more than is left: clamped
	)
	want := []Counted{{Current: 500}, {Current: 800}, {Current: 400}, {Current: 10}, {Current: 0, Clamped: true}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// A refund for a group with nothing counted writes nothing.
	other := slidingWindow(prefix, "other", time.Minute, time.Minute, 10)
	if got := slide(t, s, []Window{other}, sev{src: src, offset: 9, id: "r", at: 1, amount: -5})[0]; got != (Counted{}) {
		t.Fatalf("refund of nothing: %+v", got)
	}
	if n := rdb.Exists(t.Context(), other.Key).Val(); n != 0 {
		t.Fatal("a refund of nothing made a window")
	}
}

func TestSlidingRedeliveriesCountOnce(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	w := slidingWindow(prefix, "w", time.Minute, time.Minute, 2)
	a := sev{src: "0:t", offset: 10, id: "a", at: 0, amount: 1}
	b := sev{src: "0:t", offset: 11, id: "b", at: 1, amount: 1}
	slide(t, s, []Window{w}, a, b)
	// Redelivered from the committed offset: the crossing order answers
	// its crossing again.
	got := slide(t, s, []Window{w}, a, b)
	if got[0].Current != 2 || got[0].First || got[1].Current != 2 || !got[1].First {
		t.Fatalf("redelivery: %+v", got)
	}
	// The window holds its buckets and newest bucket only: the offsets are
	// the bucket's, in a field of the script's own.
	if f := rdb.HKeys(t.Context(), w.Key).Val(); len(f) != 2 {
		t.Fatalf("window fields %v, want k and one bucket", f)
	}
	if o := rdb.HGet(t.Context(), offsetsOf(w), "s:0:t").Val(); o != "11" {
		t.Fatalf("bucket's offset %q, want 11", o)
	}
	// Its window gone, a redelivered crossing still answers its mark and
	// opens no window: the bucket's offsets outlive the window.
	rdb.Del(t.Context(), w.Key)
	if got := slide(t, s, []Window{w}, b)[0]; got != (Counted{Current: 2, First: true}) {
		t.Fatalf("b after its window: %+v, want its crossing", got)
	}
	if rdb.Exists(t.Context(), w.Key).Val() != 0 {
		t.Fatal("the redelivered crossing order opened a new window")
	}
	// A new window gives the offsets their lifetime again.
	rdb.Expire(t.Context(), offsetsOf(w), time.Minute)
	slide(t, s, []Window{w}, sev{src: "0:t", offset: 12, id: "c", at: 2, amount: 1})
	if ttl := rdb.TTL(t.Context(), offsetsOf(w)).Val(); ttl < 6*24*time.Hour {
		t.Fatalf("offsets live %v, want the retention", ttl)
	}
}

// An event's changes share its offset: all of them count, in every window
// of the call, and a redelivery of the call counts none.
func TestSlidingAnEventCountsInEachWindow(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ws := []Window{slidingWindow(prefix, "w1", time.Minute, time.Minute, 2),
		slidingWindow(prefix, "w2", time.Minute, time.Minute, 3)}
	evs := []sev{{src: "0:t", offset: 1, id: "a", at: 0, amount: 1}, {src: "0:t", offset: 2, id: "b", at: 10, amount: 1}}
	for range 2 {
		got := slide(t, s, ws, evs...)
		if got[2] != (Counted{Current: 2, First: true}) || got[3] != (Counted{Current: 2}) {
			t.Fatalf("%+v, want b counted in both windows, crossing the first", got)
		}
	}
	for _, w := range ws {
		if n := rdb.HGet(t.Context(), w.Key, fmt.Sprint((epoch+10_000)/(time.Minute.Milliseconds()/Span))).Val(); n != "1" {
			t.Fatalf("%s's bucket of b = %q, want 1", w.Key, n)
		}
	}
}

// A window written by the old layout (a field per source partition with
// the last offset it counted, and r, its latest ids) is read: what it
// counted is not counted again, and its old fields go once the window
// counts a later offset.
func TestSlidingOldLayoutIsRead(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := slidingWindow(prefix, "w", time.Minute, time.Minute, 3)
	width := time.Minute.Milliseconds() / Span
	k := epoch / width
	rdb.HSet(ctx, w.Key, "k", k, k, 2, "0:t", 11, "1:t", 4, "r", "aaaaaaaabbbbbbbb")
	got := slide(t, s, []Window{w}, sev{src: "0:t", offset: 10, id: "x", at: 0, amount: 1},
		sev{src: "0:t", offset: 11, id: "y", at: 0, amount: 1})
	if got[0] != (Counted{Current: 2}) || got[1] != (Counted{Current: 2}) {
		t.Fatalf("offsets 10 and 11 = %+v, want counted before", got)
	}
	if !rdb.HExists(ctx, w.Key, "0:t").Val() || !rdb.HExists(ctx, w.Key, "r").Val() {
		t.Fatal("old fields gone, though nothing was counted")
	}
	got = slide(t, s, []Window{w}, sev{src: "0:t", offset: 12, id: "z", at: 0, amount: 1})
	if got[0] != (Counted{Current: 3, First: true}) {
		t.Fatalf("offset 12 = %+v, want counted, crossing", got)
	}
	f := rdb.HKeys(ctx, w.Key).Val()
	slices.Sort(f)
	if want := []string{fmt.Sprint(k), "1:t", "k"}; !slices.Equal(f, want) {
		t.Fatalf("fields %v, want %v: partition 0's old offset and r gone, partition 1's kept", f, want)
	}
	// Partition 1's old offset still holds.
	if got := slide(t, s, []Window{w}, sev{src: "1:t", offset: 4, id: "q", at: 0, amount: 1})[0]; got.Current != 3 {
		t.Fatalf("partition 1's offset 4 = %+v, want counted before", got)
	}
}

// A sliding window never ends while its group stays active, so new windows
// alone would not keep the bucket's offsets alive: a window renews them each
// time its newest bucket passes a multiple of its span (one window length).
func TestSlidingWindowRenewsTheOffsets(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := slidingWindow(prefix, "w", time.Minute, 0, 100)
	if (epoch/(time.Minute.Milliseconds()/Span))%Span != 0 {
		t.Fatal("the test's epoch is not at a multiple of the span")
	}
	offsets := offsetsOf(w)
	slide(t, s, []Window{w}, sev{src: "0:t", offset: 1, id: "a", at: 0, amount: 1})
	for _, step := range []struct {
		at      float64 // seconds from the epoch: 1.5 s a bucket, 40 buckets a span
		renewed bool
	}{{1.5, false}, {59, false}, {60, true}, {61.5, false}, {150, true}} {
		rdb.Expire(ctx, offsets, 100*time.Second)
		slide(t, s, []Window{w}, sev{src: "0:t", offset: int64(step.at*10) + 2, id: fmt.Sprint("e", step.at), at: step.at, amount: 1})
		if ttl := rdb.TTL(ctx, offsets).Val(); (ttl > 100*time.Second) != step.renewed {
			t.Fatalf("at %v s: the offsets' TTL is %v; renewed: want %v", step.at, ttl, step.renewed)
		}
	}
}

func TestSlidingFirstCrossUnderRace(t *testing.T) {
	s, _, prefix := newScripts(t)
	w := slidingWindow(prefix, "w", time.Minute, time.Minute, 100)
	firsts := firstCrossings(t, 200, func(r int) ([]Counted, error) {
		return trySlide(context.Background(), s, []Window{w},
			sev{src: fmt.Sprintf("%d:t", r), offset: 0, id: fmt.Sprint("e", r), at: float64(r%30) / 10, amount: 1})
	})
	if firsts != 1 {
		t.Fatalf("%d orders crossed first, want exactly 1", firsts)
	}
}

// A group keeps its buckets of two windows and the lateness, however long
// it runs.
func TestSlidingMemoryIsBounded(t *testing.T) {
	for _, late := range []int{0, 1, 2} { // lateness in windows
		t.Run(fmt.Sprint("lateness ", late, " windows"), func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			lateness := time.Duration(late) * time.Minute
			w := slidingWindow(prefix, "w", time.Minute, lateness, 1_000_000)
			var evs []sev
			for i := range 3000 {
				evs = append(evs, sev{src: "0:t", offset: int64(i), id: fmt.Sprint("e", i), at: float64(i) / 5, amount: 1})
			}
			for len(evs) > 0 {
				n := min(len(evs), Slide.MaxChanges())
				slide(t, s, []Window{w}, evs[:n]...)
				evs = evs[n:]
			}
			fields := rdb.HLen(t.Context(), w.Key).Val()
			// 2 spans and the lateness of buckets (docs/windows.md: 2 × 40 + 40 ×
			// lateness/window + 1), and k.
			if limit := int64((2+late)*Span + 1 + 1); fields > limit {
				t.Fatalf("a group holds %d fields, want at most %d", fields, limit)
			}
			span := 2 * (time.Minute + lateness)
			if ttl := rdb.TTL(t.Context(), w.Key).Val(); ttl <= span-time.Minute || ttl > span {
				t.Fatalf("TTL %v, want 2 × (window + lateness) = %v", ttl, span)
			}
		})
	}
}

func TestSlidingUnusableArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	w := slidingWindow(prefix, "w", time.Minute, time.Minute, 3)
	// Calls the Go side refuses before sending.
	for _, bad := range []Window{
		slidingWindow(prefix, "short", 10*time.Millisecond, 0, 3),
		slidingWindow(prefix, "late", time.Second, 101*time.Second, 3),
	} {
		if _, err := trySlide(t.Context(), s, []Window{bad}, sev{src: "0:t", id: "a", amount: 1}); err == nil {
			t.Errorf("window %v lateness %v was sent", bad.Length, bad.Lateness)
		}
	}
	// Windows and changes the script refuses: each alone, writing nothing.
	// A window: span, lateness (buckets), threshold, lifetime (s); a
	// change: index, offset, id, bucket, amount.
	win := func(span, late int, threshold, ttl int64) packing {
		return packing{}.u16(span).u16(late).i64(threshold).u32(ttl)
	}
	change := func(i int, offset, bucket, amount int64) packing {
		return packing{}.u8(i).i64(offset).id("aaaaaaaa").i64(bucket).i64(amount)
	}
	good := win(Span, 40, 3, 240)
	tests := []struct {
		name   string
		window packing
		change packing
	}{
		{"a zero amount", good, change(1, 0, 1, 0)},
		{"an amount of 2^53", good, change(1, 0, 1, 1<<53)},
		{"a refund of 2^53", good, change(1, 0, 1, -1<<53)},
		{"a negative bucket", good, change(1, 0, -1, 1)},
		{"a bucket of 10^15", good, change(1, 0, 1e15, 1)},
		{"a negative offset", good, change(1, -1, 1, 1)},
		{"window index 0", good, change(0, 0, 1, 1)},
		{"an unknown window", good, change(2, 0, 1, 1)},
		{"a span of 0", win(0, 40, 3, 240), change(1, 0, 1, 1)},
		{"a span of 1001", win(1001, 40, 3, 240), change(1, 0, 1, 1)},
		{"a lateness of 4001", win(Span, 4001, 3, 240), change(1, 0, 1, 1)},
		{"a threshold of 0", win(Span, 40, 0, 240), change(1, 0, 1, 1)},
		{"a threshold of 2^53", win(Span, 40, 1<<53, 240), change(1, 0, 1, 1)},
		{"a lifetime of 0", win(Span, 40, 3, 0), change(1, 0, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := append(append(packing{}.u32(60).u8(1), tt.window...), tt.change...)
			got, err := slideAndCheck.Run(t.Context(), rdb, []string{offsetsOf(w), w.Key, w.Marks}, "0:t", []byte(p)).Int64Slice()
			if err != nil || len(got) != 2 || got[0] != -1 || got[1] != -1 {
				t.Fatalf("reply %v, %v", got, err)
			}
			if rdb.Exists(t.Context(), offsetsOf(w), w.Key, w.Marks).Val() != 0 {
				t.Fatal("wrote")
			}
		})
	}
}

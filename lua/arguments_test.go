package lua

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

func TestUnusableArgumentsWriteNothing(t *testing.T) {
	_, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "w", time.Minute, 10)
	o := offsetsOf(w)
	head := packing{}.u32(3600).u8(1).u32(60).i64(10).u8(1).i64(1)
	const id = "12345678"
	for n, tc := range []struct {
		name   string
		change packing
	}{
		{"window index 0", packing{}.change(0, 5, id, 1)},
		{"window index too large", packing{}.change(2, 5, id, 1)},
		{"offset negative", packing{}.change(1, -5, id, 1)},
		{"offset 10^15", packing{}.change(1, 1e15, id, 1)},
		{"increment 0", packing{}.change(1, 5, id, 0)},
		{"increment negative", packing{}.change(1, 5, id, -1)},
		{"increment 2^53", packing{}.change(1, 5, id, 1<<53)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bad change is refused, the good one after it counts.
			all := append(append(append(packing{}, head...), tc.change...), packing{}.change(1, int64(10+n), fmt.Sprintf("good%04d", n), 1)...)
			got, err := incrAndCheck.Run(ctx, rdb, []string{o, w.Key, w.Marks}, "0:t", []byte(all), "", "").Int64Slice()
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
	// holds no counter (another type, a count not an integer or about to
	// overflow).
	w2 := testWindow(prefix, "w2", time.Minute, 10)
	two := func(length, threshold int64, offset int64, id string) []byte {
		return packing{}.u32(3600).u8(2).u32(length).i64(threshold).u8(1).i64(1).u32(60).i64(10).u8(0).i64(0).
			change(1, offset, id, 1).change(2, offset, id, 1)
	}
	for n, bad := range [][2]int64{{0, 10}, {60, 0}, {60, -10}, {60, 1 << 53}} {
		got, err := incrAndCheck.Run(ctx, rdb, []string{o, w2.Key, w2.Marks, w.Key, w.Marks},
			"0:t", two(bad[0], bad[1], int64(20+n), fmt.Sprintf("bad%05d", n)), "", "").Int64Slice()
		if err != nil || len(got) != 4 || got[0] != -1 || got[1] != -1 || got[2] < 1 {
			t.Fatalf("window %v: reply %v, %v; want {-1 -1} then a count", bad, got, err)
		}
	}
	if rdb.Exists(ctx, w2.Key, w2.Marks).Val() != 0 {
		t.Fatal("a refused window was written")
	}
	for n, held := range []func() error{
		func() error { return rdb.HSet(ctx, w2.Key, "c", "ten").Err() },
		func() error { return rdb.HSet(ctx, w2.Key, "c", "9223372036854775807").Err() },
		func() error { return rdb.RPush(ctx, w2.Key, "1").Err() },
		// Strings are counters of the version before: their count moves
		// into a hash, but these hold none.
		func() error { return rdb.Set(ctx, w2.Key, "ten", 0).Err() },
		func() error { return rdb.Set(ctx, w2.Key, "9223372036854775807", 0).Err() },
	} {
		rdb.Del(ctx, w2.Key)
		if err := held(); err != nil {
			t.Fatal(err)
		}
		before := rdb.Dump(ctx, w2.Key).Val()
		got, err := incrAndCheck.Run(ctx, rdb, []string{o, w2.Key, w2.Marks, w.Key, w.Marks},
			"0:t", two(60, 10, int64(30+n), fmt.Sprintf("held%04d", n)), "", "").Int64Slice()
		if err != nil || len(got) != 4 || got[0] != -1 || got[1] != -1 || got[2] < 1 {
			t.Fatalf("held %d: reply %v, %v; want {-1 -1} then a count", n, got, err)
		}
		if rdb.Dump(ctx, w2.Key).Val() != before {
			t.Fatalf("held %d: the window was written", n)
		}
	}
	rdb.Del(ctx, o, w.Key, w.Marks)
	refusedCalls(t, rdb, w)
}

// refusedCalls: calls whose own arguments (the source, the packing's head,
// its length) are unusable are refused whole, by incr_and_check and by
// sales_decr, and write nothing.
func refusedCalls(t *testing.T, rdb redis.UniversalClient, w Window) {
	ctx := t.Context()
	o := offsetsOf(w)
	good := packing{}.change(1, 5, "12345678", 1)
	incr := func(life int64, n int, rest ...packing) []byte {
		p := packing{}.u32(life).u8(n).u32(60).i64(10).u8(1).i64(1)
		for _, r := range rest {
			p = append(p, r...)
		}
		return p
	}
	sales := func(life int64, n int, rest ...packing) []byte {
		p := packing{}.u32(life).u8(n)
		for _, r := range rest {
			p = append(p, r...)
		}
		return p
	}
	var tooMany packing
	for i := range 4097 {
		tooMany = tooMany.change(1, int64(i), "12345678", 1)
	}
	keys65 := []string{o}
	wins65 := packing{}.u32(3600).u8(65)
	for i := range 65 {
		keys65 = append(keys65, fmt.Sprintf("%s%d", w.Key, i), fmt.Sprintf("%s%d:m", w.Key, i))
		wins65 = wins65.u32(60).i64(10).u8(0).i64(0)
	}
	keys := []string{o, w.Key, w.Marks}
	for _, tc := range []struct {
		name        string
		keys        []string
		args        []any
		incr, sales bool // which script the case is for
	}{
		{"no source", keys, []any{"", incr(3600, 1, good)}, true, false},
		{"a source of 33 bytes", keys, []any{strings.Repeat("s", 33), incr(3600, 1, good)}, true, false},
		{"a third argument", keys, []any{"0:t", incr(3600, 1, good), "x"}, true, false},
		{"a fifth argument", keys, []any{"0:t", incr(3600, 1, good), "", "", "x"}, true, false},
		{"spans not 8 bytes a change", keys, []any{"0:t", incr(3600, 1, good), "e", "1234567"}, true, false},
		{"no packing", keys, []any{"0:t"}, true, true},
		{"a packing shorter than its head", keys, []any{"0:t", []byte{1, 0, 0}}, true, true},
		{"lifetime 0", keys, []any{"0:t", incr(0, 1, good)}, true, false},
		{"n 0", keys, []any{"0:t", incr(3600, 0, good)}, true, false},
		{"n 65", keys65, []any{"0:t", []byte(append(wins65, good...))}, true, false},
		{"keys not two a window and the offsets", keys[1:], []any{"0:t", incr(3600, 1, good)}, true, false},
		{"no changes", keys, []any{"0:t", incr(3600, 1)}, true, false},
		{"half a change", keys, []any{"0:t", incr(3600, 1, good[:12])}, true, false},
		{"a trailing byte", keys, []any{"0:t", incr(3600, 1, good, packing{0})}, true, false},
		{"4097 changes", keys, []any{"0:t", incr(3600, 1, tooMany)}, true, false},
		{"sales_decr: no source", keys[:2], []any{"", sales(3600, 1, good)}, false, true},
		{"sales_decr: lifetime 0", keys[:2], []any{"0:t", sales(0, 1, good)}, false, true},
		{"sales_decr: n 0", keys[:2], []any{"0:t", sales(3600, 0, good)}, false, true},
		{"sales_decr: n not the windows' keys", keys[:2], []any{"0:t", sales(3600, 2, good)}, false, true},
		{"sales_decr: no changes", keys[:2], []any{"0:t", sales(3600, 1)}, false, true},
		{"sales_decr: half a change", keys[:2], []any{"0:t", sales(3600, 1, good[:12])}, false, true},
		{"sales_decr: a trailing byte", keys[:2], []any{"0:t", sales(3600, 1, good, packing{0})}, false, true},
		{"sales_decr: 4097 changes", keys[:2], []any{"0:t", sales(3600, 1, tooMany)}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, sc := range []struct {
				on     bool
				script interface {
					Run(context.Context, redis.Scripter, []string, ...any) *redis.Cmd
				}
				incr bool
			}{{tc.incr, incrAndCheck, true}, {tc.sales, salesDecr, false}} {
				if !sc.on {
					continue
				}
				args := tc.args
				if sc.incr && len(args) == 2 {
					args = append(args[:2:2], "", "") // no entries
				}
				got, err := sc.script.Run(ctx, rdb, tc.keys, args...).Int64Slice()
				if err != nil || len(got) != 2 || got[0] != -1 || got[1] != -1 {
					t.Fatalf("reply %v, %v; want {-1 -1}", got, err)
				}
				if rdb.Exists(ctx, o, w.Key, w.Marks).Val() != 0 {
					t.Fatal("a refused call wrote")
				}
			}
		})
	}
}

// A change refused by the script is the change's error, not the batch's,
// and counts in the errors metric.
func TestRefusedChangesAreReportedAndCounted(t *testing.T) {
	s, _, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 10)
	c := &Call{Kind: Count, Source: "0:t", Offsets: offsetsOf(w), Windows: []Window{w}, Changes: []Change{
		{Window: 0, Offset: -1, ID: IDOf("a"), Amount: 1}, {Window: 0, Offset: 1, ID: IDOf("b"), Amount: 1},
	}}
	b := s.Batch()
	if err := b.Add(c); err != nil {
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

func TestCallsAreCheckedBeforeTheyAreSent(t *testing.T) {
	s, _, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Minute, 3)
	one := []Change{{Offset: 1, ID: IDOf("a"), Amount: 1}}
	o := offsetsOf(w)
	for _, c := range []*Call{
		{Source: "", Offsets: o, Windows: []Window{w}, Changes: one},
		{Source: strings.Repeat("s", 33), Offsets: o, Windows: []Window{w}, Changes: one},
		{Source: "0:t", Offsets: o, Changes: one},
		{Source: "0:t", Offsets: o, Windows: []Window{w}},
		{Source: "0:t", Offsets: o, Windows: []Window{w}, Changes: make([]Change, MaxChanges+1)},
		{Source: "0:t", Windows: []Window{w}, Changes: one},
	} {
		if err := s.Batch().Add(c); err == nil {
			t.Errorf("Count accepted %+v", c)
		}
	}
}

// A call takes at most its kind's changes (Kind.MaxChanges), which keep its
// largest call near 1 ms of Redis time, though its script would take more:
// a call over the bound is refused before it is sent; one at it runs.
func TestEachKindTakesAtMostItsChanges(t *testing.T) {
	s, _, prefix := newScripts(t)
	for _, k := range Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			most := k.MaxChanges()
			if most < MaxWindows || most > MaxChanges {
				t.Fatalf("MaxChanges() = %d: a kind takes %d to %d (an event's changes to a bucket must fit a call)",
					most, MaxWindows, MaxChanges)
			}
			w := distinctWindow(prefix, "most-"+k.String(), true, time.Minute, 0, 10_000)
			call := func(n int) *Call {
				chs := make([]Change, n)
				for j := range chs {
					chs[j] = Change{Offset: int64(j), ID: IDOf(fmt.Sprint("e", j)), Amount: 1, At: epoch, Value: ValueOf(fmt.Sprint("v", j))}
				}
				return &Call{Kind: k, Source: "0:most", Offsets: offsetsOf(w), Windows: []Window{w}, Changes: chs}
			}
			b := s.Batch()
			if err := b.Add(call(most + 1)); err == nil || b.Len() != 0 {
				t.Fatalf("Add took a call of %d changes (%v, %d calls queued)", most+1, err, b.Len())
			}
			c := call(most)
			if err := b.Add(c); err != nil {
				t.Fatalf("Add refused a call of %d changes: %v", most, err)
			}
			if err := b.Exec(t.Context()); err != nil {
				t.Fatal(err)
			}
			for i, r := range c.Results {
				if r.Err != nil {
					t.Fatalf("change %d of %d answered %v", i, most, r.Err)
				}
			}
		})
	}
}

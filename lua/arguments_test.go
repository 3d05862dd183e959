package lua

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

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

package lua

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func distinctWindow(prefix, name string, sliding bool, length, lateness time.Duration, threshold int64) Window {
	w := testWindow(prefix, name, length, threshold)
	w.Values = w.Key + ":values"
	w.Sliding, w.Lateness = sliding, lateness
	return w
}

func tryDistinct(ctx context.Context, s *Scripts, windows []Window, evs ...sev) ([]Counted, error) {
	c := &Distinct{Source: evs[0].src, Windows: windows}
	for _, e := range evs {
		for w := range windows {
			c.Changes = append(c.Changes, changeOf(w, e))
		}
	}
	b := s.Batch()
	if err := b.Distinct(c); err != nil {
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
				n := min(len(evs), MaxChanges)
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
			if n := rdb.HLen(t.Context(), w.Key).Val(); n != 3 {
				t.Fatalf("%d fields in the window's hash", n)
			}
		})
	}
}

func TestDistinctRedeliveriesCountOnce(t *testing.T) {
	s, _, prefix := newScripts(t)
	w := distinctWindow(prefix, "w", true, time.Minute, time.Minute, 2)
	a := sev{src: "0:t", offset: 1, id: "a", at: 0, value: "x"}
	b := sev{src: "0:t", offset: 2, id: "b", at: 1, value: "y"}
	distinct(t, s, []Window{w}, a, b)
	got := distinct(t, s, []Window{w}, a, b)
	if got[0].First || got[0].Current != 2 || !got[1].First || got[1].Current != 2 {
		t.Fatalf("redelivery: %+v", got)
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
	distinct(t, s, []Window{sliding}, sev{src: "0:t", id: "a", value: "x"})
	for _, k := range []string{sliding.Key, sliding.Values} {
		if ttl := rdb.TTL(ctx, k).Val(); ttl <= 110*time.Second || ttl > 120*time.Second {
			t.Fatalf("%s: TTL %v, want 2 × (window + lateness)", k, ttl)
		}
	}
}

func TestDistinctUnusableArguments(t *testing.T) {
	_, rdb, prefix := newScripts(t)
	w := distinctWindow(prefix, "w", true, time.Minute, time.Minute, 3)
	tests := []struct {
		name   string
		window []any
		change []any
	}{
		{"an empty value", []any{"sliding", 60000, 60000, 3, 240}, []any{1, 0, "aaaaaaaa", 1, ""}},
		{"a negative time", []any{"sliding", 60000, 60000, 3, 240}, []any{1, 0, "aaaaaaaa", -1, "x"}},
		{"an unknown window type", []any{"tumbling", 60000, 60000, 3, 240}, []any{1, 0, "aaaaaaaa", 1, "x"}},
		{"a threshold above 10000", []any{"fixed", 60000, 0, 10001, 60}, []any{1, 0, "aaaaaaaa", 1, "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]any{"0:t", 60, 1}, tt.window...), tt.change...)
			got, err := distinctAndCheck.Run(t.Context(), rdb, []string{w.Key, w.Values, w.Marks}, args...).Int64Slice()
			if err != nil || len(got) != 2 || got[0] != -1 || got[1] != -1 {
				t.Fatalf("reply %v, %v", got, err)
			}
			if rdb.Exists(t.Context(), w.Key, w.Values, w.Marks).Val() != 0 {
				t.Fatal("wrote")
			}
		})
	}
}

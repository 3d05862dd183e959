package lua

import (
	"bytes"
	"testing"
	"time"
)

// crossAt counts e1, e2, e3 into a window of threshold 2: e2 crosses.
func crossAt(t *testing.T, s *Scripts, w Window) []Counted {
	t.Helper()
	return count(t, s, []Window{w}, ev{"p0", 0, "e1", 1}, ev{"p0", 1, "e2", 1}, ev{"p0", 2, "e3", 1})
}

// Crossing reads back what a counting script marked, and nothing else.
func TestCrossingReadsTheMark(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "marks", time.Minute, 2)
	crossAt(t, s, w)
	for _, tt := range []struct {
		id        string
		wantValue int64
		want      bool
	}{
		{"e1", 0, false},
		{"e2", 2, true}, // the crossing
		{"e3", 0, false},
		{"never-seen", 0, false},
	} {
		c, err := s.Crossing(ctx, w.Marks, IDOf(tt.id), nil)
		if err != nil || c.Marked != tt.want || c.Value != tt.wantValue || c.Sealed {
			t.Errorf("%s: %+v, %v; want %d, %v, unsealed", tt.id, c, err, tt.wantValue, tt.want)
		}
	}
	// Something else wrote the marks: not a mark the scripts write.
	for _, bad := range []string{"x", "-1", "1e3", "99999999999999999999"} {
		id := IDOf("bad-" + bad)
		rdb.HSet(ctx, w.Marks, string(id[:]), bad)
		if c, err := s.Crossing(ctx, w.Marks, id, nil); err != nil || c.Marked {
			t.Errorf("mark %q: %+v, %v; want no crossing", bad, c, err)
		}
	}
	// A key of another type holds no crossing, and is no error to retry.
	other := testWindow(prefix, "other", time.Minute, 2)
	rdb.Set(ctx, other.Marks, "x", time.Minute)
	if c, err := s.Crossing(ctx, other.Marks, IDOf("e2"), []byte("h")); err != nil || c.Marked || c.Sealed {
		t.Errorf("a string under the marks key: %+v, %v; want no crossing", c, err)
	}
}

// A seal is found by the hash it was written with, and only by it; asked
// about none, Crossing says whether the hash holds any. Seals change
// nothing the counting scripts read of the marks: a redelivery of the
// crossing is answered from its mark as before, the events around it are
// not, and the marks keep their lifetime; in each script that marks.
func TestSealsLiveBesideTheMarks(t *testing.T) {
	evs := []sev{{"0:t", 10, "e1", 1, 1, "a"}, {"0:t", 11, "e2", 2, 1, "b"}, {"0:t", 12, "e3", 3, 1, "c"}}
	for _, tt := range []struct {
		name   string
		window func(prefix string) Window
		cross  func(t *testing.T, s *Scripts, w Window) []Counted
	}{
		{"incr_and_check", func(prefix string) Window { return testWindow(prefix, "fixed", time.Minute, 2) },
			func(t *testing.T, s *Scripts, w Window) []Counted { return crossAt(t, s, w) }},
		{"slide_and_check", func(prefix string) Window { return slidingWindow(prefix, "sliding", time.Minute, time.Minute, 2) },
			func(t *testing.T, s *Scripts, w Window) []Counted { return slide(t, s, []Window{w}, evs...) }},
		{"distinct_and_check", func(prefix string) Window {
			return distinctWindow(prefix, "distinct", true, time.Minute, time.Minute, 2)
		},
			func(t *testing.T, s *Scripts, w Window) []Counted { return distinct(t, s, []Window{w}, evs...) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			w := tt.window(prefix)
			first := tt.cross(t, s, w)
			if !first[1].First || first[1].Current != 2 {
				t.Fatalf("answers %+v, want e2 to cross at 2", first)
			}
			ttl := rdb.TTL(ctx, w.Marks).Val()
			h1, h2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
			at := time.UnixMilli(1_700_000_000_123)
			if err := s.Seal(ctx, "", []Seal{{Marks: w.Marks, ID: IDOf("e2"), Hash: h1, At: at}}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name         string
				id           string
				hash         []byte
				marked, seal bool
			}{
				{"the sealed version", "e2", h1, true, true},
				{"another version", "e2", h2, true, false},
				{"any seal", "e2", nil, true, true},
				{"the seal of another event", "e3", h1, false, false},
			} {
				got, err := s.Crossing(ctx, w.Marks, IDOf(c.id), c.hash)
				if err != nil || got.Marked != c.marked || got.Sealed != c.seal || (got.Marked && got.Value != 2) {
					t.Errorf("%s: %+v, %v; want marked %v, sealed %v", c.name, got, err, c.marked, c.seal)
				}
			}
			if got := rdb.HGet(ctx, w.Marks, SealField(IDOf("e2"), h1)).Val(); got != "1700000000123" {
				t.Errorf("seal holds %q, want published_at in ms", got)
			}
			if got := rdb.TTL(ctx, w.Marks).Val(); got > ttl || got < ttl-5*time.Second {
				t.Errorf("marks TTL %v after the seal, want the script's %v", got, ttl)
			}
			// Redelivered: the crossing answered from its mark, the others not.
			if again := tt.cross(t, s, w); !sameCrossings(again, first) {
				t.Errorf("redelivery after the seal: %+v, want the crossing of %+v again", again, first)
			}
		})
	}
}

// A marks hash gone by the time its alert is sealed (evicted, flushed)
// gets the marks' lifetime, not none, and vouches for nothing.
func TestASealWithoutItsMarkVouchesForNothing(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	gone := testWindow(prefix, "gone", time.Minute, 2)
	h := bytes.Repeat([]byte{1}, 32)
	if err := s.Seal(ctx, "", []Seal{{Marks: gone.Marks, ID: IDOf("e2"), Hash: h, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if got := rdb.TTL(ctx, gone.Marks).Val(); got <= 0 || got > s.Retention() {
		t.Errorf("a gone marks hash sealed: TTL %v, want within %v", got, s.Retention())
	}
	if c, err := s.Crossing(ctx, gone.Marks, IDOf("e2"), h); err != nil || c.Marked {
		t.Errorf("a seal without its mark: %+v, %v; want no crossing", c, err)
	}
}

// sameCrossings reports whether a and b cross at the same events, with
// the same values, and neither refused a change.
func sameCrossings(a, b []Counted) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].First != b[i].First || (a[i].First && a[i].Current != b[i].Current) || a[i].Err != nil || b[i].Err != nil {
			return false
		}
	}
	return true
}

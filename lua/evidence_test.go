package lua

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// entriesOf makes entries "<w>:<i>" of window w, i from..to, marking those
// in list.
func entriesOf(w, from, to int, list ...int) []EvidenceEntry {
	var out []EvidenceEntry
	for i := from; i <= to; i++ {
		out = append(out, EvidenceEntry{Window: w, Text: fmt.Sprint(w, ":", i), List: slices.Contains(list, i)})
	}
	return out
}

// texts names entries of window w.
func texts(w int, is ...int) []string {
	var out []string
	for _, i := range is {
		out = append(out, fmt.Sprint(w, ":", i))
	}
	return out
}

// A window's evidence keeps its entries, oldest first, and is trimmed to
// its newest keep when it grows past 2 × keep entries of the call's
// longest; a crossing gets the newest keep entries as of itself, newest
// first.
func TestAddEvidence(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	tests := []struct {
		name  string
		keep  []int             // per window
		calls [][]EvidenceEntry // one call each, in turn
		lists [][]string        // what the last call answers
		kept  map[int][]string  // what each window's evidence holds afterwards
	}{
		// Entries "w:i" take 4 bytes with their separator.
		{"within 2 × keep, kept whole", []int{3}, [][]EvidenceEntry{entriesOf(0, 1, 5)}, nil, map[int][]string{0: texts(0, 1, 2, 3, 4, 5)}},
		{"past 2 × keep, trimmed to keep", []int{2}, [][]EvidenceEntry{entriesOf(0, 1, 5)}, nil, map[int][]string{0: texts(0, 4, 5)}},
		{"trimmed when a call takes it past", []int{2}, [][]EvidenceEntry{entriesOf(0, 1, 3), entriesOf(0, 4, 4), entriesOf(0, 5, 5, 5)},
			[][]string{texts(0, 5, 4)}, map[int][]string{0: texts(0, 4, 5)}},
		{"a crossing's list ends at it", []int{10}, [][]EvidenceEntry{entriesOf(0, 1, 5, 3)}, [][]string{texts(0, 3, 2, 1)},
			map[int][]string{0: texts(0, 1, 2, 3, 4, 5)}},
		{"two crossings in one call", []int{2}, [][]EvidenceEntry{entriesOf(0, 1, 4, 2, 4)}, [][]string{texts(0, 2, 1), texts(0, 4, 3)},
			map[int][]string{0: texts(0, 1, 2, 3, 4)}},
		{"across calls", []int{4}, [][]EvidenceEntry{entriesOf(0, 1, 3), entriesOf(0, 4, 6, 6)}, [][]string{texts(0, 6, 5, 4, 3)},
			map[int][]string{0: texts(0, 1, 2, 3, 4, 5, 6)}},
		{"a crossing alone in its call", []int{10}, [][]EvidenceEntry{entriesOf(0, 1, 2), entriesOf(0, 3, 3, 3)}, [][]string{texts(0, 3, 2, 1)},
			map[int][]string{0: texts(0, 1, 2, 3)}},
		{"windows apart", []int{5, 1}, [][]EvidenceEntry{append(append(entriesOf(0, 1, 1), entriesOf(1, 1, 3)...), entriesOf(0, 2, 2, 2)...)},
			[][]string{texts(0, 2, 1)}, map[int][]string{0: texts(0, 1, 2), 1: texts(1, 3)}},
		// Repeats are the reader's to drop.
		{"a redelivery", []int{10}, [][]EvidenceEntry{entriesOf(0, 1, 3), entriesOf(0, 2, 3, 3)}, [][]string{texts(0, 3, 2, 3, 2, 1)},
			map[int][]string{0: texts(0, 1, 2, 3, 2, 3)}},
		// The trim point is the call's: short entries after long ones trim.
		{"short entries after long ones", []int{2}, [][]EvidenceEntry{{{Text: strings.Repeat("a", 100)}, {Text: strings.Repeat("b", 100)}}, entriesOf(0, 1, 1, 1)},
			[][]string{{"0:1", strings.Repeat("b", 100)}}, map[int][]string{0: {strings.Repeat("b", 100), "0:1"}}},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var windows []EvidenceWindow
			for i, keep := range tt.keep {
				windows = append(windows, EvidenceWindow{Key: fmt.Sprintf("%s:{t}:e%d.%d", prefix, n, i),
					Window: fmt.Sprintf("%s:{t}:w%d.%d", prefix, n, i), Keep: keep, TTL: time.Minute})
			}
			var last *Evidence
			for _, es := range tt.calls {
				last = &Evidence{Windows: windows, Entries: es}
				if err := s.AddEvidence(ctx, []*Evidence{last}); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.EqualFunc(last.Lists, tt.lists, slices.Equal) {
				t.Errorf("lists %q, want %q", last.Lists, tt.lists)
			}
			for i, want := range tt.kept {
				got := storedEvidence(t, rdb.Get(ctx, windows[i].Key).Val())
				if !slices.Equal(got, want) {
					t.Errorf("window %d kept %q, want %q", i, got, want)
				}
			}
		})
	}
}

// storedEvidence reads a window's evidence as evidence_add writes it: its
// entries, oldest first, each starting with the separator.
func storedEvidence(t *testing.T, value string) []string {
	t.Helper()
	if !strings.HasPrefix(value, EvidenceSep) {
		t.Fatalf("evidence %q: not entries", value)
	}
	return strings.Split(value[1:], EvidenceSep)
}

// evidenceBound is the longest a window's evidence is before a call: 2 ×
// MaxEvidence entries of MaxEvidenceText bytes and their separators.
const evidenceBound = 2 * MaxEvidence * (MaxEvidenceText + 1)

// However its entries come, a window's evidence stays within its bound:
// 2 × keep entries of the call's longest, or keep entries after a trim.
func TestEvidenceStaysBounded(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(40, 40))
	for _, keep := range []int{1, 3, MaxEvidence} {
		w := EvidenceWindow{Key: fmt.Sprintf("%s:{t}:e%d", prefix, keep), Window: prefix + ":{t}:w", Keep: keep, TTL: time.Minute}
		for round := range 200 {
			c := &Evidence{Windows: []EvidenceWindow{w}}
			longest := 0
			for range 1 + r.IntN(8) {
				text := strings.Repeat("x", r.IntN(MaxEvidenceText+1))
				longest = max(longest, len(text)+1)
				c.Entries = append(c.Entries, EvidenceEntry{Text: text, List: r.IntN(5) == 0})
			}
			if err := s.AddEvidence(ctx, []*Evidence{c}); err != nil {
				t.Fatal(err)
			}
			got := rdb.Get(ctx, w.Key).Val()
			entries := storedEvidence(t, got)
			if len(got) > 2*keep*longest && len(entries) > keep {
				t.Fatalf("keep %d, round %d: %d entries in %d bytes, past 2 × keep of %d and not trimmed", keep, round, len(entries), len(got), longest)
			}
			if len(got) > evidenceBound {
				t.Fatalf("keep %d, round %d: %d bytes, past the bound", keep, round, len(got))
			}
			for _, l := range c.Lists {
				if len(l) > keep {
					t.Fatalf("keep %d: a list of %d", keep, len(l))
				}
			}
		}
	}
}

// A value at the evidence's key that evidence_add did not write is
// replaced, whatever it claims: at once when it is of another type or
// longer than the bound, else when the evidence is next read. No list
// holds any of it, and the evidence then starts afresh, with a TTL.
func TestEvidenceReplacesWhatItDidNotWrite(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	str := func(v string) func(string) { return func(key string) { rdb.Set(ctx, key, v, 0) } }
	for _, tt := range []struct {
		name string
		set  func(key string)
		// left is set when a call that neither crosses nor trims leaves it
		// (appends to it): short strings.
		left bool
	}{
		{"a plain string", str("hello"), true},
		{"the form before (a count, entries newest first)", str("\x02b\x1ea\x1e"), true},
		{"an entry too long (read by the trim)", str("\x1e" + strings.Repeat("a", MaxEvidenceText+1)), false},
		{"longer than the bound", str(strings.Repeat("\x1ea", evidenceBound)), false},
		// APPEND and GET on a hash raise WRONGTYPE: the batch would fail on every retry.
		{"a hash", func(key string) { rdb.HSet(ctx, key, "f", "v") }, false},
		{"a list", func(key string) { rdb.RPush(ctx, key, "a", "b") }, false},
	} {
		for _, read := range []string{"by the call", "by a later call"} {
			t.Run(tt.name+", "+read, func(t *testing.T) {
				key := prefix + ":{t}:e:" + tt.name + read
				tt.set(key)
				w := []EvidenceWindow{{Key: key, Window: prefix + ":{t}:w", Keep: 3, TTL: time.Minute}}
				calls := []*Evidence{{Windows: w, Entries: []EvidenceEntry{{Text: "x"}, {Text: "y", List: true}}}}
				want := "\x1ex\x1ey"
				if read == "by a later call" {
					calls = []*Evidence{{Windows: w, Entries: []EvidenceEntry{{Text: "x"}}}, {Windows: w, Entries: []EvidenceEntry{{Text: "y", List: true}}}}
					if tt.left {
						want = "\x1ey" // x went with the value it was appended to
					}
				}
				for _, e := range calls {
					if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil {
						t.Fatal(err)
					}
				}
				if got := rdb.Get(ctx, key).Val(); got != want {
					t.Errorf("evidence %q, want %q", got, want)
				}
				if l := calls[len(calls)-1].Lists; len(l) != 1 || !slices.Equal(l[0], storedEvidenceReversed(want)) {
					t.Errorf("list %q, want %q", l, storedEvidenceReversed(want))
				}
				if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
					t.Errorf("evidence lives %v, want its TTL", ttl)
				}
			})
		}
	}
}

// storedEvidenceReversed is a stored value's entries, newest first.
func storedEvidenceReversed(value string) []string {
	l := strings.Split(value[1:], EvidenceSep)
	slices.Reverse(l)
	return l
}

// Evidence lives no longer than its window; without one, for its TTL; and
// adding to a fixed window's, or trimming it, does not make it live longer.
func TestEvidenceLivesWithItsWindow(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	window, key := prefix+":{t}:w", prefix+":{t}:e"
	add := func(ttl time.Duration) {
		t.Helper()
		// Three entries where one is kept: each call trims.
		e := &Evidence{Windows: []EvidenceWindow{{Key: key, Window: window, Keep: 1, TTL: ttl}},
			Entries: []EvidenceEntry{{Text: "x"}, {Text: "y"}, {Text: "z"}}}
		if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Set(ctx, window, "1", 5*time.Second)
	add(time.Hour)
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 5*time.Second {
		t.Errorf("evidence of a window with 5s left lives %v", ttl)
	}
	rdb.Expire(ctx, window, time.Hour)
	add(time.Hour)
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 5*time.Second {
		t.Errorf("evidence added to lives %v, want still at most 5s", ttl)
	}
	rdb.Del(ctx, window, key)
	add(time.Hour)
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 59*time.Minute {
		t.Errorf("evidence without a window lives %v, want its TTL, 1h", ttl)
	}
}

// A sliding window lives on after each change: its evidence, written to,
// lives as long as it does again, never longer.
func TestSlidingEvidenceLivesAsLongAsItsWindow(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	window, key := prefix+":{t}:w", prefix+":{t}:e"
	add := func() {
		t.Helper()
		e := &Evidence{Windows: []EvidenceWindow{{Key: key, Window: window, Keep: 5, TTL: 2 * time.Hour, Slides: true}},
			Entries: []EvidenceEntry{{Text: "x"}}}
		if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Set(ctx, window, "1", 5*time.Second)
	add()
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 5*time.Second {
		t.Errorf("evidence of a window with 5s left lives %v", ttl)
	}
	rdb.Expire(ctx, window, time.Hour) // a change renewed the window
	add()
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("evidence of a renewed window lives %v, want the window's hour", ttl)
	}
	rdb.Persist(ctx, window) // no TTL: the list keeps its own
	add()
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("evidence of a window without a TTL lives %v, want the hour it had", ttl)
	}
}

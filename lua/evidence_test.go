package lua

import (
	"errors"
	"fmt"
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

// A window's evidence keeps its latest entries, newest first; a crossing
// gets the entries as of itself.
func TestAddEvidence(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	tests := []struct {
		name  string
		keep  []int             // per window
		calls [][]EvidenceEntry // one call each, in turn
		lists [][]string        // what the last call answers
		kept  map[int][]string  // what each window's list holds afterwards
	}{
		{"the latest, newest first", []int{3}, [][]EvidenceEntry{entriesOf(0, 1, 5)}, nil, map[int][]string{0: texts(0, 5, 4, 3)}},
		{"a crossing's list ends at it", []int{10}, [][]EvidenceEntry{entriesOf(0, 1, 5, 3)}, [][]string{texts(0, 3, 2, 1)},
			map[int][]string{0: texts(0, 5, 4, 3, 2, 1)}},
		{"two crossings in one call", []int{2}, [][]EvidenceEntry{entriesOf(0, 1, 4, 2, 4)}, [][]string{texts(0, 2, 1), texts(0, 4, 3)},
			map[int][]string{0: texts(0, 4, 3)}},
		{"across calls", []int{4}, [][]EvidenceEntry{entriesOf(0, 1, 3), entriesOf(0, 4, 6, 6)}, [][]string{texts(0, 6, 5, 4, 3)},
			map[int][]string{0: texts(0, 6, 5, 4, 3)}},
		{"a crossing alone in its call", []int{10}, [][]EvidenceEntry{entriesOf(0, 1, 2), entriesOf(0, 3, 3, 3)}, [][]string{texts(0, 3, 2, 1)},
			map[int][]string{0: texts(0, 3, 2, 1)}},
		{"windows apart", []int{5, 1}, [][]EvidenceEntry{append(append(entriesOf(0, 1, 1), entriesOf(1, 1, 3)...), entriesOf(0, 2, 2, 2)...)},
			[][]string{texts(0, 2, 1)}, map[int][]string{0: texts(0, 2, 1), 1: texts(1, 3)}},
		// Repeats are the reader's to drop.
		{"a redelivery", []int{10}, [][]EvidenceEntry{entriesOf(0, 1, 3), entriesOf(0, 2, 3, 3)}, [][]string{texts(0, 3, 2, 3, 2, 1)},
			map[int][]string{0: texts(0, 3, 2, 3, 2, 1)}},
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
// entry count as one byte, then the entries, each ending with the
// separator; the count must be right.
func storedEvidence(t *testing.T, value string) []string {
	t.Helper()
	if value == "" || !strings.HasSuffix(value, EvidenceSep) {
		t.Fatalf("evidence %q: not a count and entries", value)
	}
	entries := strings.Split(value[1:len(value)-1], EvidenceSep)
	if int(value[0]) != len(entries) {
		t.Fatalf("evidence %q counts %d entries, holds %d", value, value[0], len(entries))
	}
	return entries
}

// A value at the evidence's key that evidence_add did not write is
// replaced, whatever it claims; the evidence then starts afresh.
func TestEvidenceReplacesWhatItDidNotWrite(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	str := func(v string) func(string) { return func(key string) { rdb.Set(ctx, key, v, time.Minute) } }
	for _, tt := range []struct {
		name string
		set  func(key string)
	}{
		{"a plain string", str("hello")},
		{"a count of 0", str("\x00a\x1e")},
		{"a count over 20", str("\x15a\x1e")},
		{"a count larger than its entries", str("\x05a\x1eb\x1e")},
		// GET on a hash raises WRONGTYPE: the batch would fail on every retry.
		{"a hash", func(key string) { rdb.HSet(ctx, key, "f", "v") }},
		{"a list", func(key string) { rdb.RPush(ctx, key, "a", "b") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := prefix + ":{t}:e:" + tt.name
			tt.set(key)
			e := &Evidence{Windows: []EvidenceWindow{{Key: key, Window: prefix + ":{t}:w", Keep: 3, TTL: time.Minute}},
				Entries: []EvidenceEntry{{Text: "x"}, {Text: "y", List: true}}}
			if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil {
				t.Fatal(err)
			}
			got := rdb.Get(ctx, key).Val()
			if len(got) == 0 || got[0] > 3 {
				t.Fatalf("evidence %q: its count is not within keep", got)
			}
			if !strings.HasPrefix(got[1:], "y\x1ex\x1e") {
				t.Errorf("evidence %q: want the call's entries first", got)
			}
			if len(e.Lists) != 1 || len(e.Lists[0]) > 3 || e.Lists[0][0] != "y" {
				t.Errorf("list %q, want at most 3 entries, y first", e.Lists)
			}
		})
	}
}

// Evidence lives no longer than its window; without one, for its TTL; and
// adding to a fixed window's does not make it live longer.
func TestEvidenceLivesWithItsWindow(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	window, key := prefix+":{t}:w", prefix+":{t}:e"
	add := func(ttl time.Duration) {
		t.Helper()
		e := &Evidence{Windows: []EvidenceWindow{{Key: key, Window: window, Keep: 5, TTL: ttl}}, Entries: []EvidenceEntry{{Text: "x"}}}
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

// Unusable arguments write nothing.
func TestEvidenceRefusesUnusableArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	key, window := prefix+":{t}:e", prefix+":{t}:w"
	tests := []struct {
		name string
		args []any
	}{
		{"no windows", []any{0, 5, 60, "0", 1, "x", "0"}},
		{"keep 0", []any{1, 0, 60, "0", 1, "x", "0"}},
		{"keep 21", []any{1, 21, 60, "0", 1, "x", "0"}},
		{"ttl 0", []any{1, 5, 0, "0", 1, "x", "0"}},
		{"a bad sliding flag", []any{1, 5, 60, "yes", 1, "x", "0"}},
		{"window 2 of 1", []any{1, 5, 60, "0", 2, "x", "0"}},
		{"a bad mark", []any{1, 5, 60, "0", 1, "x", "yes"}},
		{"an entry cut short", []any{1, 5, 60, "0", 1, "x"}},
		{"a text too long", []any{1, 5, 60, "0", 1, strings.Repeat("x", 513), "0"}},
		{"a text holding the separator", []any{1, 5, 60, "0", 1, "x\x1ey", "0"}},
		{"a bad entry after a good one", []any{1, 5, 60, "0", 1, "x", "0", 0, "y", "0"}},
		// Numbers are digit strings, as the engine sends them: what Lua's
		// tonumber would also take is refused.
		{"a window count with a space", []any{" 1", 5, 60, "0", 1, "x", "0"}},
		{"keep 5.0", []any{1, "5.0", 60, "0", 1, "x", "0"}},
		{"a window index with a leading zero", []any{1, 5, 60, "0", "01", "x", "0"}},
		{"a window index in hex", []any{1, 5, 60, "0", "0x1", "x", "0"}},
		{"no arguments", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := evidenceAdd.Run(ctx, rdb, []string{key, window}, tt.args...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := evidenceLists(v, &Evidence{}); !errors.Is(err, ErrInvalidArguments) {
				t.Errorf("reply %v: want the error contract", v)
			}
			if rdb.Exists(ctx, key).Val() != 0 {
				t.Error("written")
			}
		})
	}
	w := EvidenceWindow{Key: key, Window: window, Keep: 5, TTL: time.Minute}
	other := w
	other.Window = "elsewhere"
	noKeep := w
	noKeep.Keep = 0
	bad := []*Evidence{
		{Windows: []EvidenceWindow{noKeep}, Entries: []EvidenceEntry{{Text: "x"}}},
		{Windows: []EvidenceWindow{other}, Entries: []EvidenceEntry{{Text: "x"}}},
		{Windows: []EvidenceWindow{w}},
		{Windows: []EvidenceWindow{w}, Entries: []EvidenceEntry{{Window: 1, Text: "x"}}},
		{Windows: []EvidenceWindow{w}, Entries: []EvidenceEntry{{Text: strings.Repeat("x", 513)}}},
		{Windows: []EvidenceWindow{w}, Entries: []EvidenceEntry{{Text: "x" + EvidenceSep}}},
	}
	for _, e := range bad {
		// Refused as the script would refuse it: no retry makes it usable.
		if err := s.AddEvidence(ctx, []*Evidence{e}); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("AddEvidence(%+v) = %v, want ErrInvalidArguments", e, err)
		}
	}
}

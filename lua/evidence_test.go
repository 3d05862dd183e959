package lua

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// kept names the entries a window's evidence holds for test orders (textOf)
// at the values given, in their order.
func kept(entries ...string) []string { return entries }

// entry is textOf's entry as the script keeps it: the window's value after
// the order put in its place.
func entry(id string, v int64) string { return fmt.Sprintf("1\x1f1\x1f%d\x1f%s\x1f%s\x1f", v, id, id) }

// keeping is w keeping keep orders from the value from on.
func keeping(w Window, keep int, from int64) Window {
	w.Keep, w.KeepFrom, w.EvidenceKey = keep, from, w.Key+":evidence"
	return w
}

// evs is n orders of one partition, ids o<first>.., one a call's worth.
func orders(first, n int) []ev {
	var out []ev
	for i := first; i < first+n; i++ {
		out = append(out, ev{"0:t", int64(i), fmt.Sprint("o", i), 1})
	}
	return out
}

// A window's evidence keeps its orders from its value's from on and below
// its threshold, and the crossing, newest first, at most keep; the crossing
// answers the evidence as of itself.
func TestCountingKeepsEvidence(t *testing.T) {
	tests := []struct {
		name      string
		threshold int64
		keep      int
		from      int64
		calls     [][]ev   // one incr_and_check call each, in turn
		lists     []string // every crossing's list, newest first
		stored    []string // what the window's evidence holds afterwards
	}{
		{"from its value on, up to the crossing", 5, 3, 3, [][]ev{orders(1, 6)},
			kept(entry("o5", 5), entry("o4", 4), entry("o3", 3)), kept(entry("o5", 5), entry("o4", 4), entry("o3", 3))},
		{"the threshold within keep: from the first order", 3, 10, 1, [][]ev{orders(1, 2), orders(3, 3)},
			kept(entry("o3", 3), entry("o2", 2), entry("o1", 1)), kept(entry("o3", 3), entry("o2", 2), entry("o1", 1))},
		{"a crossing alone in its call", 3, 10, 1, [][]ev{orders(1, 2), orders(3, 1)},
			kept(entry("o3", 3), entry("o2", 2), entry("o1", 1)), kept(entry("o3", 3), entry("o2", 2), entry("o1", 1))},
		{"keep cuts the oldest", 4, 2, 3, [][]ev{orders(1, 1), orders(2, 1), orders(3, 1), orders(4, 2)},
			kept(entry("o4", 4), entry("o3", 3)), kept(entry("o4", 4), entry("o3", 3))},
		// Repeats are the reader's to drop. The orders before the crossing are
		// answered the window's value as it is, past the threshold: only
		// the crossing is kept again.
		{"a redelivery", 3, 10, 1, [][]ev{orders(1, 3), orders(1, 3)},
			kept(entry("o3", 3), entry("o2", 2), entry("o1", 1), entry("o3", 3), entry("o3", 3), entry("o2", 2), entry("o1", 1)),
			kept(entry("o3", 3), entry("o3", 3), entry("o2", 2), entry("o1", 1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			w := keeping(testWindow(prefix, "w", time.Minute, tt.threshold), tt.keep, tt.from)
			var lists []string
			for _, call := range tt.calls {
				for _, res := range count(t, s, []Window{w}, call...) {
					if res.First {
						lists = append(lists, EvidenceEntries(res.Evidence)...)
					} else if res.Evidence != "" {
						t.Errorf("%+v: evidence without a crossing", res)
					}
				}
			}
			if !slices.Equal(lists, tt.lists) {
				t.Errorf("lists %q, want %q", lists, tt.lists)
			}
			if got := storedEvidence(t, rdb.Get(t.Context(), w.EvidenceKey).Val()); !slices.Equal(got, tt.stored) {
				t.Errorf("kept %q, want %q", got, tt.stored)
			}
		})
	}
}

// A call's windows keep evidence apart, and a window that keeps none
// writes none, also in a call beside one that does; the crossing's list
// is its own window's.
func TestEvidenceOfWindowsApart(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	a := keeping(testWindow(prefix, "a", time.Minute, 50), 5, 1)
	b := testWindow(prefix, "b", time.Minute, 50)
	c := keeping(testWindow(prefix, "c", time.Minute, 100), 1, 50)
	res := count(t, s, []Window{a, b, c}, ev{"0:t", 1, "o1", 40}, ev{"0:t", 2, "o2", 40})
	if want := kept(entry("o2", 80), entry("o1", 40)); !res[3].First || !slices.Equal(EvidenceEntries(res[3].Evidence), want) {
		t.Errorf("a's crossing %+v: want its list %q", res[3], want)
	}
	if !res[4].First || res[4].Evidence != "" {
		t.Errorf("b's crossing %+v: want no list", res[4])
	}
	if got := storedEvidence(t, rdb.Get(t.Context(), c.EvidenceKey).Val()); !slices.Equal(got, kept(entry("o2", 80))) {
		t.Errorf("c kept %q", got)
	}
	if rdb.Exists(t.Context(), b.Key+":evidence").Val() != 0 {
		t.Error("a window without evidence kept some")
	}
}

// Sliding and distinct windows keep theirs the same way, refunds and late
// orders none; their crossings answer theirs.
func TestSlidingAndDistinctKeepEvidence(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	sw := keeping(slidingWindow(prefix, "s", time.Minute, time.Minute, 3), 10, 1)
	got := slide(t, s, []Window{sw}, sev{"0:t", 1, "o1", 100, 1, ""}, sev{"0:t", 2, "r1", 101, -1, ""},
		sev{"0:t", 3, "o2", 102, 1, ""}, sev{"0:t", 4, "late", -100, 1, ""}, sev{"0:t", 5, "o3", 103, 1, ""}, sev{"0:t", 6, "o4", 104, 1, ""})
	want := kept(entry("o4", 3), entry("o3", 2), entry("o2", 1), entry("o1", 1))
	if !got[3].Late || !got[5].First || !slices.Equal(EvidenceEntries(got[5].Evidence), want) {
		t.Errorf("sliding: late %+v, crossing %+v, want its list %q", got[3], got[5], want)
	}
	dw := keeping(distinctWindow(prefix, "d", true, time.Minute, time.Minute, 2), 10, 1)
	got = distinct(t, s, []Window{dw}, sev{"0:t", 1, "o1", 100, 1, "a"}, sev{"0:t", 2, "o2", 101, 1, "a"}, sev{"0:t", 3, "o3", 102, 1, "b"})
	if want := kept(entry("o3", 2), entry("o2", 1), entry("o1", 1)); !got[2].First || !slices.Equal(EvidenceEntries(got[2].Evidence), want) {
		t.Errorf("distinct crossing %+v, want its list %q", got[2], want)
	}
	for _, w := range []Window{sw, dw} {
		ends, windowEnds := rdb.PExpireTime(t.Context(), w.EvidenceKey).Val(), rdb.PExpireTime(t.Context(), w.Key).Val()
		if ends <= 0 || ends != windowEnds {
			t.Errorf("%s's evidence ends at %v, its window at %v", w.Key, ends, windowEnds)
		}
	}
}

// storedEvidence reads a window's evidence as the scripts write it: its
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

// A value at the evidence's key that the scripts did not write is
// replaced, whatever it claims; the evidence then starts afresh, and the
// call counts.
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
			w := keeping(testWindow(prefix+":"+tt.name, "w", time.Minute, 2), 3, 1)
			tt.set(w.EvidenceKey)
			res := count(t, s, []Window{w}, orders(1, 2)...)
			got := rdb.Get(ctx, w.EvidenceKey).Val()
			if len(got) == 0 || got[0] > 3 {
				t.Fatalf("evidence %q: its count is not within keep", got)
			}
			if !strings.HasPrefix(got[1:], entry("o2", 2)+EvidenceSep+entry("o1", 1)+EvidenceSep) {
				t.Errorf("evidence %q: want the call's entries first", got)
			}
			if list := EvidenceEntries(res[1].Evidence); !res[1].First || len(list) > 3 || list[0] != entry("o2", 2) {
				t.Errorf("crossing %+v: want at most 3 entries, o2 first", res[1])
			}
		})
	}
}

// Evidence lives no longer than its fixed window, and adding to it does
// not make it live longer; a window without a TTL gives it its length.
func TestEvidenceLivesWithItsWindow(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := keeping(testWindow(prefix, "w", time.Hour, 100), 5, 1)
	count(t, s, []Window{w}, orders(1, 1)...)
	rdb.Expire(ctx, w.Key, 5*time.Second)
	rdb.Expire(ctx, w.EvidenceKey, 5*time.Second)
	count(t, s, []Window{w}, orders(2, 1)...)
	if ttl := rdb.PTTL(ctx, w.EvidenceKey).Val(); ttl <= 0 || ttl > 5*time.Second {
		t.Errorf("evidence added to lives %v, want still at most 5s", ttl)
	}
	if got := storedEvidence(t, rdb.Get(ctx, w.EvidenceKey).Val()); len(got) != 2 {
		t.Errorf("kept %q, want both orders", got)
	}
	rdb.Del(ctx, w.EvidenceKey)
	rdb.Persist(ctx, w.Key) // below its threshold, a window without a TTL keeps none
	count(t, s, []Window{w}, orders(3, 1)...)
	if ttl := rdb.TTL(ctx, w.EvidenceKey).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("evidence of a window without a TTL lives %v, want the window's length, 1h", ttl)
	}
}

// A sliding window lives on after each change: its evidence, written to,
// lives as long as it does again.
func TestSlidingEvidenceLivesAsLongAsItsWindow(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := keeping(slidingWindow(prefix, "s", time.Minute, time.Minute, 100), 5, 1)
	slide(t, s, []Window{w}, sev{"0:t", 1, "o1", 100, 1, ""})
	rdb.PExpire(ctx, w.EvidenceKey, time.Second) // as if about to end
	slide(t, s, []Window{w}, sev{"0:t", 2, "o2", 150, 1, ""})
	ends, windowEnds := rdb.PExpireTime(ctx, w.EvidenceKey).Val(), rdb.PExpireTime(ctx, w.Key).Val()
	if left := rdb.PTTL(ctx, w.EvidenceKey).Val(); left <= time.Minute || ends != windowEnds {
		t.Errorf("evidence lives %v and ends at %v, its window at %v: want the window's life", left, ends, windowEnds)
	}
}

// Unusable evidence arguments write nothing: the call's own (a window's
// keep, its value to keep from, its index) refuse the call; a text that
// is too long or holds the entries' separator is not kept, and its change
// counts all the same.
func TestEvidenceRefusesUnusableArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := keeping(testWindow(prefix, "w", time.Minute, 5), 5, 1)
	keys := []string{offsetsOf(w), w.Key, w.Marks, w.EvidenceKey}
	args := func(index, keep, from any, text string) []any {
		return []any{"0:t", 60, 1, 60, 5, index, keep, from, 1, 1, "abcdefgh", 1, text}
	}
	good := "1\x1f1\x1f\x1fx"
	tests := []struct {
		name string
		keys []string
		args []any
		call bool // the whole call refused, else the change
	}{
		{"keep 0", keys, args(1, 0, 1, good), true},
		{"keep 21", keys, args(1, 21, 1, good), true},
		{"keep 5.0", keys, args(1, "5.0", 1, good), true},
		{"from 0", keys, args(1, 5, 0, good), true},
		{"from past 18 digits", keys, args(1, 5, strings.Repeat("9", 19), good), true},
		{"window 2 of 1", keys, args(2, 5, 1, good), true},
		{"a window index with a leading zero", keys, args("01", 5, 1, good), true},
		{"more evidence keys than windows", append(keys, w.EvidenceKey+"2"), args(1, 5, 1, good), true},
		{"the windows' arguments cut short", keys, []any{"0:t", 60, 1, 60, 5, 1, 5}, true},
		{"a change without its text", keys, args(1, 5, 1, good)[:12], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := incrAndCheck.Run(ctx, rdb, tt.keys, tt.args...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if len(v) != 2 || v[0] != -1 || v[1] != -1 {
				t.Errorf("reply %v: want the error contract", v)
			}
			if n := rdb.Exists(ctx, w.Key, w.EvidenceKey).Val(); n != 0 {
				t.Errorf("%d keys written", n)
			}
			if got := rdb.Exists(ctx, offsetsOf(w)).Val(); tt.call && got != 0 {
				t.Error("a refused call wrote its offsets")
			}
			rdb.Del(ctx, offsetsOf(w))
		})
	}
	for _, text := range []string{strings.Repeat("x", 513), "x\x1ey", good} {
		v, err := incrAndCheck.Run(ctx, rdb, keys, args(1, 5, 1, text)...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		// The good text, the positive control, is kept.
		if kept := rdb.Exists(ctx, w.EvidenceKey).Val(); len(v) != 2 || v[0] != 1 || (kept == 1) != (text == good) {
			t.Errorf("text %q: reply %v, evidence written %d: want the change counted, and kept only if good", text, v, kept)
		}
		// A crossing whose text is not kept answers '' for its list: its
		// alert goes, without evidence.
		crossing := []any{"0:t", 60, 1, 60, 2, 1, 5, 1, 1, 2, "abcdefgh", 1, text} // threshold 2, at offset 2
		reply, err := incrAndCheck.Run(ctx, rdb, keys, crossing...).Slice()
		if want := []any{int64(2), int64(1), ""}; err != nil || (text != good && fmt.Sprint(reply) != fmt.Sprint(want)) {
			t.Errorf("text %q: crossing answered %q, %v; want %q", text, reply, err, want)
		}
		rdb.Del(ctx, w.Key, w.Marks, w.EvidenceKey, offsetsOf(w))
	}
	other := w
	other.EvidenceKey = "elsewhere"
	noFrom := w
	noFrom.KeepFrom = 0
	for _, c := range []*Count{
		{Windows: []Window{noFrom}, Changes: []Change{{Text: good}}},
		{Windows: []Window{keeping(w, MaxEvidence+1, 1)}, Changes: []Change{{Text: good}}},
		{Windows: []Window{other}, Changes: []Change{{Text: good}}},
		{Windows: []Window{w}, Changes: []Change{{Text: strings.Repeat("x", MaxEvidenceText+1)}}},
		{Windows: []Window{w}, Changes: []Change{{Text: "x" + EvidenceSep}}},
		{Windows: []Window{testWindow(prefix, "none", time.Minute, 5)}, Changes: []Change{{Text: good}}},
	} {
		c.Source, c.Offsets = "0:t", offsetsOf(w)
		// Refused as the script would refuse it: no retry makes it usable.
		if err := s.Batch().Count(c); err == nil {
			t.Errorf("Count(%+v) taken", c)
		}
	}
}

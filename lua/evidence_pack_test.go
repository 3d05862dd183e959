package lua

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// evWindow is one window of an evidence_add packing made by hand.
type evWindow struct{ keep, ttl, slides, count int }

// evHead is evidence_add's ARGV[1] made by hand: n, each window,
// then each mark (window, place).
func evHead(n int, ws []evWindow, marks ...[2]int) packing {
	p := packing{}.u8(n)
	for _, w := range ws {
		p = p.u8(w.keep).u32(int64(w.ttl)).u8(w.slides).u16(w.count)
	}
	for _, m := range marks {
		p = p.u8(m[0]).u16(m[1])
	}
	return p
}

// evOne is a usable window of count entries.
func evOne(count int) evWindow { return evWindow{keep: 5, ttl: 60, slides: 0, count: count} }

// Encoded, a call is the layout evidence_add's header gives: its numbers
// in ARGV[1], the marks in the entries' order; each window's entries
// joined, each after the separator; a window with none, an empty one; a TTL past
// 2^32-1 s as 0, which the script refuses.
func TestEvidencePackingIsTheScriptsLayout(t *testing.T) {
	c := &Evidence{
		Windows: []EvidenceWindow{
			{Key: "{t}:e0", Window: "{t}:w0", Keep: 3, TTL: 90 * time.Second},
			{Key: "{t}:e1", Window: "{t}:w1", Keep: 20, TTL: 1500 * time.Millisecond, Slides: true},
			{Key: "{t}:e2", Window: "{t}:w2", Keep: 1, TTL: 1 << 62},
		},
		Entries: []EvidenceEntry{
			{Window: 1, Text: "a", List: true}, {Window: 0, Text: "bb"}, {Window: 1, Text: ""},
			{Window: 0, Text: "c", List: true}, {Window: 1, Text: "d", List: true},
		},
	}
	keys, args, err := packEvidence(c)
	if err != nil {
		t.Fatal(err)
	}
	head := evHead(3, []evWindow{{3, 90, 0, 2}, {20, 2, 1, 3}, {1, 0, 0, 0}}, [2]int{2, 1}, [2]int{1, 2}, [2]int{2, 3})
	want := []any{[]byte(head), []byte("\x1ebb\x1ec"), []byte("\x1ea\x1e\x1ed"), []byte("")}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("arguments %q, want %q", args, want)
	}
	if wantKeys := []string{"{t}:e0", "{t}:w0", "{t}:e1", "{t}:w1", "{t}:e2", "{t}:w2"}; !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("keys %q, want %q", keys, wantKeys)
	}
}

// Unusable arguments write nothing: each check of evidence_add's, alone.
func TestEvidenceRefusesUnusableArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	keysOf := func(n int) []string {
		var keys []string
		for i := range n {
			keys = append(keys, fmt.Sprintf("%s:{t}:e%d", prefix, i), fmt.Sprintf("%s:{t}:w%d", prefix, i))
		}
		return keys
	}
	windows65, entries65 := []evWindow{}, []any{}
	for range 65 {
		windows65, entries65 = append(windows65, evOne(1)), append(entries65, "\x1ex")
	}
	two := []evWindow{evOne(1), evOne(1)}
	tests := []struct {
		name string
		keys []string
		args []any
	}{
		{"no arguments", keysOf(1), nil},
		{"an empty head", keysOf(1), []any{"", "\x1ex"}},
		{"65 windows", keysOf(65), append([]any{[]byte(evHead(65, windows65))}, entries65...)},
		{"keys not two a window", keysOf(1)[:1], []any{[]byte(evHead(1, []evWindow{evOne(1)})), "\x1ex"}},
		{"an argument past the windows'", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)})), "\x1ex", "\x1ey"}},
		{"a window's argument missing", keysOf(2), []any{[]byte(evHead(2, two)), "\x1ex"}},
		{"a head shorter than its windows", keysOf(2), []any{[]byte(evHead(2, two[:1])), "\x1ex", "\x1ey"}},
		{"a head a mark shorter than its windows", keysOf(2), []any{[]byte(evHead(2, two)[:14]), "\x1ex", "\x1ey"}},
		{"a trailing byte", keysOf(1), []any{[]byte(append(evHead(1, []evWindow{evOne(1)}), 0)), "\x1ex"}},
		{"keep 0", keysOf(1), []any{[]byte(evHead(1, []evWindow{{0, 60, 0, 1}})), "\x1ex"}},
		{"keep 21", keysOf(1), []any{[]byte(evHead(1, []evWindow{{21, 60, 0, 1}})), "\x1ex"}},
		{"ttl 0", keysOf(1), []any{[]byte(evHead(1, []evWindow{{5, 0, 0, 1}})), "\x1ex"}},
		{"a sliding flag of 2", keysOf(1), []any{[]byte(evHead(1, []evWindow{{5, 60, 2, 1}})), "\x1ex"}},
		{"no entries", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(0)})), ""}},
		{"4097 entries", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(4097)})), strings.Repeat("\x1e", 4097)}},
		{"entries for a window of none", keysOf(2), []any{[]byte(evHead(2, []evWindow{evOne(1), evOne(0)})), "\x1ex", "\x1ey"}},
		{"entries not starting with the separator", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)})), "x"}},
		{"none where one is due", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)})), ""}},
		{"a text of 513 bytes", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)})), "\x1e" + strings.Repeat("x", 513)}},
		{"a text of 513 bytes before another", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(2)})), "\x1e" + strings.Repeat("x", 513) + "\x1ey"}},
		{"fewer entries than its count", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(2)})), "\x1ex"}},
		{"more entries than its count", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)})), "\x1ex\x1ey"}},
		{"a mark to window 0", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)}, [2]int{0, 1})), "\x1ex"}},
		{"a mark to window 2 of 1", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)}, [2]int{2, 1})), "\x1ex"}},
		{"a mark to entry 0", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)}, [2]int{1, 0})), "\x1ex"}},
		{"a mark past the window's entries", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(1)}, [2]int{1, 2})), "\x1ex"}},
		{"an entry marked twice", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(2)}, [2]int{1, 1}, [2]int{1, 1})), "\x1ex\x1ey"}},
		{"marks out of order", keysOf(1), []any{[]byte(evHead(1, []evWindow{evOne(2)}, [2]int{1, 2}, [2]int{1, 1})), "\x1ex\x1ey"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := evidenceAdd.Run(ctx, rdb, tt.keys, tt.args...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := evidenceLists(v, &Evidence{}); !errors.Is(err, ErrInvalidArguments) {
				t.Errorf("reply %v: want the error contract", v)
			}
			if n := rdb.Exists(ctx, tt.keys...).Val(); n != 0 {
				t.Errorf("%d keys written", n)
				rdb.Del(ctx, tt.keys...) // for the cases after
			}
		})
	}
	// The good call each case spoils is taken.
	if v, err := evidenceAdd.Run(ctx, rdb, keysOf(2), []byte(evHead(2, []evWindow{evOne(2), evOne(0)}, [2]int{1, 1}, [2]int{1, 2})),
		"\x1ex\x1ey", "").Slice(); err != nil || !reflect.DeepEqual(v, []any{"\x1ex", "\x1ex\x1ey"}) {
		t.Fatalf("a good call: %q, %v", v, err)
	}
	refusedBeforeSent(t, s, prefix)
}

// refusedBeforeSent: calls the encoder would not send, or packs so that
// the script refuses them, are ErrInvalidArguments.
func refusedBeforeSent(t *testing.T, s *Scripts, prefix string) {
	ctx := t.Context()
	key, window := prefix+":{t}:e", prefix+":{t}:w"
	w := EvidenceWindow{Key: key, Window: window, Keep: 5, TTL: time.Minute}
	other := w
	other.Window = "elsewhere"
	noKeep := w
	noKeep.Keep = 0
	forever := w
	forever.TTL = 1 << 62
	bad := []*Evidence{
		{Windows: []EvidenceWindow{noKeep}, Entries: []EvidenceEntry{{Text: "x"}}},
		{Windows: []EvidenceWindow{other}, Entries: []EvidenceEntry{{Text: "x"}}},
		{Windows: []EvidenceWindow{w}},
		{Windows: []EvidenceWindow{w}, Entries: []EvidenceEntry{{Window: 1, Text: "x"}}},
		{Windows: []EvidenceWindow{w}, Entries: []EvidenceEntry{{Text: strings.Repeat("x", 513)}}},
		{Windows: []EvidenceWindow{w}, Entries: []EvidenceEntry{{Text: "x" + EvidenceSep}}},
		{Windows: []EvidenceWindow{forever}, Entries: []EvidenceEntry{{Text: "x"}}},
	}
	for _, e := range bad {
		// Refused as the script would refuse it: no retry makes it usable.
		if err := s.AddEvidence(ctx, []*Evidence{e}); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("AddEvidence(%+v) = %v, want ErrInvalidArguments", e, err)
		}
	}
}

// Where Lua has no struct library (miniredis: the demo, the backtest's
// --lua), evidence_add decodes its packing with the prelude's decoder and
// does as on Redis: the same lists, the same evidence.
func TestEvidenceWithoutStructDoesAsOnRedis(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	mr := miniredis.RunT(t)
	mrdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = mrdb.Close() })
	ms, err := New(Config{}, mrdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var ws []EvidenceWindow
	for i, keep := range []int{1, 3, 20} {
		ws = append(ws, EvidenceWindow{Key: fmt.Sprintf("%s:{t}:s%d", prefix, i), Window: fmt.Sprintf("%s:{t}:v%d", prefix, i),
			Keep: keep, TTL: time.Minute, Slides: i == 1})
	}
	for round := range 30 {
		var entries []EvidenceEntry
		for j := range 1 + round%7 {
			entries = append(entries, EvidenceEntry{Window: (round + j) % len(ws), Text: fmt.Sprint(round, ":", j), List: (round+j)%3 == 0})
		}
		on, off := &Evidence{Windows: ws, Entries: entries}, &Evidence{Windows: ws, Entries: entries}
		if err := s.AddEvidence(ctx, []*Evidence{on}); err != nil {
			t.Fatal(err)
		}
		if err := ms.AddEvidence(ctx, []*Evidence{off}); err != nil {
			t.Fatalf("round %d, without struct: %v", round, err)
		}
		if !reflect.DeepEqual(on.Lists, off.Lists) {
			t.Fatalf("round %d: lists %q without struct, %q on Redis", round, off.Lists, on.Lists)
		}
		for _, w := range ws {
			if got, want := mrdb.Get(ctx, w.Key).Val(), rdb.Get(ctx, w.Key).Val(); got != want {
				t.Fatalf("round %d: %s holds %q without struct, %q on Redis", round, w.Key, got, want)
			}
		}
	}
}

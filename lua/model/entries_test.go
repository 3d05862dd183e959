package model

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// entryWindow and entryChange are an incr_and_check call with evidence
// entries, packed as lua.Batch packs it (packEntryCall).
type entryWindow struct {
	length, threshold, from int64
	keep                    byte
}

type entryChange struct {
	window      byte
	offset, inc int64
	id, entry   string
	// span, when set, is sent in place of the entry's own (a forged span).
	span *[2]uint32
}

// packEntryCall is the call's arguments: the source, the packing, the
// entries and their spans (none when entries is false).
func packEntryCall(src string, ws []entryWindow, cs []entryChange, entries bool) []string {
	le := binary.LittleEndian
	b := append(le.AppendUint32(nil, 600), byte(len(ws)))
	for _, w := range ws {
		b = le.AppendUint32(b, uint32(w.length))
		b = le.AppendUint64(b, uint64(w.threshold))
		b = le.AppendUint64(append(b, w.keep), uint64(w.from))
	}
	var texts, spans []byte
	for _, c := range cs {
		b = le.AppendUint64(append(b, c.window), uint64(c.offset))
		b = le.AppendUint64(append(b, c.id...), uint64(c.inc))
		start := len(texts)
		texts = append(texts, c.entry...)
		span := [2]uint32{uint32(start), uint32(len(texts))}
		if c.span != nil {
			span = *c.span
		}
		spans = le.AppendUint32(le.AppendUint32(spans, span[0]), span[1])
	}
	if !entries {
		texts, spans = nil, nil
	}
	return []string{src, string(b), string(texts), string(spans)}
}

// entryCase is a run of incr_and_check calls with entries on windows w0,
// w1, ..., of which w0 is seed's, if any.
type entryCase struct {
	name    string
	windows []entryWindow
	calls   [][]entryChange
	seed    func(p *pair)
}

func runEntryCases(t *testing.T, cases []entryCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			keys := []string{p.key("o")}
			for i := range tc.windows {
				keys = append(keys, p.key(fmt.Sprint("w", i)), p.key(fmt.Sprint("w", i, ":crossed")))
			}
			if tc.seed != nil {
				tc.seed(p)
			}
			for _, c := range tc.calls {
				p.raw(lua.IncrAndCheckName, keys, packEntryCall("p:0", tc.windows, c, true)...)
			}
		})
	}
}

// entryWin is a window of length 600 s; entryAt is change off's, an
// increment of 1 into window 1.
func entryWin(threshold, from int64, keep byte) entryWindow {
	return entryWindow{600, threshold, from, keep}
}

func entryAt(off int64, entry string) entryChange {
	return entryChange{window: 1, offset: off, inc: 1, id: ids[off%int64(len(ids))], entry: entry}
}

// A window that keeps evidence gets an order's entry, in the field named
// by the count it took the window to, when the order takes it to From or
// above, below its threshold, or crosses it; an amount's window is trimmed
// to its Keep highest counts past 2 Keep + 1 fields; an unusable entry is
// not kept, and its change counts all the same.
func TestIncrAndCheckKeepsEntriesAsTheScript(t *testing.T) {
	long := strings.Repeat("x", 512)
	w, ch := entryWin, entryAt
	runEntryCases(t, []entryCase{
		{"kept from From to the crossing, none past it", []entryWindow{w(4, 2, 10)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b"), ch(3, "c")}, {ch(4, "d"), ch(5, "e")}}, nil},
		{"one an order in a call of many", []entryWindow{w(100, 1, 3)}, [][]entryChange{
			{ch(1, "a"), ch(2, "bb"), ch(3, "c"), ch(4, "dddd"), ch(5, "e"), ch(6, "f"), ch(7, "g"), ch(8, "h")}}, nil},
		{"trimmed to the highest keep", []entryWindow{w(50, 1, 2)}, [][]entryChange{
			{ch(1, "a")}, {ch(2, "b")}, {ch(3, "c")}, {ch(4, "d")}, {ch(5, "e")}, {ch(6, long)}, {ch(7, "g")}}, nil},
		{"a window that keeps none writes none", []entryWindow{w(3, 1, 0)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b"), ch(3, "c")}}, nil},
		{"unusable entries: counted, not kept", []entryWindow{w(9, 1, 5)}, [][]entryChange{
			{ch(1, ""), ch(2, "has\x1eRS"), ch(3, long+"y"), ch(4, "ok"),
				{window: 1, offset: 5, inc: 1, id: ids[5], entry: "z", span: &[2]uint32{2, 1}},
				{window: 1, offset: 6, inc: 1, id: ids[6], entry: "z", span: &[2]uint32{0, 1 << 20}},
				{window: 1, offset: 7, inc: 1, id: ids[0], entry: "z", span: &[2]uint32{0, 0}}}}, nil},
		{"two windows, an entry each", []entryWindow{w(3, 1, 5), w(2, 2, 5)}, [][]entryChange{
			{ch(1, "a"), {window: 2, offset: 1, inc: 1, id: ids[1], entry: "a"}, ch(2, "b"),
				{window: 2, offset: 2, inc: 1, id: ids[2], entry: "b"}}}, nil},
		{"redelivered: nothing written again", []entryWindow{w(5, 1, 5)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b")}, {ch(1, "a"), ch(2, "b"), ch(3, "c")}}, nil},
		{"past 15 digits: none", []entryWindow{w(9007199254740991, 1, 5)}, [][]entryChange{
			{{window: 1, offset: 1, inc: 999999999999998, id: ids[0], entry: "a"}, ch(2, "b"), ch(3, "c")}}, nil},
		{"From past the threshold: the window refused", []entryWindow{w(3, 4, 5)}, [][]entryChange{
			{ch(1, "a")}}, nil},
		{"a keep past 20: the window refused", []entryWindow{w(3, 1, 21)}, [][]entryChange{
			{ch(1, "a")}}, nil},
	})
}

// Entries kept in a window that holds some already, written over where a
// refund lowered its count; fields of another's that tonumber reads are
// counts to trim; a window whose c is no integer keeps none; a string
// counter of the version before is upgraded and then keeps them; a
// persistent window at its threshold starts again without them.
func TestIncrAndCheckKeepsEntriesInACounterBefore(t *testing.T) {
	w, ch := entryWin, entryAt
	hash := func(ttl time.Duration, pairs ...string) func(p *pair) {
		return func(p *pair) { seedHash(p, "w0", ttl, pairs...) }
	}
	str := func(v string, ttl time.Duration) func(p *pair) {
		return func(p *pair) { seedValue(p, "w0", v, ttl) }
	}
	runEntryCases(t, []entryCase{
		{"after entries kept before", []entryWindow{w(9, 1, 5)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b")}}, hash(300*time.Second, "c", "5", "4", "old1", "5", "old2")},
		{"entries written over: a refund lowered the count", []entryWindow{w(9, 1, 5)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b")}}, hash(300*time.Second, "c", "2", "3", "old3", "4", "old4", "5", "old5")},
		{"trimmed with fields of another's: those tonumber reads are counts", []entryWindow{w(50, 1, 2)}, [][]entryChange{
			{ch(1, "a")}}, hash(300*time.Second, "c", "3", "x", "y", "007", "z", "1e1", "w", "-4", "q", " 2", "s")},
		{"a foreign hash whose c is no integer: nothing kept", []entryWindow{w(9, 1, 5)}, [][]entryChange{
			{ch(1, "a")}}, hash(300*time.Second, "c", "5x", "5", "old")},
		{"a string counter with entries, with a TTL: upgraded", []entryWindow{w(9, 1, 5)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b")}}, str("5\x1eold1\x1eold2", 300*time.Second)},
		{"a string counter of 60 bytes: upgraded", []entryWindow{w(20, 1, 5)}, [][]entryChange{
			{ch(1, "a")}}, str("9\x1e"+strings.Repeat("o", 60), 300*time.Second)},
		{"a string counter without a TTL, at its threshold: started again", []entryWindow{w(6, 1, 5)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b")}}, str("5\x1eold", 0)},
		{"a string counter without entries or a TTL", []entryWindow{w(9, 1, 5)}, [][]entryChange{
			{ch(1, "a")}}, str("5", 0)},
		{"a persistent window at its threshold starts again, its entries gone", []entryWindow{w(6, 1, 5)}, [][]entryChange{
			{ch(1, "a"), ch(2, "b")}}, hash(0, "c", "5", "3", "old3", "4", "old4", "5", "old5")},
	})
}

// A refund lowers a window's count and leaves its entries, which the
// counts it reaches again write over; its redelivery writes nothing.
func TestRefundingAWindowWithEntries(t *testing.T) {
	p := newPair(t)
	keys := []string{p.key("o"), p.key("w0"), p.key("w0:crossed")}
	ws := []entryWindow{{600, 50, 1, 3}}
	incr := func(off, inc int64, e string) {
		p.raw(lua.IncrAndCheckName, keys, packEntryCall("p:0", ws, []entryChange{{window: 1, offset: off, inc: inc, id: ids[off%7], entry: e}}, true)...)
	}
	refund := func(off, amount string) {
		p.call(lua.SalesDecrName, keys[:2], "r:0", "600", "1", off, ids[6], amount)
	}
	for off := int64(1); off <= 8; off++ {
		incr(off, 2, fmt.Sprint("e", off))
	}
	refund("1", "5")
	refund("1", "5") // redelivered
	incr(9, 1, "again")
	refund("2", "100") // clamped at 0: the entries stay
	incr(10, 4, "after")
	if got := counterText(p, "w0"); !strings.Contains(got, `"c"="4"`) || !strings.Contains(got, `"4"="after"`) {
		t.Fatalf("the window holds %s", got)
	}
}

// The calls with entries, at random: windows of few entries, so that
// trims come often; thresholds, From and Keep of every kind; calls with
// and without entries; redeliveries; refunds; now and then a window that
// lost its TTL, one that is a string counter of the version before, or a
// hash whose c is no integer.
func TestIncrAndCheckKeepsEntriesRandomly(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newPair(t)
			r := rand.New(rand.NewPCG(seed, 2))
			offsets := map[string]int{}
			for range 25 {
				randomEntriesStep(p, r, offsets)
			}
		})
	}
}

// randomEntriesStep is one step of TestIncrAndCheckKeepsEntriesRandomly.
func randomEntriesStep(p *pair, r *rand.Rand, offsets map[string]int) {
	p.t.Helper()
	n := 1 + r.IntN(3)
	src := []string{"p:0", "p:1"}[r.IntN(2)]
	keys := []string{p.key("o")}
	var ws []entryWindow
	for i := range n {
		w := r.IntN(3)
		keys = append(keys, p.key(fmt.Sprint("w", w, "-", i)), p.key(fmt.Sprint("w", w, "-", i, ":crossed")))
		th := int64(1 + r.IntN(15))
		ws = append(ws, entryWindow{600, th, 1 + r.Int64N(th), byte(r.IntN(4))})
	}
	switch r.IntN(16) {
	case 0:
		p.rdb.Persist(p.t.Context(), keys[1])
		p.st.mu.Lock()
		if k, ok := p.st.keys[keys[1]]; ok {
			k.ttl = false
		}
		p.st.mu.Unlock()
	case 1:
		name := keys[1][len(p.prefix):]
		ttl := time.Duration(r.IntN(2)) * 300 * time.Second
		seedValue(p, name, fmt.Sprint(r.IntN(12), []string{"", "\x1eold", "\x1ea\x1eb"}[r.IntN(3)]), ttl)
	case 2:
		seedHash(p, keys[1][len(p.prefix):], 300*time.Second, "c", "x", "3", "old")
	case 3, 4:
		// The window's layout as its rule keeps it, and now and then the
		// other (a reload turned its evidence on or off).
		hashed := ws[0].keep > 0 != (r.IntN(4) == 0)
		b := append(binary.LittleEndian.AppendUint32(nil, 600), 1, map[bool]byte{false: 0, true: 1}[hashed])
		for range 1 + r.IntN(3) {
			var off int64
			fmt.Sscan(randomOffset(r, offsets, "r:0"), &off)
			b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(off))
			b = binary.LittleEndian.AppendUint64(append(b, randomID(r)...), uint64(1+r.IntN(6)))
		}
		p.raw(lua.SalesDecrName, keys[:2], "r:0", string(b))
	}
	var cs []entryChange
	for range 1 + r.IntN(8) {
		var off int64
		fmt.Sscan(randomOffset(r, offsets, src), &off)
		e := strings.Repeat(string(rune('a'+r.IntN(26))), 1+r.IntN(30))
		if r.IntN(20) == 0 {
			e = "bad\x1e"
		}
		cs = append(cs, entryChange{window: byte(1 + r.IntN(n)), offset: off, inc: int64(1 + r.IntN(3)), id: randomID(r), entry: e})
	}
	p.raw(lua.IncrAndCheckName, keys, packEntryCall(src, ws, cs, r.IntN(6) != 0)...)
}

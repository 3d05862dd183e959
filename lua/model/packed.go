package model

import (
	"math"
	"strings"
)

// The counting scripts take their numbers packed into one string, ARGV[2]
// (lua/pack.go, each script's header). The model checks a packing as the
// script does (its length, then every value's range) and reads it into
// typed windows and changes, in slices the Store keeps from call to call:
// a replay makes no string or slice a window or a change. A window the
// script refuses is read unusable, a change it refuses with window index
// 0, so that the bodies answer, and write, what the script does.

const offsetsBound = 1e15 // offsets, buckets and times: below 10^15

// packing is a counting script's layout of ARGV[2] past its head (the
// marks' lifetime, uint32, and n, uint8): its bytes a window and a change,
// and how each is read.
type packing struct {
	window, change int
	// keysPer is the keys a window; sales_decr's windows are a key each.
	keysPer    int
	maxChanges int
	// entries is set for incr_and_check, whose ARGV[3] and ARGV[4] are
	// its changes' evidence entries and their spans.
	entries bool
	colon   bool // the source holds a ':'
	// windows is false for a packing whose head is followed by changes:
	// its windows are only keys, every one usable.
	windows    bool
	readWindow func(r *reader, w *win)
	readChange func(r *reader, n float64, c *change)
}

// call is a counting call's arguments, read from their packing.
type call struct {
	src  string
	life float64 // how long the marks (sales_decr: the offsets) live, seconds
	n    int
	// windows are by index from 1, as the scripts count them; [0] unused.
	windows []win
	changes []change
	// texts and spans are incr_and_check's ARGV[3] and ARGV[4]: the
	// entries, and each change's (start, end) in texts, uint32 each.
	texts, spans string
}

// win is a window's arguments; usable is false for one the script
// refuses, whose changes it refuses.
type win struct {
	usable  bool
	sliding bool    // distinct_and_check's kind 2
	length  float64 // incr_and_check: seconds; distinct_and_check: milliseconds
	// late is slide_and_check's lateness in buckets, distinct_and_check's
	// in milliseconds.
	threshold, span, late float64
	// ttl is how long the window lives, seconds (incr_and_check: its
	// length): what the offsets' lifetime takes the longest of.
	ttl float64
	// keep and from are incr_and_check's: how many entries the window's
	// evidence keeps (0: none, its counter a string; else a hash, which
	// holds them after its count), and the value from which an order's
	// entry is kept. sales_decr's keep is 1 for a hash, else 0.
	keep, from float64
}

// change is a change's arguments; i is 0 for one the script refuses.
type change struct {
	i      int
	o      float64
	id     string  // 8 bytes of the packing, not a copy
	amount float64 // an increment, a refund's amount (refund: packed negative)
	refund bool    // slide_and_check
	at     float64 // slide_and_check's bucket, distinct_and_check's time
	value  string  // distinct_and_check's 8 bytes
}

// read checks a call as the script does and reads it into c, reusing its
// slices; false when the script refuses the call whole.
func (p packing) read(keys, args argv, c *call) bool {
	argc := 2
	if p.entries {
		argc = 4
	}
	if len(args) != argc || len(args[0]) < 1 || len(args[0]) > 32 || len(args[1]) < 5 ||
		(p.colon && !strings.Contains(args[0], ":")) {
		return false
	}
	r := &reader{s: args[1]}
	life, n := r.u32(), r.u8()
	changes := float64(len(args[1])-5-p.window*int(n)) / float64(p.change)
	if !(life >= 1 && n >= 1 && n <= 64 && len(keys) == p.keysPer*int(n)+1 &&
		changes >= 1 && changes <= float64(p.maxChanges) && changes == math.Trunc(changes) &&
		(!p.entries || len(args[3]) == 0 || float64(len(args[3])) == 8*changes)) {
		return false
	}
	if p.entries {
		c.texts, c.spans = args[2], args[3]
	}
	c.src, c.life, c.n = args[0], life, int(n)
	c.windows = resize(c.windows, int(n)+1)
	for i := 1; i <= int(n); i++ {
		if !p.windows {
			c.windows[i] = win{usable: true}
			continue
		}
		p.readWindow(r, &c.windows[i])
	}
	c.changes = resize(c.changes, int(changes))
	for k := range c.changes {
		p.readChange(r, n, &c.changes[k])
	}
	return true
}

// resize is s with length n, its room reused.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, max(n, 2*cap(s)))
	}
	return s[:n]
}

// fixedChange is incr_and_check's and sales_decr's change: window index,
// offset, event id, amount (1..2^53-1).
func fixedChange(r *reader, n float64, c *change) {
	i, o, id, by := r.u8(), r.i64(), r.raw(8), r.i64()
	*c = change{o: o, id: id, amount: by}
	if i >= 1 && i <= n && o >= 0 && o < offsetsBound && by >= 1 && by < two53 {
		c.i = int(i)
	}
}

var incrPacking = packing{window: 21, change: 25, keysPer: 2, maxChanges: 4096, windows: true, entries: true,
	readWindow: func(r *reader, w *win) {
		length, threshold, keep, from := r.u32(), r.i64(), r.u8(), r.i64()
		*w = win{usable: length >= 1 && threshold >= 1 && threshold < two53 && keep <= maxKeep &&
			(keep == 0 || from >= 1 && from <= threshold),
			length: length, threshold: threshold, ttl: length, keep: keep, from: from}
	},
	readChange: fixedChange}

// salesPacking's window is one byte, 1 when its rule keeps evidence (its
// window a hash; keep 1 here), any other a string's; every one usable.
var salesPacking = packing{window: 1, change: 25, keysPer: 1, maxChanges: 4096, windows: true,
	readWindow: func(r *reader, w *win) {
		*w = win{usable: true}
		if r.u8() == 1 {
			w.keep = 1
		}
	},
	readChange: fixedChange}

var slidePacking = packing{window: 16, change: 33, keysPer: 2, maxChanges: 512, colon: true, windows: true,
	readWindow: func(r *reader, w *win) {
		span, late, threshold, ttl := r.u16(), r.u16(), r.i64(), r.u32()
		*w = win{usable: span >= 1 && span <= 1000 && late <= 4000 && threshold >= 1 && threshold < two53 && ttl >= 1,
			span: span, late: late, threshold: threshold, ttl: ttl}
	},
	readChange: func(r *reader, n float64, c *change) {
		i, o, id, k, amount := r.u8(), r.i64(), r.raw(8), r.i64(), r.i64()
		*c = change{o: o, id: id, at: k, amount: amount}
		if amount < 0 {
			c.amount, c.refund = -amount, true
		}
		if i >= 1 && i <= n && o >= 0 && o < offsetsBound && k >= 0 && k < offsetsBound &&
			c.amount >= 1 && c.amount < two53 {
			c.i = int(i)
		}
	}}

var distinctPacking = packing{window: 23, change: 33, keysPer: 3, maxChanges: 512, colon: true, windows: true,
	readWindow: func(r *reader, w *win) {
		const lengths = 1e13
		kind, length, late, threshold, ttl := r.u8(), r.i64(), r.i64(), r.u16(), r.u32()
		*w = win{usable: (kind == 1 || kind == 2) && length >= 1 && length < lengths && late >= 0 && late < lengths &&
			threshold >= 1 && threshold <= 10000 && ttl >= 1,
			sliding: kind == 2, length: length, late: late, threshold: threshold, ttl: ttl}
	},
	readChange: func(r *reader, n float64, c *change) {
		i, o, id, t, value := r.u8(), r.i64(), r.raw(8), r.i64(), r.raw(8)
		*c = change{o: o, id: id, at: t, value: value}
		if i >= 1 && i <= n && o >= 0 && o < offsetsBound && t >= 0 && t < offsetsBound {
			c.i = int(i)
		}
	}}

// maxKeep bounds how many entries a window's evidence keeps
// (lua.MaxEvidence).
const maxKeep = 20

// entry is change k's (from 0) evidence entry, as the script reads it:
// false when the call sends none, or it is empty, longer than 512 bytes
// or holds the separator.
func (c *call) entry(k int) (string, bool) {
	if len(c.spans) == 0 {
		return "", false
	}
	r := &reader{s: c.spans, pos: 8 * k}
	s0, s1 := int(r.le(4)), int(r.le(4))
	if s1 <= s0 || s1-s0 > 512 || s1 > len(c.texts) || strings.IndexByte(c.texts[s0:s1], evidenceSep) >= 0 {
		return "", false
	}
	return c.texts[s0:s1], true
}

// reader is struct.unpack's little-endian reading of a packing, each
// number a double as Lua holds it. Its caller checked the length.
type reader struct {
	s   string
	pos int
}

func (r *reader) raw(n int) string {
	r.pos += n
	return r.s[r.pos-n : r.pos]
}

func (r *reader) u8() float64 { return float64(r.s[r.skip(1)]) }

func (r *reader) u16() float64 { return float64(r.le(2)) }

func (r *reader) u32() float64 { return float64(r.le(4)) }

func (r *reader) i64() float64 { return float64(int64(r.le(8))) }

// le is the next n bytes as an unsigned little-endian number; read in
// place, as binary.LittleEndian would need them copied to a []byte.
func (r *reader) le(n int) uint64 {
	at, v := r.skip(n), uint64(0)
	for b := n - 1; b >= 0; b-- {
		v = v<<8 | uint64(r.s[at+b])
	}
	return v
}

// skip moves past n bytes; it returns where they start.
func (r *reader) skip(n int) int {
	r.pos += n
	return r.pos - n
}

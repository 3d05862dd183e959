package model

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/fraudwatch/fraudwatch/lua"
)

// The counting scripts take their numbers packed into one string, ARGV[2]
// (lua/pack.go, each script's header). The model checks a packing as the
// script does (its length, then every value's range) and reads it into the
// layout of arguments its bodies read, one string a number, as the scripts
// took them before they were packed: a value the packed script refuses
// becomes one the bodies refuse (a window's "0", a change's window index
// "0"), so that the bodies answer, and write, what the script does.

const offsetsBound = 1e15 // offsets, buckets and times: below 10^15

// packing is a counting script's layout of ARGV[2] past its head (the
// marks' lifetime, uint32, and n, uint8): its bytes a window and a change,
// and what each reads as.
type packing struct {
	window, change int
	// keysPer is the keys a window; sales_decr's windows are a key each.
	keysPer    int
	maxChanges int
	colon      bool // the source holds a ':'
	// windows is false for sales_decr, whose head is followed by changes:
	// its text has no n and no windows.
	windows    bool
	windowText func(r *reader) []string
	changeText func(r *reader, n float64) []string
}

// text is the call's arguments as the model's bodies read them; false
// when the script refuses the call whole.
func (p packing) text(keys, args argv) (argv, bool) {
	if len(args) != 2 || len(args[0]) < 1 || len(args[0]) > 32 || len(args[1]) < 5 ||
		(p.colon && !strings.Contains(args[0], ":")) {
		return nil, false
	}
	r := &reader{s: args[1]}
	life, n := r.u32(), r.u8()
	changes := float64(len(args[1])-5-p.window*int(n)) / float64(p.change)
	if !(life >= 1 && n >= 1 && n <= 64 && len(keys) == p.keysPer*int(n)+1 &&
		changes >= 1 && changes <= float64(p.maxChanges) && changes == math.Trunc(changes)) {
		return nil, false
	}
	text := argv{args[0], format(life)}
	if p.windows {
		text = append(text, format(n))
		for range int(n) {
			text = append(text, p.windowText(r)...)
		}
	}
	for range int(changes) {
		text = append(text, p.changeText(r, n)...)
	}
	return text, true
}

// fixedChange is incr_and_check's and sales_decr's change: window index,
// offset, event id, amount (1..2^53-1).
func fixedChange(r *reader, n float64) []string {
	i, o, id, by := r.u8(), r.i64(), r.raw(8), r.i64()
	if !(i >= 1 && i <= n && o >= 0 && o < offsetsBound && by >= 1 && by < two53) {
		return []string{"0", "0", id, "1"}
	}
	return []string{format(i), format(o), id, format(by)}
}

var incrPacking = packing{window: 12, change: 25, keysPer: 2, maxChanges: 4096, windows: true,
	windowText: func(r *reader) []string {
		length, threshold := r.u32(), r.i64()
		if !(length >= 1 && threshold >= 1 && threshold < two53) {
			return []string{"0", "0"}
		}
		return []string{format(length), format(threshold)}
	},
	changeText: fixedChange}

var salesPacking = packing{change: 25, keysPer: 1, maxChanges: 4096, changeText: fixedChange}

var slidePacking = packing{window: 16, change: 33, keysPer: 2, maxChanges: 512, colon: true, windows: true,
	windowText: func(r *reader) []string {
		span, late, threshold, ttl := r.u16(), r.u16(), r.i64(), r.u32()
		if !(span >= 1 && span <= 1000 && late <= 4000 && threshold >= 1 && threshold < two53 && ttl >= 1) {
			return []string{"0", "0", "0", "0"}
		}
		return []string{format(span), format(late), format(threshold), format(ttl)}
	},
	changeText: func(r *reader, n float64) []string {
		i, o, id, k, amount := r.u8(), r.i64(), r.raw(8), r.i64(), r.i64()
		sign := ""
		if amount < 0 {
			sign, amount = "-", -amount
		}
		if !(i >= 1 && i <= n && o >= 0 && o < offsetsBound && k >= 0 && k < offsetsBound && amount >= 1 && amount < two53) {
			return []string{"0", "0", id, "0", "1"}
		}
		return []string{format(i), format(o), id, format(k), sign + format(amount)}
	}}

var distinctPacking = packing{window: 23, change: 33, keysPer: 3, maxChanges: 512, colon: true, windows: true,
	windowText: func(r *reader) []string {
		const lengths = 1e13
		kind, length, late, threshold, ttl := r.u8(), r.i64(), r.i64(), r.u16(), r.u32()
		if !((kind == 1 || kind == 2) && length >= 1 && length < lengths && late >= 0 && late < lengths &&
			threshold >= 1 && threshold <= 10000 && ttl >= 1) {
			return []string{"x", "0", "0", "0", "0"}
		}
		name := "fixed"
		if kind == 2 {
			name = "sliding"
		}
		return []string{name, format(length), format(late), format(threshold), format(ttl)}
	},
	changeText: func(r *reader, n float64) []string {
		i, o, id, t, value := r.u8(), r.i64(), r.raw(8), r.i64(), r.raw(8)
		if !(i >= 1 && i <= n && o >= 0 && o < offsetsBound && t >= 0 && t < offsetsBound) {
			return []string{"0", "0", id, "0", value}
		}
		return []string{format(i), format(o), id, format(t), value}
	}}

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

func (r *reader) u8() float64 { return float64(r.raw(1)[0]) }

func (r *reader) u16() float64 { return float64(binary.LittleEndian.Uint16([]byte(r.raw(2)))) }

func (r *reader) u32() float64 { return float64(binary.LittleEndian.Uint32([]byte(r.raw(4)))) }

func (r *reader) i64() float64 { return float64(int64(binary.LittleEndian.Uint64([]byte(r.raw(8))))) }

// Unpack is a counting call's arguments (script name's: incr_and_check,
// sales_decr, slide_and_check or distinct_and_check) read from their
// packing into one string a number, in the layout the scripts took before
// they were packed (their bodies here read it); false when the script
// refuses the call whole, or takes no packing.
func Unpack(name string, keys, args []string) ([]string, bool) {
	p, ok := map[string]packing{lua.IncrAndCheckName: incrPacking, lua.SalesDecrName: salesPacking,
		lua.SlideAndCheckName: slidePacking, lua.DistinctAndCheckName: distinctPacking}[name]
	if !ok {
		return nil, false
	}
	return p.text(keys, args)
}

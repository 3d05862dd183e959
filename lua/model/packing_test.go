package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/fraudwatch/fraudwatch/lua"
)

// The model's tests write a counting call's arguments as the scripts took
// them before they were packed, one string a number, which reads better in
// a table; pair.call packs them (packText) as the scripts take them now.
// Both sides get the same packing, so a value the old layout refused only
// has to become one the packing refuses: a malformed number a value out of
// its range (-1, 0 or the field's largest), a malformed id or value the
// change's window index 0; a call cut short stays cut short (trailing
// bytes). pair.raw sends a packing as it is.

// textLayout is a script's old layout: arguments a window and a change,
// and whether ARGV[3] was n.
type textLayout struct {
	window, change int
	hasN           bool
}

var textLayouts = map[string]textLayout{
	lua.IncrAndCheckName:     {2, 4, true},
	lua.SalesDecrName:        {0, 4, false},
	lua.SlideAndCheckName:    {4, 5, true},
	lua.DistinctAndCheckName: {5, 5, true},
}

// packText is args, in script name's old layout, packed; args as they are
// for the other scripts.
func packText(name string, keys, args []string) []string {
	l, ok := textLayouts[name]
	if !ok || len(args) < 2 {
		return args
	}
	b := binary.LittleEndian.AppendUint32(nil, u32Of(args[1]))
	n, rest := len(keys)-1, args[2:]
	if l.hasN {
		if len(rest) == 0 {
			return argsOf(name, args[0], b)
		}
		v := num(rest[0], 0)
		n, rest = int(min(max(v, 0), 255)), rest[1:]
	}
	b = append(b, byte(n))
	if name == lua.SalesDecrName {
		// Each window a hash: its rule keeps evidence, as rules keep by
		// default.
		b = append(b, bytes.Repeat([]byte{1}, n)...)
	}
	for w := 0; w < n && len(rest) > 0; w++ {
		take := min(l.window, len(rest))
		b = packWindow(b, name, rest[:take])
		rest = rest[take:]
	}
	for len(rest) > 0 {
		take := min(l.change, len(rest))
		b = packChange(b, name, rest[:take])
		rest = rest[take:]
	}
	return argsOf(name, args[0], b)
}

// argsOf is a call's arguments: its source and packing, and for
// incr_and_check no entries.
func argsOf(name, src string, b []byte) []string {
	if name == lua.IncrAndCheckName {
		return []string{src, string(b), "", ""}
	}
	return []string{src, string(b)}
}

// num is s's value when it is digits (with a '-' before them), bad when
// not.
func num(s string, bad int64) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != s || s == "-0" {
		return bad
	}
	return v
}

func u32Of(s string) uint32 {
	v := num(s, 0)
	if v < 0 || v > math.MaxUint32 {
		return 0
	}
	return uint32(v)
}

func u16Of(s string, bad uint16) uint16 {
	v := num(s, int64(bad))
	if v < 0 || v > math.MaxUint16 {
		return bad
	}
	return uint16(v)
}

// packWindow appends a window's packing; f may be cut short.
func packWindow(b []byte, name string, f []string) []byte {
	le := binary.LittleEndian
	for k, s := range f {
		switch {
		case name == lua.IncrAndCheckName && k == 0, name == lua.SlideAndCheckName && k == 3,
			name == lua.DistinctAndCheckName && k == 4:
			b = le.AppendUint32(b, u32Of(s))
		case name == lua.SlideAndCheckName && k < 2:
			b = le.AppendUint16(b, u16Of(s, math.MaxUint16))
		case name == lua.DistinctAndCheckName && k == 0:
			b = append(b, map[string]byte{"fixed": 1, "sliding": 2}[s])
		case name == lua.DistinctAndCheckName && k == 3:
			b = le.AppendUint16(b, u16Of(s, 0))
		default:
			b = le.AppendUint64(b, uint64(num(s, -1)))
		}
	}
	if name == lua.IncrAndCheckName && len(f) == 2 {
		// Its rule keeps 10 entries (rules' default), from 1; the call
		// sends none (packText), so none is written.
		b = le.AppendUint64(append(b, 10), 1)
	}
	return b
}

// packChange appends a change's packing; f may be cut short.
func packChange(b []byte, name string, f []string) []byte {
	le := binary.LittleEndian
	index := byte(0)
	if v := num(f[0], 0); v > 0 && v < 256 {
		index = byte(v)
	}
	if len(f) > 2 && len(f[2]) != 8 || name == lua.DistinctAndCheckName && len(f) > 4 && (f[4] == "" || len(f[4]) > 64) {
		index = 0
	}
	b = append(b, index)
	for k, s := range f[1:] {
		switch {
		case k == 1 || name == lua.DistinctAndCheckName && k == 3:
			b = append(b, (s + "\x00\x00\x00\x00\x00\x00\x00\x00")[:8]...)
		case name == lua.SlideAndCheckName && k == 3 || (name == lua.IncrAndCheckName || name == lua.SalesDecrName) && k == 2:
			b = le.AppendUint64(b, uint64(num(s, 0))) // an amount: 0 is refused
		default:
			b = le.AppendUint64(b, uint64(num(s, -1)))
		}
	}
	if name == lua.IncrAndCheckName && len(f) == 2 {
		b = append(b, 1) // its rule keeps evidence, as rules keep by default
	}
	return b
}

// Malformed packings, sent as they are: the model refuses what the script
// refuses, whole or change by change, and writes what it writes.
func TestMalformedPackingsAsTheScripts(t *testing.T) {
	le := binary.LittleEndian
	head := func(life uint32, n byte) []byte { return append(le.AppendUint32(nil, life), n) }
	change := func(b []byte, i byte, offset int64, amount int64) []byte {
		b = le.AppendUint64(append(b, i), uint64(offset))
		return le.AppendUint64(append(b, "abcdefgh"...), uint64(amount))
	}
	window := func(b []byte, length uint32, threshold int64) []byte {
		return le.AppendUint64(append(le.AppendUint64(le.AppendUint32(b, length), uint64(threshold)), 1), 1)
	}
	good := change(window(head(600, 1), 600, 2), 1, 1, 1)
	for _, tc := range []struct {
		name    string
		script  string
		windows int
		packing []byte
		whole   bool // refused whole
	}{
		{"shorter than its head", lua.IncrAndCheckName, 1, []byte{1, 2, 0, 0}, true},
		{"a trailing byte", lua.IncrAndCheckName, 1, append(good[:len(good):len(good)], 0), true},
		{"a change cut short", lua.IncrAndCheckName, 1, good[:len(good)-1], true},
		{"no changes", lua.IncrAndCheckName, 1, window(head(600, 1), 600, 2), true},
		{"n 0", lua.IncrAndCheckName, 1, change(window(head(600, 0), 600, 2), 1, 1, 1), true},
		{"n past the keys", lua.IncrAndCheckName, 1, change(window(window(head(600, 2), 600, 2), 600, 2), 1, 1, 1), true},
		{"lifetime 0", lua.IncrAndCheckName, 1, change(window(head(0, 1), 600, 2), 1, 1, 1), true},
		{"changes refused one by one", lua.IncrAndCheckName, 1, change(change(change(change(change(change(
			window(head(600, 1), 600, 2), 0, 1, 1), 2, 1, 1), 1, -1, 1), 1, 1e15, 1), 1, 1, 0), 1, 1, 1<<53), false},
		{"a window's threshold of 2^53", lua.IncrAndCheckName, 2,
			change(change(window(window(head(600, 2), 600, 1<<53), 600, 2), 1, 1, 1), 2, 1, 1), false},
		{"sales_decr: a trailing byte", lua.SalesDecrName, 1, append(change(append(head(600, 1), 1), 1, 1, 1), 0), true},
		{"sales_decr: no window's layout", lua.SalesDecrName, 1, change(head(600, 1), 1, 1, 1), true},
		{"sales_decr: n not the keys", lua.SalesDecrName, 1, change(append(head(600, 2), 1, 1), 1, 1, 1), true},
		{"sales_decr: refunds refused one by one", lua.SalesDecrName, 1, change(change(change(
			append(head(600, 1), 0), 2, 1, 1), 1, -1, 1), 1, 1, 1<<53), false},
		{"sales_decr: a layout byte of 2 reads a string", lua.SalesDecrName, 1, change(append(head(600, 1), 2), 1, 1, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			keys := []string{p.key("o")}
			for i := range tc.windows {
				keys = append(keys, p.key(fmt.Sprint("w", i)))
				if tc.script != lua.SalesDecrName {
					keys = append(keys, p.key(fmt.Sprint("w", i, ":crossed")))
				}
			}
			args := []string{"p:0", string(tc.packing)}
			if tc.script == lua.IncrAndCheckName {
				args = append(args, "", "")
			}
			got := p.raw(tc.script, keys, args...)
			if whole := fmt.Sprint(got) == "[-1 -1]"; whole != tc.whole {
				t.Fatalf("reply %v: refused whole %v, want %v", got, whole, tc.whole)
			}
		})
	}
}

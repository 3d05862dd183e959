package lua

import "strings"

// WindowName names the keys of one window: its group, its rule's state
// name, and whether it is a fixed window (a counter) or a distinct window,
// which has values too.
type WindowName struct {
	Group    Group
	Rule     string
	Fixed    bool
	Distinct bool
}

// NameWindows sets the Key and Marks of each ws[i], and the Values of a
// distinct one, to those of names[i]: all in one allocation, substrings of
// one string. The hot path names every window of a batch, which cost two
// allocations a window. A window's keys differ in their kind's byte alone:
// each is written once and copied with that byte changed, for writing
// them piece by piece was most of the naming's time.
func (k Keys) NameWindows(ws []Window, names []WindowName) {
	size := 0
	for _, n := range names {
		size += k.keyLen(n.Group, n.Rule) * n.keys()
	}
	var b strings.Builder
	b.Grow(size)
	var room [256]byte // a window's key, when it fits
	for _, n := range names {
		kind := byte('w')
		if n.Fixed {
			kind = 'f'
		}
		key := k.appendKey(room[:0], kind, n.Group, n.Rule)
		b.Write(key)
		at := len(k.prefix) + len(n.Group.tag) + 2 // the kind's byte
		key[at] = 'x'
		b.Write(key)
		if n.Distinct {
			key[at] = 'd'
			b.Write(key)
		}
	}
	all, at := b.String(), 0
	next := func(n int) string {
		at += n
		return all[at-n : at]
	}
	for i, n := range names {
		l := k.keyLen(n.Group, n.Rule)
		ws[i].Key, ws[i].Marks = next(l), next(l)
		if n.Distinct {
			ws[i].Values = next(l)
		}
	}
}

func (n WindowName) keys() int {
	if n.Distinct {
		return 3
	}
	return 2
}

// keyLen is the length of key(kind, g, rule) for a kind of one byte.
func (k Keys) keyLen(g Group, rule string) int {
	return len(k.prefix) + len(g.tag) + len(rule) + len(g.enc) + 5
}

// appendKey appends key(kind, g, rule) to dst.
func (k Keys) appendKey(dst []byte, kind byte, g Group, rule string) []byte {
	dst = append(dst, k.prefix...)
	dst = append(dst, ':')
	dst = append(dst, g.tag...)
	dst = append(dst, ':', kind, ':')
	dst = append(dst, rule...)
	dst = append(dst, ':')
	return append(dst, g.enc...)
}

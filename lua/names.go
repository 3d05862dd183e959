package lua

import "strings"

// The naming of a batch's windows in one allocation (NameWindows), apart
// from the key layout in keys.go.

// WindowName names the keys of one window: its group, its rule's state
// name, whether it is a fixed window (a counter) or a distinct window,
// which has values too, and whether it keeps evidence.
type WindowName struct {
	Group    Group
	Rule     string
	Fixed    bool
	Distinct bool
	Evidence bool
}

// NameWindows sets the Key and Marks of each ws[i], the Values of a
// distinct one and the EvidenceKey of one that keeps evidence, to those of
// names[i]: all in one allocation, substrings of one string. The hot path names every window of a batch, which cost two
// allocations a window.
func (k Keys) NameWindows(ws []*Window, names []WindowName) {
	size := 0
	for _, n := range names {
		size += k.keyLen(n.Group, n.Rule) * n.keys()
	}
	var b strings.Builder
	b.Grow(size)
	for _, n := range names {
		kind := byte('w')
		if n.Fixed {
			kind = 'f'
		}
		k.writeKey(&b, kind, n.Group, n.Rule)
		k.writeKey(&b, 'x', n.Group, n.Rule)
		if n.Distinct {
			k.writeKey(&b, 'd', n.Group, n.Rule)
		}
		if n.Evidence {
			k.writeKey(&b, 'l', n.Group, n.Rule)
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
		if n.Evidence {
			ws[i].EvidenceKey = next(l)
		}
	}
}

func (n WindowName) keys() int {
	k := 2
	if n.Distinct {
		k++
	}
	if n.Evidence {
		k++
	}
	return k
}

// keyLen is the length of key(kind, g, rule) for a kind of one byte.
func (k Keys) keyLen(g Group, rule string) int {
	return len(k.prefix) + len(g.tag) + len(rule) + len(g.enc) + 5
}

// writeKey writes key(kind, g, rule).
func (k Keys) writeKey(b *strings.Builder, kind byte, g Group, rule string) {
	b.WriteString(k.prefix)
	b.WriteByte(':')
	b.WriteString(g.tag)
	b.WriteByte(':')
	b.WriteByte(kind)
	b.WriteByte(':')
	b.WriteString(rule)
	b.WriteByte(':')
	b.WriteString(g.enc)
}

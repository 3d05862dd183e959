package model

import "github.com/fraudwatch/fraudwatch/lua"

// Unpack is a counting call's arguments (script name's: incr_and_check,
// sales_decr, slide_and_check or distinct_and_check) read from their
// packing into one string a number, in the layout the scripts took before
// they were packed (a scored backtest's readers read it, not the bodies):
// a window the script refuses reads "0" (distinct_and_check's kind "x"), a
// change it refuses window index "0"; false when the script refuses the
// call whole, or takes no packing.
func Unpack(name string, keys, args []string) ([]string, bool) {
	var p packing
	switch name {
	case lua.IncrAndCheckName:
		p = incrPacking
	case lua.SalesDecrName:
		p = salesPacking
	case lua.SlideAndCheckName:
		p = slidePacking
	case lua.DistinctAndCheckName:
		p = distinctPacking
	default:
		return nil, false
	}
	var c call
	if !p.read(keys, args, &c) {
		return nil, false
	}
	text := []string{c.src, format(c.life)}
	if p.windows {
		text = append(text, format(float64(c.n)))
		for _, w := range c.windows[1:] {
			text = append(text, windowText(name, w)...)
		}
	}
	for _, ch := range c.changes {
		text = append(text, changeText(name, ch)...)
	}
	return text, true
}

// windowText is a window in the old layout.
func windowText(name string, w win) []string {
	switch {
	case name == lua.IncrAndCheckName && w.usable:
		return []string{format(w.length), format(w.threshold)}
	case name == lua.IncrAndCheckName:
		return []string{"0", "0"}
	case name == lua.SlideAndCheckName && w.usable:
		return []string{format(w.span), format(w.late), format(w.threshold), format(w.ttl)}
	case name == lua.SlideAndCheckName:
		return []string{"0", "0", "0", "0"}
	case !w.usable:
		return []string{"x", "0", "0", "0", "0"}
	}
	kind := "fixed"
	if w.sliding {
		kind = "sliding"
	}
	return []string{kind, format(w.length), format(w.late), format(w.threshold), format(w.ttl)}
}

// changeText is a change in the old layout.
func changeText(name string, c change) []string {
	i, o := format(float64(c.i)), format(c.o)
	switch {
	case name == lua.SlideAndCheckName && c.i == 0:
		return []string{"0", "0", c.id, "0", "1"}
	case name == lua.SlideAndCheckName && c.refund:
		return []string{i, o, c.id, format(c.at), "-" + format(c.amount)}
	case name == lua.SlideAndCheckName:
		return []string{i, o, c.id, format(c.at), format(c.amount)}
	case name == lua.DistinctAndCheckName && c.i == 0:
		return []string{"0", "0", c.id, "0", c.value}
	case name == lua.DistinctAndCheckName:
		return []string{i, o, c.id, format(c.at), c.value}
	case c.i == 0:
		return []string{"0", "0", c.id, "1"}
	}
	return []string{i, o, c.id, format(c.amount)}
}

package event

import (
	"bytes"
	"encoding/json"
)

// Most events are flat: an object whose values are strings, numbers, true,
// false or null, with no escape in their names or strings. eachFlat reads
// those alone, in one pass over the message, and hands anything else to
// jsontext (eachMember): jsontext's tokenizer took about 1.3 µs an event,
// a tenth of fraudwatch's CPU an event (docs/performance.md, fraudwatch's
// own share). It accepts nothing jsontext refuses, and hands out the same
// spans: FuzzFlatAgrees holds it to jsontext.

// maxFlat is how many members eachFlat keeps before it calls fn: an
// object with more goes to jsontext.
const maxFlat = 32

type flatMember struct{ name, value, end int }

// eachFlat calls fn as eachMember does and reports true when data is a
// flat object of at most maxFlat members; it reports false, and calls fn
// for none, for anything else (a malformed message too): only when the
// whole message is read is fn called.
func eachFlat(data []byte, fn func(name []byte, value json.RawMessage, at int)) bool {
	var (
		ms [maxFlat]flatMember
		n  int
		ok bool
	)
	i := space(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	if i = space(data, i+1); i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			m := flatMember{name: i}
			if i, ok = flatString(data, i); !ok {
				return false
			}
			if i = space(data, i); i == len(data) || data[i] != ':' {
				return false
			}
			m.value = space(data, i+1)
			if m.end, ok = flatValue(data, m.value); !ok || n == maxFlat {
				return false
			}
			ms[n], n = m, n+1
			if i = space(data, m.end); i == len(data) {
				return false
			}
			i++
			if data[i-1] == '}' {
				break
			}
			if data[i-1] != ',' {
				return false
			}
			i = space(data, i)
		}
	}
	if space(data, i) != len(data) {
		return false
	}
	for _, m := range ms[:n] {
		name := data[m.name+1:]
		fn(name[:bytes.IndexByte(name, '"')], data[m.value:m.end], m.value)
	}
	return true
}

// flatValue is the end of the string, number or literal at data[i].
func flatValue(data []byte, i int) (int, bool) {
	if i == len(data) {
		return 0, false
	}
	switch c := data[i]; {
	case c == '"':
		return flatString(data, i)
	case c == '-' || '0' <= c && c <= '9':
		return number(data, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(data[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return 0, false
}

// flatString is the end of the string at data[i]: false for one with an
// escape or a control character (which JSON refuses unescaped), or none.
func flatString(data []byte, i int) (int, bool) {
	if i == len(data) || data[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\' || c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

// number is the end of the JSON number at data[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func number(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		i = digits(data, i)
	default:
		return 0, false
	}
	if i < len(data) && data[i] == '.' {
		if j := digits(data, i+1); j > i+1 {
			i = j
		} else {
			return 0, false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// space is the index of the first byte at or after i that is not JSON's
// white space.
func space(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

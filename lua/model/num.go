package model

import (
	"errors"
	"strconv"
	"strings"
)

// What the scripts' Lua does with its arguments and numbers, in Go.

// argv is a script's ARGV (or KEYS): at is Lua's ARGV[i], 1-based, with ok
// false where Lua has nil.
type argv []string

func (a argv) at(i int) (string, bool) {
	if i < 1 || i > len(a) {
		return "", false
	}
	return a[i-1], true
}

// positive is the scripts' positive(s, digits): 1 to digits decimal digits,
// the first not 0.
func positive(s string, ok bool, digits int) bool {
	return ok && len(s) >= 1 && len(s) <= digits && s[0] != '0' && allDigits(s)
}

// natural is the scripts' natural(s, digits) (offset(s) is natural(s, 15)):
// "0" or positive.
func natural(s string, ok bool, digits int) bool {
	return ok && (s == "0" || positive(s, true, digits))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// errUnsure refuses an argument whose tonumber this model does not follow:
// hexadecimal, inf and nan, which C's strtod (Lua's tonumber) reads as
// numbers. The lua package never sends one; a call that does fails, rather
// than being answered otherwise than Redis would.
var errUnsure = errors.New("model: an argument in a form the model does not follow")

// tonumber is Lua 5.1's tonumber(s): C's strtod over the whole string, less
// spaces at either end. A missing argument, or a string strtod does not read
// whole, is nil (isNum false).
func tonumber(s string, ok bool) (v float64, isNum bool, err error) {
	if !ok {
		return 0, false, nil
	}
	if len(s) >= 1 && len(s) <= 15 && allDigits(s) {
		// What the scripts write and the lua package sends, exact in a
		// double: no need of strtod's rules.
		var n int64
		for i := 0; i < len(s); i++ {
			n = n*10 + int64(s[i]-'0')
		}
		return float64(n), true, nil
	}
	t := strings.Trim(s, " \t\n\v\f\r")
	body := strings.TrimLeft(t, "+-")
	// An 'x' anywhere else makes no number: strtod stops before it, and
	// Lua's hexadecimal retry (strtoul) reads no 'x' but a leading "0x".
	if lower := strings.ToLower(body); strings.HasPrefix(lower, "inf") || strings.HasPrefix(lower, "nan") ||
		strings.HasPrefix(lower, "0x") {
		return 0, false, errUnsure
	}
	if t == "" || len(t)-len(body) > 1 || strings.Trim(t, "0123456789.eE+-") != "" {
		return 0, false, nil
	}
	// Go reads a decimal number as strtod does, and rounds it the same
	// (correctly); what it refuses, strtod reads only in part.
	v, err = strconv.ParseFloat(t, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false, nil
	}
	return v, true, nil
}

// integer is a Lua number as Redis replies it, and as string.format('%d')
// writes it: C's conversion to long long, which truncates.
func integer(v float64) int64 { return int64(v) }

// format is string.format('%d', v).
func format(v float64) string { return strconv.FormatInt(integer(v), 10) }

// parseInt reads a Redis integer: what HINCRBY takes.
func parseInt(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && strconv.FormatInt(v, 10) == s
}

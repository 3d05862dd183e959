package alert

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/text/currency"
)

// FormatDuration renders a window or cooldown the way rules write it: "10m"
// rather than "10m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// FormatValue renders a rule's counter or threshold for people: amounts as
// money in their currency ("KRW 1,250,000", "USD 12.50"), counts as grouped
// integers ("1,234"). The result is plain text, not escaped for any medium.
func FormatValue(metric Metric, v int64, code string) string {
	if metric == Amount {
		return formatMoney(v, code)
	}
	return groupDigits(v)
}

// formatMoney renders minor units with the ISO 4217 scale of the currency:
// KRW 1250000 -> "KRW 1,250,000", USD 1250 -> "USD 12.50". Without a known
// currency the scale is unknown, so it prints the minor units as they are.
func formatMoney(minor int64, code string) string {
	code = strings.TrimSpace(code)
	if code == "" {
		return groupDigits(minor) + " minor units"
	}
	u, err := currency.ParseISO(code)
	if err != nil || u == (currency.Unit{}) { // the zero Unit is XXX, "no currency"
		return groupDigits(minor) + " minor units (unknown currency " + Cut(code, 16) + ")"
	}
	scale, _ := currency.Standard.Rounding(u)
	neg, abs := minor < 0, uint64(minor)
	if neg {
		abs = -abs
	}
	div := uint64(1)
	for range scale {
		div *= 10
	}
	s := groupUint(abs / div)
	if scale > 0 {
		frac := strconv.FormatUint(abs%div, 10)
		s += "." + strings.Repeat("0", scale-len(frac)) + frac
	}
	if neg {
		s = "-" + s
	}
	return u.String() + " " + s
}

func groupDigits(v int64) string {
	if v < 0 {
		return "-" + groupUint(-uint64(v))
	}
	return groupUint(uint64(v))
}

func groupUint(v uint64) string {
	s := strconv.FormatUint(v, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	lead := len(s) % 3
	if lead > 0 {
		b.WriteString(s[:lead])
	}
	for i := lead; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// Cut shortens s to at most n runes, marking a cut with "…".
func Cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Printable returns s as it may be shown on one line, in Slack or on a
// terminal, without changing how what follows it reads. Control
// characters (newline, tab, a terminal's ESC and BEL) and the line and
// paragraph separators U+2028 and U+2029 become spaces. Format characters
// (Unicode Cf: bidi overrides and isolates, marks, zero-width joiners) are
// dropped, so that U+202E cannot make "gpj.exe" read "exe.jpg". Every rune
// of the result is one of s's or a space, so callers may measure or
// escape it rune by rune.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r), unicode.In(r, unicode.Zl, unicode.Zp):
			return ' '
		case unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, s)
}

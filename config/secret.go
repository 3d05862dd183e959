package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// Secret holds a credential. Every way Go has of turning it into text —
// fmt with any verb, slog, encoding/json, encoding.TextMarshaler (and so
// YAML) — renders "[redacted]", or "" when it is empty, so that printing
// or logging a whole Config cannot leak it. Only Value returns the real
// thing; call it where the credential is handed to a client library.
//
// Its kind is string so that viper and mapstructure decode it like any
// other string.
type Secret string

const redacted = "[redacted]"

// Value returns the secret itself.
func (s Secret) Value() string { return string(s) }

// String returns "[redacted]", or "" for an empty secret: whether a secret
// is set is useful to see, its value never is.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString renders %#v as a quoted string, like a plain string's.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// Format implements fmt.Formatter. It catches every verb, since %x or %d of
// a plain string would print its bytes.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'v', 's', 'q':
		// FormatString keeps width, precision and flags (%-10s, %+q, %#v).
		fmt.Fprintf(f, fmt.FormatString(f, verb), s.String())
	default:
		fmt.Fprintf(f, "%%!%c(config.Secret=%s)", verb, s.String())
	}
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText implements encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// redactAddress hides the credentials an address may carry, for messages
// that quote it: the password of a userinfo (user:pass@host,
// redis://:pass@host), a userinfo that is a single word (a token@host) and
// a query (?password=…). fraudwatch takes bare host:port addresses, so an
// address with any of these is refused, and the message must still not
// show the secret the operator typed.
func redactAddress(addr string) string {
	if q := strings.IndexByte(addr, '?'); q >= 0 {
		addr = addr[:q+1] + redacted
	}
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return addr
	}
	start := 0
	if scheme, _, ok := strings.Cut(addr[:at], "://"); ok && isScheme(scheme) {
		start = len(scheme) + len("://")
	}
	userinfo := addr[start:at]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return addr[:start] + user + ":" + redacted + addr[at:]
	}
	if userinfo == "" {
		return addr
	}
	return addr[:start] + redacted + addr[at:]
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or "."), so that a "://" inside a password is
// not taken for the end of one.
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

package lua

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Keys derives the Redis keys of a (rule, group). All keys of one
// (rule, group) share one Redis Cluster hash tag, {rule:group}, so that a
// script never touches two slots:
//
//	fw:{orders-per-customer-1m:cust-42}:count     the window counter
//	fw:{orders-per-customer-1m:cust-42}:seen      events the window counted
//	fw:{orders-per-customer-1m:cust-42}:crossed:… an event that crossed
//	fw:{orders-per-customer-1m:cust-42}:cooldown  the alert cooldown
//	fw:{orders-per-customer-1m:cust-42}:alert:…   one alert's delivery record
type Keys struct {
	prefix string
}

// NewKeys returns Keys under prefix. The prefix may not contain braces:
// Redis takes the first {...} of a key as its hash tag.
func NewKeys(prefix string) (Keys, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Keys{}, err
	}
	return Keys{prefix: prefix}, nil
}

// ValidatePrefix reports whether prefix can start fraudwatch's keys.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return errors.New("must not be empty")
	}
	if strings.ContainsAny(prefix, "{} \t\r\n") {
		return fmt.Errorf("%q must not contain braces or white space", prefix)
	}
	return nil
}

// Group identifies one group of a rule: the tag shared by its keys.
type Group struct {
	tag string // "{rule:encoded}"
}

// Group derives the group of values for a rule.
func (k Keys) Group(rule string, values []string) Group {
	return Group{tag: "{" + rule + ":" + encodeGroup(values) + "}"}
}

// Counter is the key of the window counter of a rule. metric is what the
// rule counts ("count" or "amount"), the key's last part, so that a
// counter says what it holds. It is a plain key segment here: the type
// (alert.Metric) belongs to the alert model, which itself uses this
// package.
func (k Keys) Counter(g Group, metric string) string {
	return k.prefix + ":" + g.tag + ":" + metric
}

// Seen is the key of the window's record of counted events, which makes
// the scripts idempotent on event id.
func (k Keys) Seen(g Group) string {
	return k.prefix + ":" + g.tag + ":seen"
}

// Window returns the keys the scripts need for a rule's window.
func (k Keys) Window(g Group, metric string) Window {
	return Window{Counter: k.Counter(g, metric), Seen: k.Seen(g)}
}

// Cooldown is the key of the alert cooldown.
func (k Keys) Cooldown(g Group) string {
	return k.prefix + ":" + g.tag + ":cooldown"
}

// Crossing is the key that remembers that an event crossed a rule's
// threshold, so that its redelivery still hands the alert off after the
// window (and its record of events) is gone.
func (k Keys) Crossing(g Group, eventID string) string {
	return k.prefix + ":" + g.tag + ":crossed:" + eventHash(eventID)
}

// AlertRecord is the key of one alert's delivery record. The event id is
// hashed: it may hold any bytes, and the record only needs to tell alerts
// apart.
func (k Keys) AlertRecord(g Group, eventID string) string {
	return k.prefix + ":" + g.tag + ":alert:" + eventHash(eventID)
}

func eventHash(eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return hex.EncodeToString(sum[:16])
}

// maxPlainGroup bounds the readable form of a group; longer groups are
// hashed so that a 10 KB address cannot make 10 KB keys.
const maxPlainGroup = 200

// encodeGroup turns group_by values into a string that can sit inside a
// hash tag and that no other tuple of values produces:
//
//   - each value is percent-escaped, keeping only [A-Za-z0-9] and -._@+, so
//     no encoded value contains '{', '}', ':', '%'-ambiguity or white space;
//   - values are joined with ':', which escaped values never contain, so
//     ["a:b","c"] and ["a","b:c"] stay apart (a%3Ab:c vs a:b%3Ac);
//   - an encoding longer than maxPlainGroup is replaced by '~' and the
//     SHA-256 of the encoding. '~' never appears in an escaped value, so a
//     hashed group cannot equal a plain one, and two tuples share a hashed
//     group only if SHA-256 collides.
func encodeGroup(values []string) string {
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteByte(':')
		}
		escape(&b, v)
	}
	if b.Len() <= maxPlainGroup {
		return b.String()
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "~" + hex.EncodeToString(sum[:])
}

const hexDigits = "0123456789ABCDEF"

func escape(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '@' || c == '+' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xF])
	}
}

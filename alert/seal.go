package alert

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"time"
	"unicode/utf8"
)

// SealSize is the length of an alert's seal (Seal).
const SealSize = sha256.Size

// sealVersion starts what a seal hashes: a change of what it covers must
// change it, so that no two encodings can ever collide.
const sealVersion = "fraudwatch alert seal 1"

// Seal is the content hash of what an alert says of its crossing:
// everything a post shows that its rule in force does not supply, and
// everything the dispatcher keys on. The engine writes it next to the
// crossing's mark before it publishes the alert (rules.Engine, lua.Seal),
// and the dispatcher posts only an alert whose seal it finds there: so a
// post says what fraudwatch published, never what a writer of the alerts
// topic made up. It covers rule, definition, group, group_by,
// group_values, metric, field, window, window_type, event_id, order_id,
// at, current, currency, every field of every evidence entry, and
// published_at; it leaves out what the dispatcher takes from the rule in
// force or builds itself (id, description, severity, mode, channel,
// threshold, cooldown, the Redis keys).
//
// The encoding is length-prefixed, so no two alerts that differ in any of
// those fields hash the same bytes. Strings are hashed as JSON carries
// them (invalid UTF-8 replaced as encoding/json replaces it), times by
// their instant, so that an alert hashes the same before it is written to
// the topic and once read back from it.
func (a *Alert) Seal() [SealSize]byte {
	w := sealWriter{sha256.New()}
	w.text(sealVersion)
	w.text(a.Rule)
	w.text(a.Definition)
	w.text(a.Group)
	w.texts(a.GroupBy)
	w.texts(a.GroupValues)
	w.text(string(a.Metric))
	w.text(a.Field)
	w.int(int64(a.Window))
	w.text(string(a.WindowType))
	w.text(a.EventID)
	w.text(a.OrderID)
	w.time(a.At)
	w.int(a.Current)
	w.text(a.Currency)
	w.int(int64(len(a.Evidence)))
	for i := range a.Evidence {
		e := &a.Evidence[i]
		w.text(e.OrderID)
		w.text(e.EventID)
		w.int(e.Amount)
		w.time(e.At)
		w.text(e.Value)
	}
	w.time(a.PublishedAt)
	var sum [SealSize]byte
	w.h.Sum(sum[:0])
	return sum
}

// Sealed reports whether the alert was published sealed: alerts written
// before fraudwatch sealed them carry no published_at.
func (a *Alert) Sealed() bool { return !a.PublishedAt.IsZero() }

type sealWriter struct{ h hash.Hash }

func (w sealWriter) int(n int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	w.h.Write(b[:])
}

// text writes s's length and bytes, as JSON carries s: each byte that is
// not part of valid UTF-8 as U+FFFD.
func (w sealWriter) text(s string) {
	if utf8.ValidString(s) {
		w.int(int64(len(s)))
		w.h.Write([]byte(s))
		return
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	w.int(int64(len(b)))
	w.h.Write(b)
}

func (w sealWriter) texts(ss []string) {
	w.int(int64(len(ss)))
	for _, s := range ss {
		w.text(s)
	}
}

// time writes an instant: its location and monotonic reading, which JSON
// does not keep, are not part of it.
func (w sealWriter) time(t time.Time) {
	w.int(t.Unix())
	w.int(int64(t.Nanosecond()))
}

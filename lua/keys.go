package lua

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Keys derives the Redis keys of the rules' groups. A hash of a group's
// values picks its bucket, one of Buckets hash tags, which all its keys
// carry. So one script call can count a batch's events into every window
// of one bucket without touching two slots (Redis Cluster). A key reads
// prefix, bucket, kind, rule, group:
// fw:{3F}:f:orders-per-customer-1m.5c0e19aa:cust-42 (docs/design.md, Keys).
//
// Windows, values, marks and evidence take the rule's state name
// (rules.Rule.State), so a changed rule starts fresh windows. Cooldowns,
// silences and alerts' records take the name alone. Rule names hold no ':'
// (package config checks them) and the group comes last (but for a record's
// hash, which holds none), so no two (kind, rule, group) share a key.
type Keys struct {
	prefix  string
	buckets uint32
	// stores starts the keys of a receiver's stores (ForReceiver): its
	// budgets, parked and waiting alerts; "" is prefix.
	stores string
}

// Buckets is how many hash tags the groups are spread over: enough to
// spread them over the masters of a cluster, few enough that a batch's
// groups share calls.
const Buckets = 256

// A bucket's number fits Group's uint8: this fails to compile otherwise.
const _ uint8 = Buckets - 1

// NewKeys returns Keys under prefix. The prefix may not contain braces:
// Redis takes the first {...} of a key as its hash tag.
func NewKeys(prefix string) (Keys, error) { return NewKeysIn(prefix, Buckets) }

// NewKeysIn returns Keys under prefix that spread groups over buckets
// hash tags (1 to Buckets) rather than Buckets. Fewer buckets make fewer,
// larger script calls, for a Redis that is no cluster: a backtest's.
func NewKeysIn(prefix string, buckets int) (Keys, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Keys{}, err
	}
	if buckets < 1 || buckets > Buckets {
		return Keys{}, fmt.Errorf("%d buckets: must be 1 to %d", buckets, Buckets)
	}
	return Keys{prefix: prefix, buckets: uint32(buckets)}, nil
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

// Group identifies one group: its values, encoded, and its buckets. Its
// counting keys (windows, their values, marks and evidence, and its
// bucket's offsets) take the tag of its bucket among the Keys' buckets,
// which a replica may set (rules.EngineConfig.Buckets); its alerts' keys
// (cooldown, silences, records) take the tag of its bucket among all
// Buckets, whatever the setting: commands that set no buckets (silence,
// the status page, a click) name them, and they outlive a change of it.
type Group struct {
	tag    string // "{bucket}" of the counting keys
	alert  string // "{bucket}" of the alerts' keys
	enc    string // encoded values
	sum    uint32 // enc's FNV-1a, for tables by group (Sum)
	bucket uint8  // tag's bucket, for arrays by bucket (Bucket)
}

// Group derives the group of group_by values.
func (k Keys) Group(values []string) Group { return k.group(encodeGroup(values)) }

func (k Keys) group(enc string) Group {
	h := fnv(enc)
	b := h % k.buckets
	return Group{tag: tags[b], alert: tags[h%Buckets], enc: enc, sum: h, bucket: uint8(b)}
}

// Bucket is the number of the group's bucket, 0 to Buckets-1: the planner
// finds a bucket's open call in an array by it rather than in a map by Tag.
func (g Group) Bucket() int { return int(g.bucket) }

// Sum is the FNV-1a hash of the group's encoding, which its buckets are
// taken from: the planner finds a call's window by it.
func (g Group) Sum() uint32 { return g.sum }

// fnv is FNV-1a: a group's bucket.
func fnv(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// tags are the buckets' hash tags, made once: every event makes groups.
var tags = func() (t [Buckets]string) {
	for b := range t {
		t[b] = "{" + string(hexDigits[b>>4]) + string(hexDigits[b&0xF]) + "}"
	}
	return t
}()

// Tag is the hash tag of the group's bucket, braces included: what the
// counting keys of its bucket's groups share.
func (g Group) Tag() string { return g.tag }

// Encoding is the group's values as its keys spell them (see encodeGroup):
// what an alert carries to name its group.
func (g Group) Encoding() string { return g.enc }

// ParseGroup is the group an Encoding names. It refuses anything
// encodeGroup never makes, so that a group read from a message cannot
// reach outside its own keys (a ':' of its own, a brace, a hash tag).
func (k Keys) ParseGroup(enc string) (Group, error) {
	if !validEncoding(enc) {
		// Not quoted: it spells a group's values, which are personal data.
		return Group{}, errors.New("lua: no group's encoding")
	}
	return k.group(enc), nil
}

// validEncoding reports whether encodeGroup can make enc.
func validEncoding(enc string) bool {
	switch {
	case enc == "%":
		return true
	case strings.HasPrefix(enc, "~"):
		if len(enc) != 65 {
			return false
		}
		for i := 1; i < len(enc); i++ {
			if !strings.ContainsRune("0123456789abcdef", rune(enc[i])) {
				return false
			}
		}
		return true
	case enc == "" || len(enc) > maxPlainGroup:
		return false
	}
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case keeps(c), c == ':':
		case c == '%' && i+2 < len(enc) && isHex(enc[i+1]) && isHex(enc[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func (k Keys) key(kind string, g Group, rule string) string {
	return k.prefix + ":" + g.tag + ":" + kind + ":" + rule + ":" + g.enc
}

// alertKey is key in the tag of the group's alerts (Group).
func (k Keys) alertKey(kind string, g Group, rule string) string {
	return k.prefix + ":" + g.alert + ":" + kind + ":" + rule + ":" + g.enc
}

// Window is the key of a rule's sliding or distinct window for a group.
func (k Keys) Window(g Group, rule string) string { return k.key("w", g, rule) }

// Counter is the key of a rule's fixed count or amount window for a group:
// its count, or, when its rule keeps evidence, a hash of its count and the
// orders its evidence keeps (incr_and_check).
// Its kind is not Window's, so that the hashes fixed windows were under w
// before the bucket offsets are never read as counters.
func (k Keys) Counter(g Group, rule string) string { return k.key("f", g, rule) }

// Offsets is the key of the offsets of a group's bucket: for each source
// partition and counting script, the last offset applied in the bucket.
func (k Keys) Offsets(g Group) string { return k.prefix + ":" + g.tag + ":o" }

// Values is the key of the values a distinct rule's window counts.
func (k Keys) Values(g Group, rule string) string { return k.key("d", g, rule) }

// Silences is the key of the silences of a rule's group: silence id -> its
// end (alert_claim, silence_add).
func (k Keys) Silences(g Group, rule string) string { return k.alertKey("s", g, rule) }

// RuleSilences is the key of the silences of a whole rule in the hash tag
// of g: a rule's silence is written to every bucket, so that claiming an
// alert reads it in the alert's own slot. "*" is no group's encoding.
func (k Keys) RuleSilences(g Group, rule string) string {
	return k.alertKey("s", Group{alert: g.alert, enc: "*"}, rule)
}

// AllRuleSilences lists a rule's silences keys, one a bucket of all
// Buckets (the alerts' tags: Group).
func (k Keys) AllRuleSilences(rule string) []string {
	out := make([]string, Buckets)
	for b := range out {
		out[b] = k.RuleSilences(Group{alert: tags[b]}, rule)
	}
	return out
}

// CountingBuckets is the key of how many buckets the replicas under the
// prefix count in (redis.buckets), which each rewrites to live a short
// while: a replica with another count finds it there.
func (k Keys) CountingBuckets() string { return k.prefix + ":counting-buckets" }

// SilenceIndex is the key of every silence's description (id -> JSON), for
// listing and expiring them; claims never read it.
func (k Keys) SilenceIndex() string { return k.prefix + ":silences" }

// Marks is the key of the marks of the events that crossed a rule's
// threshold for a group, which outlive its windows so that a late
// redelivery of one still hands its alert off.
func (k Keys) Marks(g Group, rule string) string { return k.key("x", g, rule) }

// Evidence is the key of the latest orders of a rule's sliding or distinct
// window for a group near its threshold (evidence_add), which its alerts
// list. A fixed count or amount window holds its own, in its hash
// (incr_and_check).
func (k Keys) Evidence(g Group, rule string) string { return k.key("l", g, rule) }

// Cooldown is the key of a rule's alert cooldown for a group.
func (k Keys) Cooldown(g Group, rule string) string { return k.alertKey("c", g, rule) }

// AlertRecord is the key of one alert's delivery record as versions before
// records per receiver wrote it (a string, its state), which claims still
// read. The event id is hashed: it may hold any bytes, and the record only
// needs to tell alerts apart.
func (k Keys) AlertRecord(g Group, rule, eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return k.alertKey("a", g, rule) + ":" + hex.EncodeToString(sum[:16])
}

// Record is the key of one alert's record for one receiver (a hash:
// alert_claim), in the hash tag of the alert's cooldown. The receiver
// (ValidReceiver) comes last: it holds no ':', and the event id's hash
// before it is 32 hex digits, so no two (group, alert, receiver) share a
// key.
func (k Keys) Record(g Group, rule, eventID, receiver string) string {
	sum := sha256.Sum256([]byte(eventID))
	return k.alertKey("r", g, rule) + ":" + hex.EncodeToString(sum[:16]) + ":" + receiver
}

// Alert is the key of one alert's hash, in the hash tag of its cooldown
// and records: the send decision its first claim made, which every
// receiver follows (alert_claim), and its life after its post: open,
// acknowledged, resolved, who, its assignee and its JSON (alert_life).
func (k Keys) Alert(g Group, rule, eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return k.alertKey("h", g, rule) + ":" + hex.EncodeToString(sum[:16])
}

// OpenAlerts names the index of open alerts, in a hash tag of its own: a
// sorted set of alert ids by when they opened, and their refs (id -> the
// alert.Ref's JSON, which names the alert's keys).
func (k Keys) OpenAlerts() (index, refs string) {
	return k.prefix + ":{alerts}:open", k.prefix + ":{alerts}:refs"
}

// maxPlainGroup bounds the readable form of a group; longer groups are
// hashed so that a 10 KB address cannot make 10 KB keys.
const maxPlainGroup = 200

// encodeGroup turns group_by values into a string that can sit inside a
// hash tag and that no other tuple of values produces:
//
//   - Each value is percent-escaped, keeping only [A-Za-z0-9] and -._@+.
//     No escaped value holds '{', '}', ':' or white space.
//   - Values are joined with ':', so ["a:b","c"] and ["a","b:c"] stay apart
//     (a%3Ab:c vs a:b%3Ac).
//   - An encoding longer than maxPlainGroup becomes '~' and its SHA-256.
//     Escaping never makes '~', so a hashed group cannot equal a plain one;
//     two tuples share a hashed group only if SHA-256 collides.
//   - A single empty value is a lone '%', which escaping never makes. An
//     empty "{}" tag would make Redis hash the whole key.
func encodeGroup(values []string) string {
	if len(values) == 1 && plain(values[0]) {
		return values[0] // the common case, with nothing to escape
	}
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteByte(':')
		}
		escape(&b, v)
	}
	if b.Len() == 0 {
		return "%"
	}
	if b.Len() <= maxPlainGroup {
		return b.String()
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "~" + hex.EncodeToString(sum[:])
}

const hexDigits = "0123456789ABCDEF"

// plain reports whether v is its own encoding: not empty, nothing to
// escape, and short enough not to be hashed.
func plain(v string) bool {
	if v == "" || len(v) > maxPlainGroup {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !keeps(v[i]) {
			return false
		}
	}
	return true
}

// keeps reports whether escaping keeps a byte as it is.
func keeps(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '@' || c == '+'
}

func escape(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if keeps(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xF])
	}
}

// EventID is the short form of an event id that windows remember: the
// first 8 bytes of its SHA-256, which no event id can be made to share by
// design.
type EventID [8]byte

// IDOf returns the EventID of an event id.
func IDOf(eventID string) EventID {
	sum := sha256.Sum256([]byte(eventID))
	return EventID(sum[:8])
}

// ValueOf returns what a distinct window keeps of a value: the first 8
// bytes of its SHA-256, so a 10 KB value costs 8 bytes. Two values count as
// one only if their hashes collide: about one pair in 2^32 among 2^32
// values, and a window holds at most 10,001.
func ValueOf(value string) EventID { return IDOf(value) }

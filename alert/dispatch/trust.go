package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// Reasons a message of the alerts topic is dropped: the reason label of
// fraudwatch_alerts_dropped_total.
const (
	DroppedUnreadable  = "unreadable"   // not an alert's JSON
	DroppedMalformed   = "malformed"    // a field out of bounds, a group its values do not make
	DroppedUnverified  = "unverified"   // no crossing mark or no seal in Redis (not an alert fraudwatch published), or a seal dated ahead
	DroppedUnknownRule = "unknown_rule" // a rule not in force, after the grace
	DroppedRefused     = "refused"      // the claim script refused its arguments
	DroppedStale       = "stale"        // published longer ago than its delivery record lives
)

// deadLetterer takes the alerts the dispatcher cannot trust or settle
// (consumer.Consumer's dead-letter topic).
type deadLetterer interface {
	DeadLetter(ctx context.Context, msg kafka.Message, why string) error
}

// SetDeadLetters makes the dispatcher write the messages it drops to a
// dead-letter topic, where an operator finds them; without one they are
// only counted and logged.
func (d *Dispatcher) SetDeadLetters(dl deadLetterer) { d.dead.Store(&dl) }

// drop counts and logs a message of the alerts topic that is not
// delivered, and writes it to the dead-letter topic; an error means the
// message must come round again. err names the reason and the field, never
// a value (package lua's errors do not quote group encodings either).
func (d *Dispatcher) drop(ctx context.Context, msg kafka.Message, reason string, err error, attrs ...any) error {
	if dl := d.dead.Load(); dl != nil {
		if werr := (*dl).DeadLetter(ctx, msg, "alert "+reason+": "+err.Error()); werr != nil {
			return fmt.Errorf("alert: dead-letter an alert (%s): %w", reason, werr)
		}
	}
	d.dropped(reason, append([]any{"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "err", err}, attrs...)...)
	return nil
}

// accept reads a message of the alerts topic into an alert it can act on;
// false when the message is settled already: dropped (to the dead-letter
// topic) or stale. Nothing in the message is trusted: it is verified
// first, against Redis alone (verify), and only then is its rule looked
// up (trust), so that nothing fraudwatch did not publish holds its
// partition for a moment.
func (d *Dispatcher) accept(ctx context.Context, msg kafka.Message) (alert.Alert, bool, error) {
	a, err := alert.Decode(msg.Value)
	if err != nil {
		// Only fraudwatch writes this topic; a message it cannot read is
		// a bug or a foreign writer, and no retry will make it readable.
		return alert.Alert{}, false, d.drop(ctx, msg, DroppedUnreadable, errors.New("alert: not an alert's JSON"))
	}
	v, reason, err := d.verify(ctx, &a)
	switch {
	case reason == DroppedMalformed:
		return alert.Alert{}, false, d.drop(ctx, msg, reason, err) // its rule name may be anything
	case reason != "":
		return alert.Alert{}, false, d.drop(ctx, msg, reason, err, "rule", a.Rule)
	case err != nil:
		return alert.Alert{}, false, err
	}
	if stale, err := d.stale(ctx, msg, &a); stale || err != nil {
		return alert.Alert{}, false, err
	}
	a, reason, err = d.trust(a, v)
	switch {
	case reason == DroppedUnknownRule && a.Sealed() && d.graceRuns(msg, a.PublishedAt):
		return alert.Alert{}, false, fmt.Errorf("alert: %w (retried for %v after it was published: this replica may not have reloaded its rules yet)", err, d.cfg.UnknownRuleGrace)
	case reason != "":
		return alert.Alert{}, false, d.drop(ctx, msg, reason, err, "rule", a.Rule)
	}
	if v.legacy {
		d.m.legacy.Inc()
	}
	return a, true, nil
}

// vouched is what Redis vouches for of a message of the alerts topic.
type vouched struct {
	group lua.Group
	value int64 // the window's value at the crossing, from its mark
	// legacy: written before alerts were sealed; only the crossing's mark
	// vouches for it.
	legacy bool
}

// verify checks a message against Redis before anything else, needing no
// rule: its fields within bounds, its group the one its values make, and
// in one round trip the crossing it names (the marks key is built from
// its rule's name, definition and group) and its seal. A sealed message
// is vouched for when Redis holds both: the crossing was decided and this
// very alert was published. A message without a seal (written by a
// version before seals) is vouched for by the crossing's mark alone, and
// only while Redis holds no seal of that rule's definition and group:
// once fraudwatch seals their alerts, an unsealed one is someone else's.
// It returns the reason to drop a message that is not vouched for, or an
// error to retry it.
func (d *Dispatcher) verify(ctx context.Context, a *alert.Alert) (v vouched, reason string, err error) {
	if err := a.WithinBounds(); err != nil {
		return v, DroppedMalformed, err
	}
	if v.group, err = d.groupOf(a); err != nil {
		return v, DroppedMalformed, err
	}
	v.legacy = !a.Sealed()
	if a.Definition == "" {
		// Written before alerts named their definition: the rule in force
		// names it, when there is one.
		rs, ok := d.ruleOf(a.Rule)
		if !ok || !v.legacy {
			return v, DroppedUnverified, errors.New("alert: names no definition of its rule to check its crossing under")
		}
		a.Definition = rs.Fingerprint
	}
	var seal []byte
	if !v.legacy {
		h := a.Seal()
		seal = h[:]
	} else if ok, err := d.unsealedTaken(ctx); err != nil || !ok {
		if err != nil {
			return v, "", err
		}
		return v, DroppedUnverified, fmt.Errorf("alert: unsealed, and fraudwatch has sealed its alerts for over %v", UnsealedFor)
	}
	c, err := d.crossing(ctx, v.group, a, seal)
	switch {
	case err != nil:
		return v, "", fmt.Errorf("alert: check the crossing of %s/%s: %w", a.Rule, a.EventID, err)
	case !c.Marked:
		return v, DroppedUnverified, errors.New("alert: Redis holds no crossing of its rule and group by its event")
	case !v.legacy && !c.Sealed:
		return v, DroppedUnverified, errors.New("alert: Redis holds no seal of it: not an alert fraudwatch published as it reads")
	case v.legacy && c.Sealed:
		return v, DroppedUnverified, errors.New("alert: unsealed, but fraudwatch seals the alerts of its rule and group")
	}
	v.value = c.Value
	return v, "", nil
}

// crossing reads the alert's crossing from its marks. With fewer counting
// buckets than lua.Buckets (redis.buckets), a crossing not found among
// them is looked for where a replica with all of them (a version before
// the setting, or before it was changed) counted it: an alert it published
// may still wait in the alerts topic.
func (d *Dispatcher) crossing(ctx context.Context, g lua.Group, a *alert.Alert, seal []byte) (lua.Crossing, error) {
	rule, id := a.Rule+"."+a.Definition, lua.IDOf(a.EventID)
	c, err := d.claims.Crossing(ctx, d.keys.Marks(g, rule), id, seal)
	if err != nil || c.Marked || d.cfg.Buckets == lua.Buckets {
		return c, err
	}
	all, err := lua.NewKeys(d.cfg.KeyPrefix)
	if err != nil {
		return c, fmt.Errorf("alert: key prefix: %w", err)
	}
	ag, err := all.ParseGroup(g.Encoding())
	if err != nil {
		return c, fmt.Errorf("alert: %w", err)
	}
	return d.claims.Crossing(ctx, all.Marks(ag, rule), id, seal)
}

// maxSkew is how far ahead of this process's clock an alert's
// published_at may be: clocks of hosts apart.
const maxSkew = time.Minute

// stale drops an alert published longer ago than its delivery record
// lives: the record may be gone, and posting it could post it twice (a
// replay), while days late it is news to nobody. A sealed alert's age is
// its published_at by this process's clock, which nobody can change
// without breaking its seal. One published further ahead than clocks
// drift apart is dropped as unverified, loudly: its age cannot be told,
// and a clock is off. An unsealed one has only its Kafka timestamp,
// which its producer chose.
func (d *Dispatcher) stale(ctx context.Context, msg kafka.Message, a *alert.Alert) (bool, error) {
	published := msg.Time
	if a.Sealed() {
		published = a.PublishedAt
		if ahead := time.Until(published); ahead > maxSkew {
			return true, d.drop(ctx, msg, DroppedUnverified,
				fmt.Errorf("alert: published %v ahead of this process's clock: a clock is off", ahead.Round(time.Second)), "rule", a.Rule)
		}
	}
	age := time.Since(published)
	if age <= d.claims.Retention() {
		return false, nil
	}
	d.dropped(DroppedStale, "topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "rule", a.Rule,
		"age", age.Round(time.Second).String())
	return true, nil
}

// graceRuns tells whether a sealed alert of a rule not in force is still
// within UnknownRuleGrace (another replica may have reloaded a new rule a
// moment earlier): counted from when it was published or from when this
// process first read msg, whichever was sooner. Its producer's timestamp
// does not count. So only a crossing fraudwatch published in the last
// grace holds its partition, and copies of one hold it no longer than
// the crossing itself.
func (d *Dispatcher) graceRuns(msg kafka.Message, published time.Time) bool {
	return d.seen.waited(msg) < d.cfg.UnknownRuleGrace && time.Since(published) < d.cfg.UnknownRuleGrace
}

// ruleOf is the rule in force named name, or one a reload removed in the
// last UnknownRuleGrace.
func (d *Dispatcher) ruleOf(name string) (RuleSettings, bool) {
	if rs, ok := (*d.rules.Load())[name]; ok {
		return rs, true
	}
	return d.removed.lookup(name, d.cfg.UnknownRuleGrace, time.Now())
}

// trust makes a vouched-for alert one the dispatcher can act on: its rule
// must be in force, and its settings replace whatever the message says of
// its rule; the value is the mark's; the id and every Redis key are built
// here from the rule, group and event id. An unsealed alert (legacy)
// shows only what Redis vouches for. It returns why the message is
// dropped (a Dropped* reason), if it is.
func (d *Dispatcher) trust(a alert.Alert, v vouched) (_ alert.Alert, reason string, err error) {
	rs, ok := d.ruleOf(a.Rule)
	if !ok {
		return a, DroppedUnknownRule, fmt.Errorf("alert: rule %s is not in force", a.Rule)
	}
	if a.Definition == rs.Fingerprint {
		if len(rs.GroupBy) != len(a.GroupValues) {
			return a, DroppedMalformed, fmt.Errorf("alert: %d group values for the rule's %d fields", len(a.GroupValues), len(rs.GroupBy))
		}
		a.Metric, a.Field, a.GroupBy, a.Window, a.WindowType = rs.Metric, rs.Field, slices.Clone(rs.GroupBy), rs.Window, rs.WindowType
	} else if v.legacy {
		// What it says of its old definition, nothing vouches for.
		return a, DroppedUnverified, errors.New("alert: unsealed, and crossed under a definition its rule no longer has")
	}
	// Otherwise the rule's definition changed since the crossing (a
	// reload): what the sealed message says of the old one is shown, and
	// the crossing was checked under the old one's marks.
	a.Mode, a.Cooldown, a.Channel = rs.Mode, rs.Cooldown, rs.Channel
	a.Severity, a.Threshold = rs.Severity, rs.Threshold
	a.Current = v.value // the window's value as the script decided it
	if v.legacy {
		unvouched(&a, v.group)
	}
	// Rendered from what the alert shows, so that it agrees with it.
	a.Description = alert.Cut(alert.Describe(rs.Description, &a), 1024)
	if v.legacy {
		a.Description += legacyNote
	}
	a.ID = a.Rule + "/" + a.EventID
	g := v.group
	a.CooldownKey = d.keys.Cooldown(g, a.Rule)
	a.RecordKey = d.keys.AlertRecord(g, a.Rule, a.EventID)
	a.SilenceKey = d.keys.Silences(g, a.Rule)
	a.RuleSilence = d.keys.RuleSilences(g, a.Rule)
	// Built from what the alert shows, never taken from the message.
	a.Links = alert.MakeLinks(rs.Links, a)
	return a, "", nil
}

// legacyNote ends the description of an alert written before alerts were
// sealed, which shows only what Redis vouches for.
const legacyNote = " (Written by an older fraudwatch during an upgrade: its order, time, currency and evidence are not shown, as nothing vouches for them; the time is when it was read.)"

// unvouched takes from an unsealed alert what Redis does not vouch for:
// its crossing's mark vouches for its rule, definition, group, event and
// value, and the rule in force for the rest. A hashed group's values
// cannot be told from the group (they were cut for display), so they are
// not shown either.
func unvouched(a *alert.Alert, g lua.Group) {
	a.OrderID, a.Currency, a.Evidence = "", "", nil
	a.At = time.Now().UTC()
	if strings.HasPrefix(g.Encoding(), "~") {
		for i := range a.GroupValues {
			a.GroupValues[i] = "(not shown)"
		}
	}
}

// groupOf is the group an alert names, which must be the one its values
// make: the keys use the group, the post shows the values.
func (d *Dispatcher) groupOf(a *alert.Alert) (lua.Group, error) {
	byValues := d.keys.Group(a.GroupValues)
	if a.Group == "" {
		// Written before alerts named their group: its values name it.
		return byValues, nil
	}
	g, err := d.keys.ParseGroup(a.Group)
	if err != nil {
		return lua.Group{}, fmt.Errorf("alert: %w", err)
	}
	if byValues.Encoding() == g.Encoding() {
		return g, nil
	}
	// Long values are cut for display (each to 1 KiB, all to 16 KiB, and
	// marked "…"), so they no longer make their group, whose keys then use
	// its hash; the seal vouches for the values as fraudwatch published
	// them (an unsealed alert does not show them: unvouched).
	if strings.HasPrefix(g.Encoding(), "~") && slices.ContainsFunc(a.GroupValues, func(v string) bool { return strings.HasSuffix(v, "…") }) {
		return g, nil
	}
	return lua.Group{}, errors.New("alert: its group values do not make its group")
}

// firstSeen remembers when this process first read the message at the
// head of each partition of the alerts topic: only the head is ever read
// again (a partition is handled in order), so it holds one entry a
// partition.
type firstSeen struct {
	mu sync.Mutex
	at map[partitionOf]seenAt
}

type partitionOf struct {
	topic     string
	partition int
}

type seenAt struct {
	offset int64
	at     time.Time
}

// waited is how long ago this process first read msg.
func (f *firstSeen) waited(msg kafka.Message) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[partitionOf]seenAt{}
	}
	p := partitionOf{msg.Topic, msg.Partition}
	s, ok := f.at[p]
	if !ok || s.offset != msg.Offset {
		s = seenAt{offset: msg.Offset, at: time.Now()}
		f.at[p] = s
	}
	return time.Since(s.at)
}

// UnsealedFor is how long after fraudwatch began to seal its alerts in a
// Redis (the first seal a new engine wrote) unsealed
// alerts, of the version before, are still taken: a rolling upgrade and
// the alerts it leaves on the topic. Past it, an unsealed message is
// someone else's: taken later, one written between a crossing's mark and
// its seal would be posted in the real alert's stead.
const UnsealedFor = time.Hour

// unsealedTaken reports whether an unsealed alert may still be taken: it
// is less than UnsealedFor since fraudwatch began to seal in this Redis.
func (d *Dispatcher) unsealedTaken(ctx context.Context) (bool, error) {
	since := d.sealsSince.Load()
	if since == nil {
		t, sealed, err := d.claims.SealsSince(ctx, d.keys.SealsSince())
		if err != nil {
			return false, fmt.Errorf("alert: %w", err)
		}
		if !sealed {
			return true, nil // no replica seals yet: the upgrade has not begun
		}
		since = &t
		d.sealsSince.Store(since) // it never changes, but by a flush
	}
	return time.Since(*since) < UnsealedFor, nil
}

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
	DroppedUnverified  = "unverified"   // no crossing mark in Redis: a crossing Redis never decided
	DroppedUnknownRule = "unknown_rule" // a rule not in force, after the grace
	DroppedRefused     = "refused"      // the claim script refused its arguments
	DroppedStale       = "stale"        // older than its delivery record would live
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
// topic) or stale. Nothing in the message is trusted: the crossing it names
// must be one Redis decided (its mark), and the rule in force supplies
// everything the rule decides.
func (d *Dispatcher) accept(ctx context.Context, msg kafka.Message) (alert.Alert, bool, error) {
	a, err := alert.Decode(msg.Value)
	if err != nil {
		// Only fraudwatch writes this topic; a message it cannot read is
		// a bug or a foreign writer, and no retry will make it readable.
		return alert.Alert{}, false, d.drop(ctx, msg, DroppedUnreadable, errors.New("alert: not an alert's JSON"))
	}
	if age := time.Since(msg.Time); age > d.claims.Retention() {
		// Its delivery record may have expired: sending it now could post
		// it a second time, and days late it is news to nobody.
		d.dropped(DroppedStale, "topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
			"age", age.Round(time.Second).String())
		return alert.Alert{}, false, nil
	}
	a, marks, reason, err := d.trust(a)
	switch {
	case reason == DroppedUnknownRule:
		// Timed from when this process first read the message, never from
		// its timestamp, which its producer chose.
		if waited := d.seen.waited(msg); waited < d.cfg.UnknownRuleGrace {
			return alert.Alert{}, false, fmt.Errorf("alert: %w (retried for %v: this replica may not have reloaded its rules yet)", err, d.cfg.UnknownRuleGrace)
		}
		return alert.Alert{}, false, d.drop(ctx, msg, reason, err)
	case err != nil:
		return alert.Alert{}, false, d.drop(ctx, msg, reason, err)
	}
	value, ok, err := d.claims.Crossed(ctx, marks, lua.IDOf(a.EventID))
	if err != nil {
		return alert.Alert{}, false, fmt.Errorf("alert: check the crossing of %s: %w", a.ID, err)
	}
	if !ok {
		return alert.Alert{}, false, d.drop(ctx, msg, DroppedUnverified,
			errors.New("alert: Redis holds no crossing of its rule and group by its event"), "rule", a.Rule)
	}
	a.Current = value // the window's value as the script decided it
	return a, true, nil
}

// trust makes an alert read from the topic one the dispatcher can act on
// without trusting its writer: every field must be within bounds, its rule
// must be one in force, and its group must be what its values make. The
// rule's settings replace whatever the message says of its rule; the id
// and every Redis key are built here from the rule, group and event id.
// It returns the key of the crossing marks to check, or why the message is
// dropped (a Dropped* reason).
func (d *Dispatcher) trust(a alert.Alert) (_ alert.Alert, marks, reason string, err error) {
	if err := a.WithinBounds(); err != nil {
		return alert.Alert{}, "", DroppedMalformed, err
	}
	rs, ok := (*d.rules.Load())[a.Rule]
	if !ok {
		rs, ok = d.removed.lookup(a.Rule, d.cfg.UnknownRuleGrace, time.Now())
	}
	if !ok {
		return alert.Alert{}, "", DroppedUnknownRule, fmt.Errorf("alert: rule %s is not in force", a.Rule)
	}
	g, err := d.groupOf(&a)
	if err != nil {
		return alert.Alert{}, "", DroppedMalformed, err
	}
	if a.Definition == "" {
		a.Definition = rs.Fingerprint
	}
	if a.Definition == rs.Fingerprint {
		if len(rs.GroupBy) != len(a.GroupValues) {
			return alert.Alert{}, "", DroppedMalformed, fmt.Errorf("alert: %d group values for the rule's %d fields", len(a.GroupValues), len(rs.GroupBy))
		}
		a.Metric, a.Field, a.GroupBy, a.Window, a.WindowType = rs.Metric, rs.Field, slices.Clone(rs.GroupBy), rs.Window, rs.WindowType
	}
	// Otherwise the rule's definition changed since the crossing (a
	// reload): what the message says of the old one is only shown, and
	// the crossing is still checked under the old one's marks.
	a.Mode, a.Cooldown, a.Channel = rs.Mode, rs.Cooldown, rs.Channel
	a.Severity, a.Threshold = rs.Severity, rs.Threshold
	// Rendered from what the alert shows, so that it agrees with it.
	a.Description = alert.Cut(alert.Describe(rs.Description, &a), 1024)
	a.ID = a.Rule + "/" + a.EventID
	a.CooldownKey = d.keys.Cooldown(g, a.Rule)
	a.RecordKey = d.keys.AlertRecord(g, a.Rule, a.EventID)
	a.SilenceKey = d.keys.Silences(g, a.Rule)
	a.RuleSilence = d.keys.RuleSilences(g, a.Rule)
	return a, d.keys.Marks(g, a.Rule+"."+a.Definition), "", nil
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
	// its hash; the crossing mark still ties the group to a crossing Redis
	// decided.
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

package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// lifeStore is what the dispatcher needs of alerts' lives: the index of
// open alerts it adds each alert sent to, and what an update reads and
// records.
type lifeStore interface {
	IndexAlerts(ctx context.Context, index, refs string, alerts []lua.Indexing, limit int, lifetime time.Duration) error
	LifeAndRecord(ctx context.Context, lifeKey, recordKey string) (lua.Life, lua.Record, error)
	ObserveAck(ctx context.Context, key string) (opened, acked time.Time, first bool, err error)
	ShowLife(ctx context.Context, recordKey string, version int64) (bool, error)
}

// An alert's life changes (a click, the CLI) in Redis; then a small
// message, an update, says so on the alerts topic, keyed like the alert's
// own messages so that it follows them on their partition. It names the
// alert and nothing more: every receiver's dispatcher reads the alert's
// life from Redis, and shows it where it delivered the alert (an
// alert.Updater), once a change. The message is trusted for nothing: a
// forged one costs a read and changes nothing.

// UpdateType is the type of an update message; no alert's message has a
// type.
const UpdateType = "alert_update"

// updateMessage is an update's JSON: the alert.Ref of the alert whose life
// changed.
type updateMessage struct {
	Type    string `json:"type"`
	Rule    string `json:"rule"`
	Group   string `json:"group"`
	EventID string `json:"event_id"`
}

// EncodeUpdate is the message value that says the life of ref's alert
// changed.
func EncodeUpdate(ref alert.Ref) ([]byte, error) {
	return json.Marshal(updateMessage{Type: UpdateType, Rule: ref.Rule, Group: ref.Group, EventID: ref.EventID})
}

// PublishUpdate writes an update of ref's alert to the alerts topic,
// keyed by key, the alert's cooldown key (its messages' key: lua.Keys.
// Cooldown), and waits for every in-sync replica to have it.
func (t *Topic) PublishUpdate(ctx context.Context, key string, ref alert.Ref) error {
	value, err := EncodeUpdate(ref)
	if err != nil {
		return fmt.Errorf("alert: encode an update of %s/%s: %w", ref.Rule, ref.EventID, err)
	}
	if err := t.w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: value}); err != nil {
		return fmt.Errorf("alert: write an update of an alert of %s to %s: %w", ref.Rule, t.w.Topic, err)
	}
	return nil
}

// isUpdate tells an update's message from an alert's: it has a type.
func isUpdate(value []byte) bool {
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	return json.Unmarshal(value, &probe) == nil && probe.Type != nil
}

// maxUpdateBytes bounds an update's message: a Ref's fields are bounded.
const maxUpdateBytes = 4096

// parseUpdate reads an update strictly: its type, and a Ref whose fields
// are within an alert's bounds and whose group is one encodeGroup makes.
func (d *Dispatcher) parseUpdate(value []byte) (alert.Ref, lua.Group, error) {
	if len(value) > maxUpdateBytes {
		return alert.Ref{}, lua.Group{}, fmt.Errorf("alert: an update of %d bytes", len(value))
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	var u updateMessage
	if err := dec.Decode(&u); err != nil || dec.More() {
		return alert.Ref{}, lua.Group{}, errors.New("alert: not an update's JSON")
	}
	switch {
	case u.Type != UpdateType:
		return alert.Ref{}, lua.Group{}, errors.New("alert: a message of an unknown type")
	case u.Rule == "" || len(u.Rule) > 64 || strings.ContainsAny(u.Rule, ":{} ./"):
		return alert.Ref{}, lua.Group{}, fmt.Errorf("alert: an update's rule name of %d bytes", len(u.Rule))
	case u.EventID == "" || len(u.EventID) > 128:
		return alert.Ref{}, lua.Group{}, fmt.Errorf("alert: an update's event id of %d bytes", len(u.EventID))
	}
	g, err := d.keys.ParseGroup(u.Group)
	if err != nil {
		return alert.Ref{}, lua.Group{}, fmt.Errorf("alert: an update's %w", err)
	}
	return alert.Ref{Rule: u.Rule, Group: u.Group, EventID: u.EventID}, g, nil
}

// Results of an update as fraudwatch_alert_updates_total counts them.
const (
	UpdateShown     = "shown"     // the receiver shows the alert's new state
	UpdateUnchanged = "unchanged" // it shows it already, or shows no state (not an Updater, not sent here)
	UpdateUnknown   = "unknown"   // no such alert has a life: forged, or its records ended
	UpdateElsewhere = "elsewhere" // the alert's rule routes to other receivers
	UpdateFailed    = "failed"    // the receiver refused the update for good
)

// routes tells whether receivers (a rule's; nil: every receiver) include
// receiver.
func routes(receivers []string, receiver string) bool {
	return receivers == nil || slices.Contains(receivers, receiver)
}

// handleUpdate settles an update's message: it reads the alert's life and
// this receiver's record of it from Redis, observes the time to
// acknowledge once of all readers, and shows the life where this
// receiver delivered the alert, if it is an Updater and shows an older
// one. An error means the message must come round again.
func (d *Dispatcher) handleUpdate(ctx context.Context, msg kafka.Message) error {
	ref, g, err := d.parseUpdate(msg.Value)
	if err != nil {
		return d.drop(ctx, msg, DroppedMalformed, err)
	}
	rs, known := d.ruleOf(ref.Rule)
	if known && !routes(rs.Receivers, d.receiver) {
		d.m.updates.WithLabelValues(UpdateElsewhere).Inc()
		return nil
	}
	lifeKey, recordKey := d.keys.Alert(g, ref.Rule, ref.EventID), d.keys.Record(g, ref.Rule, ref.EventID, d.receiver)
	l, rec, err := d.claims.LifeAndRecord(ctx, lifeKey, recordKey)
	if err != nil {
		return fmt.Errorf("alert: update of %s/%s: %w", ref.Rule, ref.EventID, err)
	}
	a, ok := d.lifeAlert(l, ref)
	if !ok {
		d.m.updates.WithLabelValues(UpdateUnknown).Inc()
		d.log.Info("update of an alert without a life ignored", "rule_given", known, "topic", msg.Topic,
			"partition", msg.Partition, "offset", msg.Offset)
		return nil
	}
	if err := d.observeAck(ctx, lifeKey, ref.Rule, l); err != nil {
		return err
	}
	up, isUpdater := d.notifier.(alert.Updater)
	if !isUpdater || rec.State != "sent" || rec.Shown >= l.Version {
		d.m.updates.WithLabelValues(UpdateUnchanged).Inc()
		return nil
	}
	if known {
		a.Links = alert.MakeLinks(rs.Links, a)
	}
	return d.showLife(ctx, up, a, l, rec, recordKey)
}

// lifeAlert is the alert a life keeps, which must be the one ref names;
// false when there is no life, or it keeps no readable alert.
func (d *Dispatcher) lifeAlert(l lua.Life, ref alert.Ref) (alert.Alert, bool) {
	if l.Status == "" {
		return alert.Alert{}, false
	}
	var a alert.Alert
	if json.Unmarshal(l.Alert, &a) != nil || a.Rule != ref.Rule || a.EventID != ref.EventID {
		return alert.Alert{}, false
	}
	return a, true
}

// showLife calls Update, with the retries RetryPolicy allows, then
// records the version the receiver shows. A refusal for good is counted
// and logged, and the message is done.
func (d *Dispatcher) showLife(ctx context.Context, up alert.Updater, a alert.Alert, l lua.Life, rec lua.Record, recordKey string) error {
	var receipt alert.Receipt
	if rec.Receipt != "" {
		_ = json.Unmarshal([]byte(rec.Receipt), &receipt) // kept by receiptText; unreadable is none
	}
	st := StateOf(l)
	log := d.log.With("rule", a.Rule, "alert_id", a.ID, "status", string(st.Status))
	e, err := d.attempts(ctx, log, a.Rule, d.cfg.MaxAttempts, func(ctx context.Context) (alert.Receipt, error) {
		return alert.Receipt{}, up.Update(ctx, a, st, receipt)
	})
	if err != nil {
		return fmt.Errorf("alert: update %s: %w", a.ID, err)
	}
	if e.v != delivered {
		d.m.updates.WithLabelValues(UpdateFailed).Inc()
		log.Error("the receiver refused an alert's update for good; its message keeps its last state", "err", e.cause)
		return nil
	}
	if _, err := d.claims.ShowLife(context.WithoutCancel(ctx), recordKey, l.Version); err != nil {
		return fmt.Errorf("alert: record the update of %s: %w", a.ID, err)
	}
	d.m.updates.WithLabelValues(UpdateShown).Inc()
	log.Info("alert's update shown")
	return nil
}

// observeAck observes the alert's time to acknowledge, if it is
// acknowledged and no reader of any replica or receiver has yet.
func (d *Dispatcher) observeAck(ctx context.Context, lifeKey, rule string, l lua.Life) error {
	if l.AckedAt.IsZero() {
		return nil
	}
	opened, acked, first, err := d.claims.ObserveAck(ctx, lifeKey)
	if err != nil {
		return fmt.Errorf("alert: observe an acknowledgement: %w", err)
	}
	if first {
		d.m.ackSeconds.WithLabelValues(rule).Observe(max(0, acked.Sub(opened).Seconds()))
	}
	return nil
}

// StateOf is the alert.State a life holds.
func StateOf(l lua.Life) alert.State {
	return alert.State{Status: alert.Status(l.Status), OpenedAt: l.OpenedAt, AckedBy: l.AckedBy, AckedAt: l.AckedAt,
		ResolvedBy: l.ResolvedBy, ResolvedAt: l.ResolvedAt, Assignee: l.Assignee, Label: alert.Label(l.Label),
		LabelledBy: l.LabelledBy, LabelledAt: l.LabelledAt}
}

// lifeCopy is the alert as its life keeps it (lua.AlertClaim.Alert): whole,
// or without its evidence when that is too long; nil, no life, when even
// that is.
func lifeCopy(a alert.Alert) []byte {
	b, err := json.Marshal(a)
	if err == nil && len(b) <= lua.MaxAlertJSON {
		return b
	}
	a.Evidence = nil
	if b, err = json.Marshal(a); err == nil && len(b) <= lua.MaxAlertJSON {
		return b
	}
	return nil
}

// outcomeNoter notes alerts sent, with the orders they list, for their
// outcomes to judge (outcome.Store.OpenedAll). Idempotent.
type outcomeNoter interface {
	OpenedAll(ctx context.Context, alerts []alert.Alert, refs []alert.Ref) error
}

// SetOutcomes makes the dispatcher note each alert it sends in o
// (docs/outcomes.md); without it, alerts are judged only once labelled.
func (d *Dispatcher) SetOutcomes(o outcomeNoter) { d.outcomes.Store(&o) }

// catchUp shows an alert's life where it was just posted, when the life
// changed before the post: an alert that waited for its budget, or was
// parked, while someone acknowledged it from the CLI or another receiver
// is posted as it was published, open, and the update that said the
// change was read before there was a post to show it on. Best effort: the
// alert is sent and recorded so, and a failure here is logged, not
// retried (the next change shows the whole state again).
func (d *Dispatcher) catchUp(ctx context.Context, a alert.Alert) {
	up, ok := d.notifier.(alert.Updater)
	if !ok {
		return
	}
	k, err := d.alertKeys(a)
	if err == nil {
		var l lua.Life
		var rec lua.Record
		if l, rec, err = d.claims.LifeAndRecord(ctx, k.alert, k.record); err == nil {
			if l.Version == 0 || rec.State != "sent" || rec.Shown >= l.Version {
				return
			}
			err = d.showLife(ctx, up, a, l, rec, k.record)
		}
	}
	if err != nil {
		d.log.Warn("an alert changed before its post, and its post could not be brought up to date",
			"rule", a.Rule, "alert_id", a.ID, "err", err)
	}
}

package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// repeatStore is what a repeat crossing needs of Redis.
type repeatStore interface {
	CooldownHolder(ctx context.Context, key string) (string, error)
	Record(ctx context.Context, recordKey, legacyKey string) (lua.Record, error)
	MarkRepeat(ctx context.Context, recordKey, claimant string, op lua.RepeatOp) (lua.Repeat, error)
}

// repeat handles a repeat crossing: an alert of the topic suppressed
// because another alert of its (rule, group) holds the cooldown. It is
// counted once per receiver (fraudwatch_alert_repeats_total); to a
// Threader whose record of the holding alert keeps a receipt, it is posted
// once as a reply in the holder's thread, within the budget. Past the
// budget it is counted, not posted: it was suppressed, and its count says
// it. An error means its message must come round again.
func (d *Dispatcher) repeat(ctx context.Context, a alert.Alert) error {
	k, err := d.alertKeys(a)
	if err != nil {
		return fmt.Errorf("alert: repeat %s: %w", a.ID, err)
	}
	th, threads := d.notifier.(alert.Threader)
	var parent alert.Receipt
	if threads {
		if parent, err = d.holderReceipt(ctx, a, k.group); err != nil {
			return err
		}
	}
	op := lua.RepeatCount
	if !parent.IsZero() {
		op = lua.RepeatReply
	}
	r, err := d.claims.MarkRepeat(ctx, k.record, a.Claimant, op)
	if err != nil {
		return fmt.Errorf("alert: repeat %s: %w", a.ID, err)
	}
	if r == lua.RepeatNew {
		d.m.repeats.WithLabelValues(a.Rule).Inc()
	}
	if op != lua.RepeatReply || (r != lua.RepeatNew && r != lua.RepeatRetry) {
		return nil
	}
	if !d.unbudgeted {
		if ok, err := d.takeBudget(ctx, a.Channel); err != nil || !ok {
			if err == nil {
				d.log.Info("repeat crossing past the budget: counted, not posted in its thread", "rule", a.Rule, "alert_id", a.ID)
			}
			return err
		}
	}
	log := d.log.With("rule", a.Rule, "alert_id", a.ID)
	e, err := d.attempts(ctx, log, a.Rule, d.cfg.MaxAttempts, func(ctx context.Context) (alert.Receipt, error) {
		return th.Reply(ctx, a, parent)
	})
	if err != nil {
		return fmt.Errorf("alert: repeat %s: %w", a.ID, err)
	}
	if e.v != delivered {
		log.Warn("the receiver refused a repeat crossing's reply in its thread; it stays counted", "err", e.cause)
	}
	if _, err := d.claims.MarkRepeat(context.WithoutCancel(ctx), k.record, a.Claimant, lua.RepeatReplied); err != nil {
		return fmt.Errorf("alert: record the reply of %s: %w", a.ID, err)
	}
	if e.v == delivered {
		log.Info("repeat crossing posted in its alert's thread")
	}
	return nil
}

// holderReceipt is the receipt of this receiver's post of the alert that
// holds a's cooldown; zero when none holds it, or this receiver did not
// post it, or kept no receipt.
func (d *Dispatcher) holderReceipt(ctx context.Context, a alert.Alert, g lua.Group) (alert.Receipt, error) {
	holder, err := d.claims.CooldownHolder(ctx, a.CooldownKey)
	if err != nil {
		return alert.Receipt{}, fmt.Errorf("alert: repeat %s: %w", a.ID, err)
	}
	ev, ok := strings.CutPrefix(holder, a.Rule+"/")
	if !ok || holder == a.ID || ev == "" {
		return alert.Receipt{}, nil
	}
	rec, err := d.claims.Record(ctx, d.keys.Record(g, a.Rule, ev, d.receiver), "")
	if err != nil {
		return alert.Receipt{}, fmt.Errorf("alert: repeat %s: %w", a.ID, err)
	}
	var r alert.Receipt
	if rec.State != "sent" || rec.Receipt == "" || json.Unmarshal([]byte(rec.Receipt), &r) != nil {
		return alert.Receipt{}, nil
	}
	return r, nil
}

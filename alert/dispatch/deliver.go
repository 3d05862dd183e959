package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// ErrNotDelivered is returned when every attempt at a message failed with
// an error worth retrying (Slack down, 429s, timeouts). The alert is not
// lost: its caller keeps it (the alerts topic offset is not committed) and
// delivers it again later.
var ErrNotDelivered = errors.New("alert: not delivered yet")

// claimOutcomes are the claims that settle an alert, or a copy of it, as
// record names them.
var claimOutcomes = map[lua.Claim]string{
	lua.ClaimSuppressed: SuppressedCooldown,
	lua.ClaimSilenced:   SuppressedSilenced,
	lua.ClaimSent:       sentBefore,
	lua.ClaimFailed:     failedBefore,
	lua.ClaimElsewhere:  claimedElsewhere,
}

// keysOf are an alert's keys that the message does not carry.
type keysOf struct {
	group  lua.Group
	record string // its record for the dispatcher's receiver
	alert  string // its hash: decision and life (lua.Keys.Alert)
}

// alertKeys are the keys of the alert's record for the dispatcher's
// receiver and of its hash, in the hash tag of its cooldown (the group
// trust checked, or that its values make, for alerts written before
// alerts named it).
func (d *Dispatcher) alertKeys(a alert.Alert) (keysOf, error) {
	g := d.keys.Group(a.GroupValues)
	if a.Group != "" {
		var err error
		if g, err = d.keys.ParseGroup(a.Group); err != nil {
			return keysOf{}, err
		}
	}
	return keysOf{group: g, record: d.keys.Record(g, a.Rule, a.EventID, d.receiver),
		alert: d.keys.Alert(g, a.Rule, a.EventID)}, nil
}

// send posts claimed alerts of one rule as one message and settles them
// by how it ended: the path from claim to settle of every alert read from
// the topic. An error means the message is not delivered yet.
func (d *Dispatcher) send(ctx context.Context, alerts ...alert.Alert) error {
	e, err := d.post(ctx, d.cfg.MaxAttempts, alerts)
	if err != nil {
		return err
	}
	return d.conclude(ctx, e, alerts)
}

// ending is how the attempts at one message ended, when they ended it: the
// verdict, the receiver's receipt of a message delivered, and the
// notifier's refusal of one not delivered.
type ending struct {
	v       verdict
	receipt alert.Receipt
	cause   error
}

// post sends claimed alerts of one rule as one message, a digest when
// there are several, retrying as RetryPolicy says up to maxAttempts times.
// An error means the message is not delivered yet; otherwise the ending
// says how the attempts ended.
func (d *Dispatcher) post(ctx context.Context, maxAttempts int, alerts []alert.Alert) (ending, error) {
	return d.postAs(ctx, maxAttempts, alerts, len(alerts) > 1)
}

// postAs is post, a digest even of one alert when digest is set (a waiting
// alert kept compact, without what a post of its own shows).
func (d *Dispatcher) postAs(ctx context.Context, maxAttempts int, alerts []alert.Alert, digest bool) (ending, error) {
	a := alerts[0]
	notify := func(ctx context.Context) (alert.Receipt, error) { return d.notifier.Notify(ctx, a) }
	if digest {
		dg, ok := d.notifier.(alert.Digester)
		if !ok {
			return ending{}, fmt.Errorf("alert: %d alerts of %s in one message, but the notifier sends no digests", len(alerts), a.Rule)
		}
		digest := alert.Digest{Rule: a.Rule, Channel: a.Channel, Alerts: alerts, List: d.cfg.DigestSize}
		notify = func(ctx context.Context) (alert.Receipt, error) { return dg.NotifyDigest(ctx, digest) }
	}
	e, err := d.attempts(ctx, d.log.With(messageAttrs(alerts)...), a.Rule, maxAttempts, notify)
	if err != nil {
		return ending{}, fmt.Errorf("alert: %s: %w", messageName(alerts), err)
	}
	return e, nil
}

// messageName names a message in an error: its alert, or its rule's
// digest.
func messageName(alerts []alert.Alert) string {
	if len(alerts) == 1 {
		return alerts[0].ID
	}
	return "digest of " + alerts[0].Rule
}

// verdict is how the attempts at one message ended, when they ended it.
type verdict int

const (
	delivered verdict = iota
	// channelRefused: the notifier refused the message's channel
	// (*ChannelError); the alerts are parked.
	channelRefused
	// refusedForGood: the notifier refused the message as such; sent again
	// it would be refused again.
	refusedForGood
)

// attempts tries notify up to maxAttempts times, with the backoff or the
// receiver's Retry-After between them. An error means the message is not
// delivered yet and must come round again; otherwise the ending says how
// it ended.
func (d *Dispatcher) attempts(ctx context.Context, log *slog.Logger, rule string, maxAttempts int,
	notify func(context.Context) (alert.Receipt, error)) (ending, error) {
	backoff := d.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		actx, cancel := d.attemptContext(ctx)
		receipt, err := notify(actx)
		cancel()
		if err == nil {
			return ending{v: delivered, receipt: receipt}, nil
		}
		if ctx.Err() != nil {
			return ending{}, fmt.Errorf("alert: deliver: %w", ctx.Err())
		}
		if _, ok := errors.AsType[*alert.ChannelError](err); ok {
			// Its channel is the problem, not Slack: the alerts of other
			// channels behind it on this partition must not wait for it.
			return ending{v: channelRefused, cause: err}, nil
		}
		retry, wait := alert.RetryPolicy(err)
		if !retry {
			return ending{v: refusedForGood, cause: err}, nil
		}
		d.m.retries.WithLabelValues(rule).Inc()
		if attempt >= maxAttempts {
			log.Warn("alert not delivered yet; it stays queued", "attempts", attempt, "err", err)
			return ending{}, fmt.Errorf("%w: %d attempts, last: %w", ErrNotDelivered, attempt, err)
		}
		if wait > 0 {
			wait = min(wait, d.cfg.MaxRetryAfter)
		} else {
			wait = backoff
			backoff = min(2*backoff, d.cfg.MaxBackoff)
		}
		log.Warn("alert delivery failed; will retry", "attempt", attempt, "retry_in", wait.String(), "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ending{}, fmt.Errorf("alert: deliver: %w", ctx.Err())
		}
	}
}

// attemptContext bounds one attempt by AttemptTimeout, and by
// InFlightGrace once ctx ends: a post under way when a shutdown or a
// rebalance ends ctx is let finish, so that one the receiver took is
// recorded sent rather than sent again by the next owner.
func (d *Dispatcher) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.AttemptTimeout)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(d.cfg.InFlightGrace, cancel) })
	return actx, func() { stop(); cancel() }
}

// conclude settles the alerts one message carried by how its attempts
// ended: sent (alone, or digested when several) with the message's
// receipt, given up, or parked. attrs add to the outcome's log line.
func (d *Dispatcher) conclude(ctx context.Context, e ending, alerts []alert.Alert, attrs ...any) error {
	switch e.v {
	case channelRefused:
		ce, _ := errors.AsType[*alert.ChannelError](e.cause)
		for _, a := range alerts {
			if err := d.park(ctx, a, ce); err != nil {
				return err
			}
		}
		return nil
	case refusedForGood:
		if err := d.settle(ctx, lua.SettleFailed, "", alerts...); err != nil {
			return err
		}
		d.record(OutcomeFailed, alerts, append(attrs, "err", e.cause)...)
		return nil
	}
	if err := d.settle(ctx, lua.SettleSent, d.receiptText(e.receipt, alerts), alerts...); err != nil {
		return err
	}
	outcome := OutcomeSent
	if len(alerts) > 1 {
		outcome = OutcomeDigested
	}
	d.record(outcome, alerts, attrs...)
	if len(alerts) == 1 {
		d.catchUp(ctx, alerts[0])
	}
	return nil
}

// receiptText is a receipt as records keep it (JSON), "" for none. One
// too long to keep is left out, and said: the alerts are still recorded
// sent.
func (d *Dispatcher) receiptText(r alert.Receipt, alerts []alert.Alert) string {
	if r.IsZero() {
		return ""
	}
	b, err := json.Marshal(r)
	if err != nil || len(b) > lua.MaxReceipt {
		d.log.Warn("the receiver's receipt is too long to keep; the alerts are recorded sent without it",
			append(messageAttrs(alerts), "bytes", len(b))...)
		return ""
	}
	return string(b)
}

// settle records one ending for claimed alerts (a digest's, or one
// alert), in one round trip, with the receipt of the message that carried
// them (sent) or the claim handed to the parked alerts (parked). It
// insists: an alert sent but not recorded as sent would be posted again by
// a redelivery. So it does not give up when ctx ends (a shutdown, a
// rebalance cutting work short, right after Slack took the post) but keeps
// trying for a bounded while on its own.
func (d *Dispatcher) settle(ctx context.Context, end lua.Ending, receipt string, alerts ...alert.Alert) error {
	if len(alerts) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(settleFor)
	backoff := 50 * time.Millisecond
	records := make([]lua.Settlement, len(alerts))
	for i, a := range alerts {
		k, err := d.alertKeys(a)
		if err != nil {
			return fmt.Errorf("alert: record outcome of %s: %w", a.ID, err)
		}
		records[i] = lua.Settlement{CooldownKey: a.CooldownKey, RecordKey: k.record, AlertKey: k.alert, ID: a.ID,
			Claimant: a.Claimant, Receipt: receipt}
	}
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := d.claims.SettleAlerts(actx, end, records...)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("alert: record outcome of %d alerts of %s, %s first: %w", len(alerts), alerts[0].Rule, alerts[0].ID, err)
		}
		d.log.Warn("recording the alerts' outcome failed; retrying", "rule", alerts[0].Rule, "alert_id", alerts[0].ID,
			"alerts", len(alerts), "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// settleFor bounds how long settle keeps trying.
const settleFor = 10 * time.Second

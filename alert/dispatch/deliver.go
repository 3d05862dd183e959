package dispatch

import (
	"context"
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

// claim decides an alert (alert_claim) and records the decision: true
// when it is to be sent, now its; false when it is settled (shadow,
// suppressed, silenced, sent or given up before). Every alert passes here
// before it is sent, whether read from the topic or parked.
func (d *Dispatcher) claim(ctx context.Context, a alert.Alert) (bool, error) {
	if a.Shadow() {
		d.record(SuppressedShadow, []alert.Alert{a}, "current", a.Current, "threshold", a.Threshold)
		return false, nil
	}
	claim, err := d.claims.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, a.Cooldown, silences(&a)...)
	if err != nil {
		return false, fmt.Errorf("alert: claim %s: %w", a.ID, err)
	}
	if outcome, settled := claimOutcomes[claim]; settled {
		d.record(outcome, []alert.Alert{a})
	}
	return claim == lua.ClaimSend, nil
}

// claimOutcomes are the claims that settle an alert, as record names them.
var claimOutcomes = map[lua.Claim]string{
	lua.ClaimSuppressed: SuppressedCooldown,
	lua.ClaimSilenced:   SuppressedSilenced,
	lua.ClaimSent:       sentBefore,
	lua.ClaimFailed:     failedBefore,
}

// silences are the keys of the silences that stop the alert, when it
// names them.
func silences(a *alert.Alert) []string {
	if a.SilenceKey == "" || a.RuleSilence == "" {
		return nil
	}
	return []string{a.SilenceKey, a.RuleSilence}
}

// send posts claimed alerts of one rule as one message and settles them
// by how it ended: the path from claim to settle of every alert read from
// the topic. An error means the message is not delivered yet.
func (d *Dispatcher) send(ctx context.Context, alerts ...alert.Alert) error {
	v, cause, err := d.post(ctx, d.cfg.MaxAttempts, alerts)
	if err != nil {
		return err
	}
	return d.conclude(ctx, v, cause, alerts)
}

// post sends claimed alerts of one rule as one message, a digest when
// there are several, retrying as RetryPolicy says up to maxAttempts times.
// An error means the message is not delivered yet; otherwise the verdict
// says how the attempts ended, and cause is the notifier's refusal.
func (d *Dispatcher) post(ctx context.Context, maxAttempts int, alerts []alert.Alert) (v verdict, cause, err error) {
	return d.postAs(ctx, maxAttempts, alerts, len(alerts) > 1)
}

// postAs is post, a digest even of one alert when digest is set (a waiting
// alert kept compact, without what a post of its own shows).
func (d *Dispatcher) postAs(ctx context.Context, maxAttempts int, alerts []alert.Alert, digest bool) (v verdict, cause, err error) {
	a := alerts[0]
	notify := func(ctx context.Context) error { return d.notifier.Notify(ctx, a) }
	if digest {
		dg, ok := d.notifier.(alert.Digester)
		if !ok {
			return 0, nil, fmt.Errorf("alert: %d alerts of %s in one message, but the notifier sends no digests", len(alerts), a.Rule)
		}
		digest := alert.Digest{Rule: a.Rule, Channel: a.Channel, Alerts: alerts, List: d.cfg.DigestSize}
		notify = func(ctx context.Context) error { return dg.NotifyDigest(ctx, digest) }
	}
	v, cause, err = d.attempts(ctx, d.log.With(messageAttrs(alerts)...), a.Rule, maxAttempts, notify)
	if err != nil {
		return 0, nil, fmt.Errorf("alert: %s: %w", messageName(alerts), err)
	}
	return v, cause, nil
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
// delivered yet and must come round again; otherwise the verdict says how
// it ended, and cause is the notifier's refusal.
func (d *Dispatcher) attempts(ctx context.Context, log *slog.Logger, rule string, maxAttempts int, notify func(context.Context) error) (v verdict, cause, err error) {
	backoff := d.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
		err := notify(actx)
		cancel()
		if err == nil {
			return delivered, nil, nil
		}
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("alert: deliver: %w", ctx.Err())
		}
		if _, ok := errors.AsType[*alert.ChannelError](err); ok {
			// Its channel is the problem, not Slack: the alerts of other
			// channels behind it on this partition must not wait for it.
			return channelRefused, err, nil
		}
		retry, wait := alert.RetryPolicy(err)
		if !retry {
			return refusedForGood, err, nil
		}
		d.m.retries.WithLabelValues(rule).Inc()
		if attempt >= maxAttempts {
			log.Warn("alert not delivered yet; it stays queued", "attempts", attempt, "err", err)
			return 0, nil, fmt.Errorf("%w: %d attempts, last: %w", ErrNotDelivered, attempt, err)
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
			return 0, nil, fmt.Errorf("alert: deliver: %w", ctx.Err())
		}
	}
}

// conclude settles the alerts one message carried by how its attempts
// ended: sent (alone, or digested when several), given up, or parked.
// attrs add to the outcome's log line.
func (d *Dispatcher) conclude(ctx context.Context, v verdict, cause error, alerts []alert.Alert, attrs ...any) error {
	switch v {
	case channelRefused:
		ce, _ := errors.AsType[*alert.ChannelError](cause)
		for _, a := range alerts {
			if err := d.park(ctx, a, ce); err != nil {
				return err
			}
		}
		return nil
	case refusedForGood:
		if err := d.settle(ctx, false, alerts...); err != nil {
			return err
		}
		d.record(OutcomeFailed, alerts, append(attrs, "err", cause)...)
		return nil
	}
	if err := d.settle(ctx, true, alerts...); err != nil {
		return err
	}
	outcome := OutcomeSent
	if len(alerts) > 1 {
		outcome = OutcomeDigested
	}
	d.record(outcome, alerts, attrs...)
	return nil
}

// settle records one outcome for claimed alerts (a digest's, or one
// alert), in one round trip. It insists: an alert sent but not recorded as
// sent would be posted again by a redelivery. So it does not give up when
// ctx ends (a shutdown, a rebalance cutting work short, right after Slack
// took the post) but keeps trying for a bounded while on its own.
func (d *Dispatcher) settle(ctx context.Context, sent bool, alerts ...alert.Alert) error {
	if len(alerts) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(settleFor)
	backoff := 50 * time.Millisecond
	records := make([]lua.Settlement, len(alerts))
	for i, a := range alerts {
		records[i] = lua.Settlement{CooldownKey: a.CooldownKey, RecordKey: a.RecordKey, ID: a.ID}
	}
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := d.claims.SettleAlerts(actx, sent, records...)
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

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

// Deliver settles one alert, outside any budget and without checking its
// crossing mark (HandleMessages does both): it is sent, suppressed
// (cooldown, shadow or silence), recognised as sent before, given up on
// for good, or parked; then Deliver returns nil and the alert may be
// acknowledged. It returns an error, wrapping ErrNotDelivered when Slack
// kept failing, when the alert must be delivered again later.
func (d *Dispatcher) Deliver(ctx context.Context, a alert.Alert) error {
	send, err := d.claim(ctx, a)
	if err != nil || !send {
		return err
	}
	return d.send(ctx, a)
}

// claim decides an alert (alert_claim): true when it is to be sent, now
// its; false when it is settled (shadow, suppressed, silenced, sent or
// given up before).
func (d *Dispatcher) claim(ctx context.Context, a alert.Alert) (bool, error) {
	log := d.log.With("rule", a.Rule, "alert_id", a.ID)
	if a.Shadow() {
		d.settled(&a, SuppressedShadow)
		log.Info("shadow rule crossed its threshold; not notifying", "current", a.Current, "threshold", a.Threshold)
		return false, nil
	}
	claim, err := d.claims.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, a.Cooldown, silences(&a)...)
	if err != nil {
		return false, fmt.Errorf("alert: claim %s: %w", a.ID, err)
	}
	switch claim {
	case lua.ClaimSuppressed:
		d.settled(&a, SuppressedCooldown)
		log.Info("alert suppressed: the cooldown is held by an earlier alert")
	case lua.ClaimSilenced:
		d.settled(&a, SuppressedSilenced)
		log.Info("alert silenced: a silence of its rule or group runs")
	case lua.ClaimSent:
		log.Info("alert already delivered; not posting it again")
	case lua.ClaimFailed:
		log.Info("alert given up on before; not retrying it")
	}
	return claim == lua.ClaimSend, nil
}

// silences are the keys of the silences that stop the alert, when it
// names them.
func silences(a *alert.Alert) []string {
	if a.SilenceKey == "" || a.RuleSilence == "" {
		return nil
	}
	return []string{a.SilenceKey, a.RuleSilence}
}

// send posts a claimed alert, retrying as RetryPolicy says, and settles
// it.
func (d *Dispatcher) send(ctx context.Context, a alert.Alert) error {
	log := d.log.With("rule", a.Rule, "alert_id", a.ID)
	v, cause, err := d.attempts(ctx, log, a.Rule, d.cfg.MaxAttempts, func(ctx context.Context) error {
		return d.notifier.Notify(ctx, a)
	})
	if err != nil {
		return fmt.Errorf("alert: %s: %w", a.ID, err)
	}
	return d.conclude(ctx, log, v, cause, OutcomeSent, a)
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
// ended: sent (outcome says how: alone or in a digest), given up, or
// parked.
func (d *Dispatcher) conclude(ctx context.Context, log *slog.Logger, v verdict, cause error, outcome string, alerts ...alert.Alert) error {
	switch v {
	case channelRefused:
		ce, _ := errors.AsType[*alert.ChannelError](cause)
		for _, a := range alerts {
			if err := d.park(ctx, a, ce, log.With("alert_id", a.ID)); err != nil {
				return err
			}
		}
		return nil
	case refusedForGood:
		if err := d.settle(ctx, false, alerts...); err != nil {
			return err
		}
		for _, a := range alerts {
			d.settled(&a, OutcomeFailed)
		}
		log.Error("alert refused for good; given up, cooldown released", "err", cause)
		return nil
	}
	if err := d.settle(ctx, true, alerts...); err != nil {
		return err
	}
	for _, a := range alerts {
		d.settled(&a, outcome)
	}
	if outcome == OutcomeDigested {
		log.Info("alerts past the budget sent as one digest")
	} else {
		log.Info("alert sent")
	}
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

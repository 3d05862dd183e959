package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// DrainWaitingEvery sends the alerts waiting for their destination's
// budget every WaitingDrain, until ctx ends: a drain a destination at a
// time, each in its own goroutine, so that a destination Slack answers
// slowly (or with a Retry-After) never holds another's.
func (d *Dispatcher) DrainWaitingEvery(ctx context.Context) {
	t := time.NewTicker(d.cfg.WaitingDrain)
	defer t.Stop()
	var drains sync.WaitGroup
	defer drains.Wait()
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := d.drainWaiting(ctx, &drains)
			// Four passes a second: a Redis outage is said once a minute.
			if err != nil && ctx.Err() == nil && time.Since(warned) > time.Minute {
				warned = time.Now()
				d.log.Warn("sending waiting alerts", "err", err)
			}
		}
	}
}

// drainWaiting is one pass: it reads which rules have alerts waiting, sets
// fraudwatch_alerts_waiting from it, and starts a drain of each
// destination with alerts waiting that none of this replica's drains is
// sending and that does not back off. drains counts the drains started.
func (d *Dispatcher) drainWaiting(ctx context.Context, drains *sync.WaitGroup) error {
	rules, err := d.claims.WaitingRules(ctx, d.stores.WaitingIndex())
	if err != nil {
		return fmt.Errorf("alert: waiting alerts: %w", err)
	}
	byDest := map[string][]string{}
	counts := map[string]float64{}
	for rule, w := range rules {
		a := alert.Alert{Rule: rule, Channel: w.Channel}
		d.followRule(&a)
		dest := d.destination(a.Channel)
		byDest[dest] = append(byDest[dest], rule)
		counts[destinationLabel(dest)] += float64(w.Count)
	}
	d.setWaiting(counts)
	d.waits.seen(byDest)
	now := time.Now()
	for _, dest := range slices.Sorted(maps.Keys(byDest)) {
		if !d.waits.start(dest, now) {
			continue
		}
		drains.Go(func() {
			retryAfter, err := d.drainDestination(ctx, dest, byDest[dest])
			if err != nil && ctx.Err() == nil {
				d.log.Warn("sending waiting alerts failed; the destination backs off", "channel", destinationLabel(dest), "err", err)
			}
			d.waits.stop(dest, err != nil, retryAfter, d.cfg.MinBackoff, d.cfg.MaxBackoff)
		})
	}
	return nil
}

// setWaiting sets fraudwatch_alerts_waiting from what waits, by
// destination, with a series at 0 for every destination of a rule in
// force.
func (d *Dispatcher) setWaiting(counts map[string]float64) {
	d.m.waiting.Reset()
	for _, r := range *d.rules.Load() {
		d.m.waiting.WithLabelValues(destinationLabel(d.destination(r.Channel)))
	}
	for ch, n := range counts {
		d.m.waiting.WithLabelValues(ch).Set(n)
	}
}

// drainDestination sends the waiting alerts of dest's rules, a message a
// rule in turn, as long as the budget allows. An error means a message
// was not delivered (it stays waiting), and retryAfter is the receiver's
// wish of how long to wait.
func (d *Dispatcher) drainDestination(ctx context.Context, dest string, rules []string) (retryAfter time.Duration, err error) {
	for _, rule := range d.waits.order(dest, rules) {
		spent, err := d.drainRule(ctx, dest, rule)
		if err != nil {
			_, retryAfter = alert.RetryPolicy(err)
			return min(retryAfter, d.cfg.MaxRetryAfter), err
		}
		if spent {
			return 0, nil
		}
		d.waits.sent(dest, rule)
	}
	return 0, nil
}

// drainRule sends rule's waiting alerts, which go to dest, as one message
// if dest's budget allows (spent when it does not): those sealed, or else
// those that came in, sealed now. A lease keeps two replicas from sending
// one rule's at once. The budget is taken before the alerts are read, so
// that a rule waiting for it costs a pass two calls, however many wait.
// Each alert is claimed again (a silence that began meanwhile silences it;
// one settled by a redelivery is not sent), all of them in a few round
// trips (claimedAll), then the message settles them as any other; those whose channel is refused are parked. The alerts
// settled leave the waiting store; the others stay for the next pass.
func (d *Dispatcher) drainRule(ctx context.Context, dest, rule string) (spent bool, err error) {
	lease := d.stores.WaitingLease(rule)
	taken, err := d.claims.Lease(ctx, 2*d.cfg.AttemptTimeout+settleFor, lease)
	if err != nil || !taken[0] {
		return false, err // another replica sends them
	}
	defer d.release(ctx, []string{lease})
	k := d.stores.Waiting(rule)
	n, err := d.claims.TakeWaiting(ctx, k, rule)
	if err != nil || n == 0 {
		return false, err
	}
	if ok, err := d.takeBudgetOf(ctx, dest); err != nil || !ok {
		return err == nil, err
	}
	all, err := d.claims.Sealed(ctx, k)
	if err != nil {
		return false, err
	}
	alerts, done, compact := d.readWaiting(all)
	for i := range alerts {
		alerts[i].Claimant = lua.ParkedClaimant // wait handed its claim over
	}
	claims, err := d.claimedAll(ctx, alerts)
	if err != nil {
		return false, errors.Join(err, d.waitDone(ctx, rule, done))
	}
	var send []alert.Alert
	for i, a := range alerts {
		switch claims[i] {
		case lua.ClaimSend:
			send = append(send, a)
		case lua.ClaimElsewhere:
			// Kept, but its message has not handed the claim over yet (it
			// is about to, or crashed first and comes round): it stays.
		default:
			done = append(done, a.ID) // settled meanwhile (a redelivery, a silence)
		}
	}
	settled, spent, err := d.sendWaiting(ctx, dest, send, compact)
	return spent, errors.Join(err, d.waitDone(ctx, rule, append(done, settled...)))
}

// sendWaiting sends claimed alerts of one rule, each message within the
// budget (paid's first message is taken already), and returns the ids of
// those settled; spent when the budget stopped it. To a Digester, the
// alerts of one destination go as one message (a rule's alerts share one
// but for a rule removed after its channel changed), and a lone alert kept
// compact (the whole one of its digest settled meanwhile) goes as a digest
// of one, which shows what it keeps. To any other notifier, each alert is
// a message of its own, kept whole.
func (d *Dispatcher) sendWaiting(ctx context.Context, paid string, alerts []alert.Alert, compact map[string]bool) (settled []string, spent bool, err error) {
	_, digests := d.notifier.(alert.Digester)
	byDest := map[string][]alert.Alert{}
	var order []string
	var msgs [][]alert.Alert
	for _, a := range alerts {
		dest := d.destination(a.Channel)
		if !digests {
			msgs = append(msgs, []alert.Alert{a})
			continue
		}
		if byDest[dest] == nil {
			order = append(order, dest)
		}
		byDest[dest] = append(byDest[dest], a)
	}
	for _, dest := range order {
		msgs = append(msgs, byDest[dest])
	}
	unpaid := true // paid's one message, unused yet
	for _, msg := range msgs {
		if dest := d.destination(msg[0].Channel); dest == paid && unpaid {
			unpaid = false
		} else if ok, err := d.takeBudgetOf(ctx, dest); err != nil || !ok {
			return settled, err == nil, err
		}
		e, err := d.postAs(ctx, 1, msg, digests && (len(msg) > 1 || compact[msg[0].ID]))
		if err != nil {
			return settled, false, err
		}
		ids, err := d.concludeWaiting(ctx, e, msg)
		settled = append(settled, ids...)
		if err != nil {
			return settled, false, err
		}
	}
	return settled, false, nil
}

// concludeWaiting settles the alerts of one message as conclude does, but
// parks those whose channel is refused alert by alert, so that those it
// could park (before MaxParked) leave the waiting store and the others
// stay. It returns the ids of those settled or parked.
func (d *Dispatcher) concludeWaiting(ctx context.Context, e ending, alerts []alert.Alert) ([]string, error) {
	var ids []string
	if e.v == channelRefused {
		ce, _ := errors.AsType[*alert.ChannelError](e.cause)
		for _, a := range alerts {
			if err := d.park(ctx, a, ce); err != nil {
				return ids, err
			}
			ids = append(ids, a.ID)
		}
		return ids, nil
	}
	if err := d.conclude(ctx, e, alerts, "waited", true); err != nil {
		return nil, err
	}
	for _, a := range alerts {
		ids = append(ids, a.ID)
	}
	return ids, nil
}

// waitDone drops settled alerts from rule's sealed ones. It insists as
// settle does: an alert sent and settled but still sealed is claimed again
// by the next pass, which finds it settled, so a failure here costs a
// claim, never a post.
func (d *Dispatcher) waitDone(ctx context.Context, rule string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := d.claims.WaitDone(context.WithoutCancel(ctx), d.stores.Waiting(rule), rule, ids...); err != nil {
		return fmt.Errorf("alert: drop %d settled waiting alerts of %s: %w", len(ids), rule, err)
	}
	return nil
}

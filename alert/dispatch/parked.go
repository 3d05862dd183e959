package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// parkedAlert is an alert as the parked hash keeps it.
type parkedAlert struct {
	alert.Alert
	// ParkedAt bounds how long it stays: no longer than its delivery
	// record lives (Retention), past which posting it could post it twice.
	ParkedAt time.Time `json:"parked_at"`
}

// park keeps a claimed alert whose channel the notifier refuses in Redis,
// for retryParked; then the alert may be acknowledged. When MaxParked are
// parked already, it is not: an error then keeps its message on its
// partition, retried, as a Slack outage would.
func (d *Dispatcher) park(ctx context.Context, a alert.Alert, ce *alert.ChannelError) error {
	data, err := json.Marshal(parkedAlert{Alert: a, ParkedAt: time.Now()})
	if err != nil {
		return fmt.Errorf("alert: park %s: %w", a.ID, err)
	}
	// Under parking, so that a pass's count of what Redis holds is never
	// followed by this park's increment of an alert it already counted.
	d.parking.Lock()
	defer d.parking.Unlock()
	p, err := d.claims.Park(ctx, d.stores.Parked(), a.ID, data, d.cfg.MaxParked, d.claims.Retention())
	if err != nil {
		return fmt.Errorf("alert: park %s: %w", a.ID, err)
	}
	if p == lua.ParkFull {
		d.log.Error("alert not parked: as many alerts as max parked wait already; it stays on its partition",
			"rule", a.Rule, "alert_id", a.ID, "channel", ce.Channel, "max_parked", d.cfg.MaxParked)
		return fmt.Errorf("%w: %s: its channel is refused, and %d alerts are parked already", ErrNotDelivered, a.ID, d.cfg.MaxParked)
	}
	// Parked first, then the claim handed over: a crash in between leaves
	// the message uncommitted, to claim and park again.
	if err := d.settle(ctx, lua.SettleParked, "", a); err != nil {
		return fmt.Errorf("alert: park %s: %w", a.ID, err)
	}
	if p == lua.Parked {
		// Parked again (a redelivery, a digest's alerts), it was counted.
		d.m.parked.WithLabelValues(destinationLabel(d.destination(a.Channel))).Inc()
	}
	// The gauge counts the rule's channel, as retryParked does; the log
	// names the channel Slack refused, the default's own name included.
	d.record(OutcomeParked, []alert.Alert{a}, "channel", ce.Channel, "err", ce.Err)
	return nil
}

// RetryParkedEvery runs retryParked every ParkedRetry until ctx ends.
func (d *Dispatcher) RetryParkedEvery(ctx context.Context) {
	t := time.NewTicker(d.cfg.ParkedRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := d.retryParked(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("retrying parked alerts", "err", err)
			}
		}
	}
}

// retryParked tries the parked alerts once more. Each rule's alerts that no
// other replica is trying go as one message within the alert budget (a
// digest when there are several); they are posted, or stay parked while
// their channel is refused. Alerts settled meanwhile, and those parked
// longer than their delivery records live, are forgotten. Then it sets
// fraudwatch_alerts_parked from what Redis holds.
func (d *Dispatcher) retryParked(ctx context.Context) error {
	all, err := d.claims.Parked(ctx, d.stores.Parked())
	if err != nil {
		return fmt.Errorf("alert: retry parked alerts: %w", err)
	}
	groups, gone := d.readParked(all)
	if err := d.claims.Unpark(ctx, d.stores.Parked(), gone...); err != nil {
		return fmt.Errorf("alert: retry parked alerts: %w", err)
	}
	var errs []error
	for _, g := range slices.SortedFunc(maps.Keys(groups), func(a, b parkedGroup) int {
		return cmp.Or(cmp.Compare(a.channel, b.channel), cmp.Compare(a.rule, b.rule))
	}) {
		if err := d.retryGroup(ctx, groups[g]); err != nil {
			errs = append(errs, err)
			break
		}
	}
	// Counted even after a failed try: the gauge must not keep a count
	// that the next pass may be as far from.
	errs = append(errs, d.countParked(ctx))
	return errors.Join(errs...)
}

// countParked sets fraudwatch_alerts_parked from what Redis holds, by the
// destination each alert would go to now, with a series at 0 for every
// destination of a rule in force. Parks wait meanwhile (parking), so that
// none is counted twice or lost between the read and the set.
func (d *Dispatcher) countParked(ctx context.Context) error {
	d.parking.Lock()
	defer d.parking.Unlock()
	all, err := d.claims.Parked(ctx, d.stores.Parked())
	if err != nil {
		return fmt.Errorf("alert: count parked alerts: %w", err)
	}
	waiting := map[string]float64{}
	for id, data := range all {
		var p parkedAlert
		if json.Unmarshal([]byte(data), &p) != nil || p.ID != id {
			continue // forgotten by the next pass, which logs it
		}
		d.followRule(&p.Alert)
		waiting[destinationLabel(d.destination(p.Channel))]++
	}
	d.m.parked.Reset()
	for _, r := range *d.rules.Load() {
		d.m.parked.WithLabelValues(destinationLabel(d.destination(r.Channel)))
	}
	for ch, n := range waiting {
		d.m.parked.WithLabelValues(ch).Set(n)
	}
	return nil
}

// parkedGroup is the parked alerts of one rule and channel, which go out
// as one message.
type parkedGroup struct{ channel, rule string }

// readParked sorts the parked alerts into groups, oldest first; gone are
// those to forget: unreadable, or parked longer than their records live.
func (d *Dispatcher) readParked(all map[string]string) (groups map[parkedGroup][]alert.Alert, gone []string) {
	groups = map[parkedGroup][]alert.Alert{}
	parkedAt := map[string]time.Time{}
	for id, data := range all {
		var p parkedAlert
		if err := json.Unmarshal([]byte(data), &p); err != nil || p.ID != id {
			d.log.Warn("unreadable parked alert forgotten")
			gone = append(gone, id)
			continue
		}
		at := cmp.Or(p.ParkedAt, p.At) // parked before parked_at was kept
		if age := time.Since(at); age > d.claims.Retention() {
			d.dropped(DroppedStale, "rule", p.Rule, "alert_id", p.ID, "parked", true, "age", age.Round(time.Second).String())
			gone = append(gone, id)
			continue
		}
		parkedAt[id] = at
		d.followRule(&p.Alert)
		g := parkedGroup{d.destination(p.Channel), p.Rule}
		groups[g] = append(groups[g], p.Alert)
	}
	for _, alerts := range groups {
		slices.SortFunc(alerts, func(a, b alert.Alert) int {
			return cmp.Or(parkedAt[a.ID].Compare(parkedAt[b.ID]), cmp.Compare(a.ID, b.ID))
		})
	}
	return groups, gone
}

// retryGroup tries one group of parked alerts once: those another replica
// is trying, and those whose one message was not delivered, stay parked.
func (d *Dispatcher) retryGroup(ctx context.Context, alerts []alert.Alert) error {
	leases := make([]string, len(alerts))
	for i, a := range alerts {
		leases[i] = d.stores.ParkedLease(a.ID)
	}
	// Two replicas must never post one alert: a lease each, longer than
	// one try and its records.
	taken, err := d.claims.Lease(ctx, 2*d.cfg.AttemptTimeout+settleFor, leases...)
	if err != nil {
		return fmt.Errorf("alert: retry parked alerts: %w", err)
	}
	var mine, held []string
	var ours []alert.Alert
	for i, a := range alerts {
		if taken[i] {
			held = append(held, leases[i])
			a.Claimant = lua.ParkedClaimant
			ours = append(ours, a)
		}
	}
	claims, err := d.claimedAll(ctx, ours)
	if err != nil {
		d.release(ctx, held)
		return fmt.Errorf("alert: parked: %w", err)
	}
	var send []alert.Alert
	for i, a := range ours {
		switch claims[i] {
		case lua.ClaimSend:
			send = append(send, a)
		case lua.ClaimElsewhere:
			// Its message, uncommitted, parked it but had not handed the
			// claim over (a crash): it comes round, and settles or parks
			// it again; meanwhile it stays parked.
		default:
			mine = append(mine, a.ID) // settled meanwhile (a redelivery, a silence, the cooldown)
		}
	}
	sent, err := d.retryOnce(ctx, send)
	mine = append(mine, sent...)
	if uerr := d.claims.Unpark(ctx, d.stores.Parked(), mine...); uerr != nil && err == nil {
		err = fmt.Errorf("alert: %w", uerr)
	}
	// The next pass may try again at once; a crash leaves the leases to
	// run out.
	d.release(ctx, held)
	return err
}

func (d *Dispatcher) release(ctx context.Context, leases []string) {
	if err := d.claims.Release(context.WithoutCancel(ctx), leases...); err != nil {
		d.log.Warn("releasing leases", "err", err)
	}
}

// retryOnce tries claimed parked alerts of one rule once, as one message
// within the budget (a digest when there are several), and returns the ids
// of those settled: sent, or given up.
func (d *Dispatcher) retryOnce(ctx context.Context, alerts []alert.Alert) (settled []string, err error) {
	if len(alerts) == 0 {
		return nil, nil
	}
	if _, ok := d.notifier.(alert.Digester); !ok {
		alerts = alerts[:1] // without digests, one alert a try
	}
	if !d.unbudgeted {
		if ok, err := d.takeBudget(ctx, alerts[0].Channel); err != nil || !ok {
			return nil, err // past the budget: the next pass
		}
	}
	e, err := d.post(ctx, 1, alerts)
	if err != nil || e.v == channelRefused {
		return nil, nil // stays parked, for the next pass
	}
	if err := d.conclude(ctx, e, alerts, "parked", true); err != nil {
		return nil, err
	}
	for _, a := range alerts {
		settled = append(settled, a.ID)
	}
	return settled, nil
}

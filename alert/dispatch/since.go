package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// receiverSince is what SkipHistory needs of Redis: when the receiver
// first ran, recorded by the first replica to ask (lua.Scripts).
type receiverSince interface {
	ReceiverSince(ctx context.Context, key string, at time.Time) (time.Time, bool, error)
}

// beforeReceiver reports whether a was published before the dispatcher's
// receiver first ran, with SkipHistory: such an alert is not this
// receiver's to deliver. The first replica's start is kept in Redis
// (Keys.ReceiverSince), so that a replica started later still delivers
// what was published between the first start and its own. An alert
// without a publication time (written before seals) is history too.
func (d *Dispatcher) beforeReceiver(ctx context.Context, a alert.Alert) (bool, error) {
	if !d.cfg.SkipHistory {
		return false, nil
	}
	since := d.since.Load()
	if since == nil {
		rs, ok := d.claims.(receiverSince)
		if !ok {
			return false, fmt.Errorf("alert: skip history of receiver %s: the scripts cannot say when it began", d.receiver)
		}
		t, ok, err := rs.ReceiverSince(ctx, d.keys.ReceiverSince(d.receiver), d.started)
		if err != nil {
			return false, fmt.Errorf("alert: when receiver %s began: %w", d.receiver, err)
		}
		if !ok {
			// Another's value: this replica's own start is the best it
			// knows, and it is never earlier than the first's.
			t = d.started
		}
		since = &t
		d.since.Store(since)
	}
	return a.PublishedAt.Before(*since), nil
}

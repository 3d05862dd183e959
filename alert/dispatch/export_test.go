package dispatch

import (
	"context"
	"sync"
)

// RetryParked is one pass of RetryParkedEvery, for the tests to run when
// they choose.
func (d *Dispatcher) RetryParked(ctx context.Context) error { return d.retryParked(ctx) }

// DrainWaiting is one pass of DrainWaitingEvery, its drains finished, for
// the tests to run when they choose.
func (d *Dispatcher) DrainWaiting(ctx context.Context) error {
	var drains sync.WaitGroup
	err := d.drainWaiting(ctx, &drains)
	drains.Wait()
	return err
}

package dispatch

import "context"

// RetryParked is one pass of RetryParkedEvery, for the tests to run when
// they choose.
func (d *Dispatcher) RetryParked(ctx context.Context) error { return d.retryParked(ctx) }

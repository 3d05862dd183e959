package alert_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// retryable is an error that says itself whether to retry.
type retryable bool

func (r retryable) Error() string   { return fmt.Sprintf("retryable %v", bool(r)) }
func (r retryable) Retryable() bool { return bool(r) }

func TestRetryPolicy(t *testing.T) {
	base := errors.New("connection reset")
	tests := []struct {
		name      string
		err       error
		wantRetry bool
		wantWait  time.Duration
	}{
		{"anything else is retried", base, true, 0},
		{"permanent", alert.Permanent(base), false, 0},
		{"permanent, wrapped", fmt.Errorf("post: %w", alert.Permanent(base)), false, 0},
		{"rate limited", alert.RetryAfter(base, 7*time.Second), true, 7 * time.Second},
		{"rate limited inside a retryable error", fmt.Errorf("%w: %w", retryable(true), alert.RetryAfter(base, time.Second)), true, time.Second},
		{"says no itself", fmt.Errorf("post: %w", retryable(false)), false, 0},
		{"says yes itself", retryable(true), true, 0},
		{"cancelled", fmt.Errorf("post: %w", context.Canceled), false, 0},
		{"timed out", fmt.Errorf("post: %w", context.DeadlineExceeded), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			retry, wait := alert.RetryPolicy(tt.err)
			if retry != tt.wantRetry || wait != tt.wantWait {
				t.Errorf("RetryPolicy(%v) = %v, %v; want %v, %v", tt.err, retry, wait, tt.wantRetry, tt.wantWait)
			}
		})
	}
	if alert.Permanent(nil) != nil || alert.RetryAfter(nil, time.Second) != nil {
		t.Error("marking a nil error made an error")
	}
}

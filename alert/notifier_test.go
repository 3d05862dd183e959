package alert_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

// Retry-After as seconds or an HTTP-date; none, a date past, or more than
// a day leave the wait to the backoff.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {" 30 ", 30 * time.Second, true}, {"-1", 0, false}, {"90000", 0, false},
		{now.Add(2 * time.Minute).Format(http.TimeFormat), 2 * time.Minute, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, false},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), 0, false}, {"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := alert.ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

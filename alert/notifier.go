package alert

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Notifier delivers one alert: alert/slack's, the log's (alert/dispatch),
// the demo's console. How the dispatcher treats a failure is up to the
// error (see RetryPolicy): by default it is retried. The contract lives
// here, not with the dispatcher, so that a notifier compiles against
// neither Kafka nor the dispatcher.
type Notifier interface {
	// Name names the receiver: an alert's record of its delivery is kept
	// per receiver, under this name (1 to 32 of a-z, 0-9, '-' and '_', a
	// letter first; the dispatcher refuses any other).
	Name() string
	// Notify delivers a, and returns where the message is, for a later
	// step to update it or reply to it (Receipt; zero when the receiver
	// gives none).
	Notify(ctx context.Context, a Alert) (Receipt, error)
}

// Receipt is what a receiver gave back for a message it took: for Slack's
// bot token, the channel's id and the message's ts (chat.update and a
// thread's replies name a message by them). An incoming webhook, the log
// and the console give none. The dispatcher keeps it in the record of each
// alert the message carried.
type Receipt struct {
	Channel string `json:"channel,omitempty"`
	TS      string `json:"ts,omitempty"`
	// Digest is true when the message carried several alerts (Digester):
	// an update of one of them must not replace the others' message.
	Digest bool `json:"digest,omitempty"`
}

// IsZero reports whether the receipt says nothing.
func (r Receipt) IsZero() bool { return r == Receipt{} }

// NotifierFunc adapts a function to Notifier; its receiver name is "func",
// and it gives no receipt.
type NotifierFunc func(ctx context.Context, a Alert) error

// Name is "func".
func (f NotifierFunc) Name() string { return "func" }

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, a Alert) (Receipt, error) {
	return Receipt{}, f(ctx, a)
}

// Unbudgeted: a function takes every alert at once, as the log does; the
// dispatcher keeps it to no budget (dispatch.Unbudgeted).
func (f NotifierFunc) Unbudgeted() bool { return true }

// Digester is a Notifier that can also post many alerts of one rule as
// one message: the dispatcher then keeps to the alert budgets, and merges
// what is past them into digests. The receipt is the digest message's.
type Digester interface {
	NotifyDigest(ctx context.Context, d Digest) (Receipt, error)
}

// Digest is alerts of one rule that were past the budget: all of them
// count, List of them are shown.
type Digest struct {
	Rule    string
	Channel string
	Alerts  []Alert
	List    int
}

// Permanent marks err as a failure no retry can fix (a message the
// receiver refuses as such): the alert is given up.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Retryable() bool { return false }

// ChannelError is a notifier's refusal of a channel (Slack's
// channel_not_found, not_in_channel, is_archived): the message is fine,
// its destination is not, until someone fixes the channel or the app's
// membership. The dispatcher parks such an alert, so that the alerts of
// other channels keep flowing.
type ChannelError struct {
	Channel string
	Err     error
}

func (e *ChannelError) Error() string { return e.Err.Error() }
func (e *ChannelError) Unwrap() error { return e.Err }

// RetryAfter marks err as a rate limit: the next attempt waits wait, as
// the receiver asked (Slack's Retry-After), rather than the backoff.
func RetryAfter(err error, wait time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, wait: wait}
}

type retryAfterError struct {
	err  error
	wait time.Duration
}

func (e *retryAfterError) Error() string             { return e.err.Error() }
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.wait }

// ParseRetryAfter reads an HTTP Retry-After header, seconds or an
// HTTP-date, as of now: false for none, a date past, or more than a day
// (the backoff then decides). Receivers speaking HTTP share it.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 || s > 24*3600 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) && t.Sub(now) <= 24*time.Hour {
		return t.Sub(now), true
	}
	return 0, false
}

// RetryPolicy says whether a failed delivery is worth another attempt, and
// how long the receiver asked to wait first (0: use the backoff). An error
// decides through its chain: a cancellation is not retried; RetryAfter()
// gives the wait; Retryable() says yes or no (Permanent says no). Anything
// else (a timeout, a broken connection, an odd proxy answer) is retried: a
// late alert is better than a lost one.
func RetryPolicy(err error) (retry bool, wait time.Duration) {
	if errors.Is(err, context.Canceled) {
		return false, 0
	}
	if ra, ok := errors.AsType[interface {
		error
		RetryAfter() time.Duration
	}](err); ok {
		return true, ra.RetryAfter()
	}
	if r, ok := errors.AsType[interface {
		error
		Retryable() bool
	}](err); ok {
		return r.Retryable(), 0
	}
	return true, 0
}

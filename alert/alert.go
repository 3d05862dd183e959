// Package alert turns threshold crossings into notifications. Crossings are
// written to a Kafka alerts topic (a durable hand-off, and a feed for other
// systems); the Dispatcher reads them back, claims each alert in Redis
// (taking the cooldown of its (rule, group)), delivers it through a
// Notifier (Slack, the log, the demo's console) and records the outcome,
// so that each alert is posted once however often it is delivered.
package alert

import (
	"context"
	"errors"
	"time"

	"github.com/slack-go/slack"
)

// Alert is one first crossing of a rule's threshold by one group. Its JSON
// form is the alerts topic's message value.
type Alert struct {
	// ID names the crossing: the rule and the event that crossed. Every
	// redelivery of the crossing event yields the same ID.
	ID          string `json:"id"`
	Rule        string `json:"rule"`
	Description string `json:"description,omitempty"`
	Severity    string `json:"severity"`
	// Mode is "alert" or "shadow"; shadow crossings are never notified.
	Mode string `json:"mode"`
	// Channel overrides the notifier's default channel when set.
	Channel string `json:"channel,omitempty"`
	// Metric is "count" or "amount".
	Metric string `json:"metric"`
	// GroupBy names the event fields of the group; GroupValues holds their
	// values in the same order. Values are personal data: they go to Slack,
	// never to logs or metrics.
	GroupBy     []string `json:"group_by"`
	GroupValues []string `json:"group_values"`
	// Current is the window's counter after the crossing event; Threshold
	// is the rule's. Amounts are in minor units of Currency.
	Current   int64         `json:"current"`
	Threshold int64         `json:"threshold"`
	Currency  string        `json:"currency,omitempty"`
	Window    time.Duration `json:"window_ns"`
	Cooldown  time.Duration `json:"cooldown_ns"`
	// CooldownKey is the Redis key that holds the cooldown and RecordKey
	// the alert's delivery record; both share the hash tag of the rule's
	// counter.
	CooldownKey string `json:"cooldown_key"`
	RecordKey   string `json:"record_key"`
	// OrderID and EventID identify the event that crossed.
	OrderID string `json:"order_id"`
	EventID string `json:"event_id"`
	// At is when the crossing event occurred (its occurred_at, or when it
	// was processed if it carries none).
	At time.Time `json:"at"`
}

// Shadow reports whether the alert comes from a shadow rule.
func (a *Alert) Shadow() bool { return a.Mode == "shadow" }

// Notifier delivers one alert. An error is retried unless it is marked
// permanent (see Permanent) or says so itself with Retryable() == false.
type Notifier interface {
	Notify(ctx context.Context, a Alert) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, a Alert) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, a Alert) error { return f(ctx, a) }

// permanentError marks a failure that no retry can fix (a revoked token, an
// unknown channel, a message Slack refuses).
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Retryable() bool { return false }

// Permanent marks err as not worth retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// retryPolicy decides whether a failed delivery is worth another attempt,
// and how long the server asked us to wait first (0: use the backoff).
func retryPolicy(err error) (retry bool, wait time.Duration) {
	if errors.Is(err, context.Canceled) {
		return false, 0
	}
	if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
		return true, rl.RetryAfter
	}
	if r, ok := errors.AsType[interface {
		error
		Retryable() bool
	}](err); ok {
		return r.Retryable(), 0
	}
	// Anything else (a timeout, a broken connection, an odd proxy answer)
	// is retried: a late alert is better than a lost one.
	return true, 0
}

package dispatch

import (
	"context"
	"log/slog"

	"github.com/fraudwatch/fraudwatch/alert"
)

// NewLogNotifier returns a Notifier that writes each alert as one WARN
// record: the fallback when Slack is not configured. A nil logger means
// slog.Default(), since discarding would lose the alerts themselves.
//
// The record names the group_by fields but never their values: those are
// personal data (emails, phones, IPs) and logs are kept and shipped far
// more widely than a Slack channel.
func NewLogNotifier(log *slog.Logger) alert.Notifier {
	if log == nil {
		log = slog.Default()
	}
	return logNotifier{log}
}

// logNotifier is NewLogNotifier's: its receiver is "log", and it gives no
// receipt.
type logNotifier struct{ log *slog.Logger }

func (logNotifier) Name() string { return "log" }

// Unbudgeted: the log takes every alert at once; it has no budget to keep.
func (logNotifier) Unbudgeted() bool { return true }

func (n logNotifier) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	attrs := []slog.Attr{
		slog.String("rule", a.Rule),
		slog.String("severity", string(a.Severity)),
		slog.String("metric", string(a.Metric)),
		slog.Int64("current", a.Current),
		slog.Int64("threshold", a.Threshold),
		slog.Duration("window", a.Window),
		slog.Any("group_by", a.GroupBy),
		slog.String("order_id", a.OrderID),
		slog.String("event_id", a.EventID),
		slog.Time("at", a.At.UTC()),
	}
	if len(a.Evidence) > 0 {
		// Order ids only: a distinct rule's values are personal data.
		ids := make([]string, len(a.Evidence))
		for i, e := range a.Evidence {
			ids[i] = e.OrderID
		}
		attrs = append(attrs, slog.Any("latest_orders", ids))
	}
	n.log.LogAttrs(ctx, slog.LevelWarn, "fraud alert: threshold crossed", attrs...)
	return alert.Receipt{}, nil
}

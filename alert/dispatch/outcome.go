package dispatch

import (
	"context"
	"log/slog"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Reasons a crossing is not notified: the reason label of
// fraudwatch_alerts_suppressed_total.
const (
	SuppressedCooldown = "cooldown" // another alert of the (rule, group) holds the cooldown
	SuppressedShadow   = "shadow"   // the rule is in shadow mode
	SuppressedSilenced = "silenced" // a silence of the rule or of its group ran (fraudwatch silence)
)

// Outcomes of an alert as Recent lists them.
const (
	OutcomeSent     = "sent"
	OutcomeDigested = "digested" // sent, in a digest
	OutcomeFailed   = "failed"   // refused for good
	OutcomeParked   = "parked"   // its channel refused; retried later
)

// Outcomes of a claim that only the log tells: a redelivery of an alert
// settled before, which Recent does not list again and no metric counts;
// a copy of an alert another message holds (on another partition), which
// fraudwatch_alert_copies_total counts.
const (
	sentBefore       = "sent_before"
	failedBefore     = "failed_before"
	claimedElsewhere = "claimed_elsewhere"
)

// outcomeLogs is the log line of each outcome.
var outcomeLogs = map[string]struct {
	level slog.Level
	msg   string
}{
	OutcomeSent:        {slog.LevelInfo, "alert sent"},
	OutcomeDigested:    {slog.LevelInfo, "alerts past the budget sent as one digest"},
	OutcomeFailed:      {slog.LevelError, "alert refused for good; given up, cooldown released"},
	OutcomeParked:      {slog.LevelWarn, "alert parked: slack refuses its channel; other channels' alerts go on, and it is retried"},
	SuppressedCooldown: {slog.LevelInfo, "alert suppressed: the cooldown is held by an earlier alert"},
	SuppressedSilenced: {slog.LevelInfo, "alert silenced: a silence of its rule or group runs"},
	SuppressedShadow:   {slog.LevelInfo, "shadow rule crossed its threshold; not notifying"},
	sentBefore:         {slog.LevelInfo, "alert already delivered; not posting it again"},
	failedBefore:       {slog.LevelInfo, "alert given up on before; not retrying it"},
	claimedElsewhere:   {slog.LevelInfo, "copy of an alert another message holds; not posting it (that message posts it)"},
}

// record is the one place an outcome is recorded: each alert's metrics
// and its line in Recent, then one log line for the message that settled
// them (an alert, or a digest), with attrs.
func (d *Dispatcher) record(outcome string, alerts []alert.Alert, attrs ...any) {
	if len(alerts) == 0 {
		return
	}
	for i := range alerts {
		a := &alerts[i]
		switch outcome {
		case OutcomeSent:
			d.m.sent.WithLabelValues(a.Rule).Inc()
		case OutcomeDigested:
			d.m.sent.WithLabelValues(a.Rule).Inc()
			d.m.digested.WithLabelValues(a.Rule).Inc()
		case OutcomeFailed:
			d.m.failures.WithLabelValues(a.Rule).Inc()
		case OutcomeParked:
			// park counts it, as Redis holds it.
		case SuppressedCooldown, SuppressedShadow, SuppressedSilenced:
			d.m.suppressed.WithLabelValues(a.Rule, outcome).Inc()
		case sentBefore, failedBefore:
			continue
		case claimedElsewhere:
			d.m.copies.WithLabelValues(a.Rule).Inc()
			continue
		}
		d.recent.add(a, outcome, d.receiver)
	}
	l := outcomeLogs[outcome]
	d.log.Log(context.Background(), l.level, l.msg, append(messageAttrs(alerts), attrs...)...)
}

// messageAttrs name the alerts of one message in a log line: their rule,
// and the alert's id, or how many a digest carries.
func messageAttrs(alerts []alert.Alert) []any {
	if len(alerts) == 1 {
		return []any{"rule", alerts[0].Rule, "alert_id", alerts[0].ID}
	}
	return []any{"rule", alerts[0].Rule, "alerts", len(alerts)}
}

// dropped counts and logs a message of the alerts topic, or a parked
// alert, that is not delivered: the one place a drop is recorded. Stale
// ones are expected after a long outage, the others are not.
func (d *Dispatcher) dropped(reason string, attrs ...any) {
	d.m.dropped.WithLabelValues(reason).Inc()
	level := slog.LevelError
	if reason == DroppedStale {
		level = slog.LevelWarn
	}
	d.log.Log(context.Background(), level, "alert dropped", append([]any{"reason", reason}, attrs...)...)
}

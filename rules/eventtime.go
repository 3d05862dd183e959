package rules

import "github.com/fraudwatch/fraudwatch/event"

// eventTime is the time the sliding and distinct windows count an event
// at, in milliseconds since 1970: its occurred_at, else its Kafka record's
// time, else now; never more than MaxFuture ahead of now (a time further
// ahead is counted in fraudwatch_events_future_total).
func (e *Engine) eventTime(ev *event.Event) int64 {
	t := ev.OccurredAt
	if t.IsZero() {
		t = ev.Source.Time
	}
	now := e.cfg.Now()
	if t.IsZero() {
		t = now
	} else if t.After(now.Add(MaxFuture)) {
		e.future.Inc()
		t = now
	}
	return max(t.UnixMilli(), 0)
}

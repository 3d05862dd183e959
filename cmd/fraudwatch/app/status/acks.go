package status

import (
	"slices"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
)

// Acks is how a rule's open alerts stand with acknowledgement, as Redis
// holds them for every replica: the page's view of
// fraudwatch_alert_ack_seconds, which each replica observes only for the
// acknowledgements it read first.
type Acks struct {
	// Acknowledged counts the open alerts acknowledged, and Median is
	// their median time from opened to acknowledged.
	Acknowledged int
	Median       time.Duration
	// Waiting counts the open alerts nobody acknowledged yet, and Oldest
	// is how long the oldest of them has waited.
	Waiting int
	Oldest  time.Duration
}

// AcksOf sums entries (open alerts) by rule, at now.
func AcksOf(entries []life.Entry, now time.Time) map[string]Acks {
	took := map[string][]time.Duration{}
	out := map[string]Acks{}
	for _, e := range entries {
		rule, st := e.Ref.Rule, e.State
		a := out[rule]
		switch {
		case st.Status == alert.StatusAcknowledged && !st.AckedAt.IsZero() && !st.OpenedAt.IsZero():
			a.Acknowledged++
			took[rule] = append(took[rule], max(0, st.AckedAt.Sub(st.OpenedAt)))
		case st.Status == alert.StatusOpen && !st.OpenedAt.IsZero():
			a.Waiting++
			a.Oldest = max(a.Oldest, now.Sub(st.OpenedAt))
		}
		out[rule] = a
	}
	for rule, ds := range took {
		slices.Sort(ds)
		a := out[rule]
		a.Median = ds[len(ds)/2]
		out[rule] = a
	}
	return out
}

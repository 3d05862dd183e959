package outcome

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
)

// metrics are the store's (docs/operations.md, Metrics and health).
type metrics struct {
	recorded       *prometheus.CounterVec
	dropped        prometheus.Counter
	alertOutcomes  *prometheus.CounterVec
	outcomeSeconds *prometheus.HistogramVec
}

// outcomeBuckets run from a minute to 180 days: an analyst's click comes
// in minutes, a chargeback in weeks or months.
var outcomeBuckets = []float64{60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400, 14 * 86400,
	30 * 86400, 60 * 86400, 90 * 86400, 180 * 86400}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_outcomes_recorded_total",
			Help: "Orders whose outcome changed (or came first), by the way it came in and the outcome; the same outcome again, an older one, or a later one with the same label, not counted.",
		}, []string{"via", "outcome"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fraudwatch_outcomes_dropped_total",
			Help: "Orders' outcomes dropped past outcomes.max_orders or outcomes.retention, oldest written first.",
		}),
		alertOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_outcomes_total",
			Help: "Alerts that took an outcome (fraud, legit, unclear), by rule: counted at each change of an alert's outcome, by the replica that made it, never twice for one change.",
		}, []string{"rule", "outcome"}),
		outcomeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fraudwatch_alert_outcome_seconds",
			Help:    "From an alert's opening to its first outcome, once an alert.",
			Buckets: outcomeBuckets,
		}, []string{"rule"}),
	}
	for _, v := range []Via{ViaTopic, ViaSlack, ViaCLI} {
		for _, l := range alert.Labels {
			m.recorded.WithLabelValues(string(v), string(l)) // export zeroes, so rate() works from the start
		}
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.recorded, m.dropped, m.alertOutcomes, m.outcomeSeconds} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("outcome: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// SetRules exports the per-rule series of rules (the rules in force) at
// zero, so that a rule's precision reads from its first alert on, and the
// dashboard and alert rules find every series from the start.
func (s *Store) SetRules(rules []string) {
	for _, r := range rules {
		for _, l := range alert.Labels {
			s.m.alertOutcomes.WithLabelValues(r, string(l))
		}
		s.m.outcomeSeconds.WithLabelValues(r)
	}
}

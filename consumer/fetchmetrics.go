package consumer

import "github.com/prometheus/client_golang/prometheus"

// fetchMetrics count what the partition readers met: failed fetches, and
// the records read committed leaves out. Several groups in one process
// share them; their topics differ.
type fetchMetrics struct {
	errs  *prometheus.CounterVec
	skips *prometheus.CounterVec
}

// fetchReasons are the errors' reason labels (fetchReason).
var fetchReasons = []string{"timeout", "connection", "broker_error", "offset_out_of_range", "other"}

func newFetchMetrics(reg prometheus.Registerer, topics []string) (*fetchMetrics, error) {
	errs, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_consumer_fetch_errors_total",
		Help: "Fetches of a partition that failed and were retried, by topic and reason (timeout, connection, broker_error, offset_out_of_range, other).",
	}, []string{"topic", "reason"}))
	if err != nil {
		return nil, err
	}
	skipped, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_consumer_records_skipped_total",
		Help: "Records read past and never handled, by topic and reason: transaction markers (transaction_marker) and records of aborted transactions (aborted_transaction).",
	}, []string{"topic", "reason"}))
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		for _, r := range fetchReasons {
			errs.WithLabelValues(t, r)
		}
		skipped.WithLabelValues(t, "transaction_marker")
		skipped.WithLabelValues(t, "aborted_transaction")
	}
	return &fetchMetrics{errs: errs, skips: skipped}, nil
}

func (m *fetchMetrics) failed(topic, reason string) { m.errs.WithLabelValues(topic, reason).Inc() }

func (m *fetchMetrics) skipped(topic string, markers, aborted int) {
	if markers > 0 {
		m.skips.WithLabelValues(topic, "transaction_marker").Add(float64(markers))
	}
	if aborted > 0 {
		m.skips.WithLabelValues(topic, "aborted_transaction").Add(float64(aborted))
	}
}

package dispatch

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type dispatcherMetrics struct {
	sent       *prometheus.CounterVec
	suppressed *prometheus.CounterVec
	failures   *prometheus.CounterVec
	retries    *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	parked     *prometheus.GaugeVec
	waiting    *prometheus.GaugeVec
	digested   *prometheus.CounterVec
	copies     *prometheus.CounterVec
	legacy     prometheus.Counter
	elsewhere  *prometheus.CounterVec
	history    *prometheus.CounterVec
	updates    *prometheus.CounterVec
	ackSeconds *prometheus.HistogramVec
	repeats    *prometheus.CounterVec
}

// newDispatcherMetrics makes the metrics of the dispatcher of one
// receiver: a process runs one dispatcher per receiver, so each series
// carries its receiver's name (a constant label), and one receiver's
// failures never hide in another's.
func newDispatcherMetrics(reg prometheus.Registerer, receiver string) (dispatcherMetrics, error) {
	m := dispatcherMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_sent_total",
			Help: "Alerts delivered to the receiver (Slack, a webhook, PagerDuty, the log).",
		}, []string{"rule"}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_suppressed_total",
			Help: "Crossings not notified: the cooldown was held, the rule is in shadow mode, or a silence ran.",
		}, []string{"rule", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_failures_total",
			Help: "Alerts given up on: the notifier refused them for good (bad token, unknown channel).",
		}, []string{"rule"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_delivery_errors_total",
			Help: "Failed delivery attempts that will be retried (Slack down, rate limited, timeouts).",
		}, []string{"rule"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_dropped_total",
			Help: "Messages of the alerts topic not delivered because they cannot be trusted or settled: unreadable, malformed, unverified (no crossing or no seal in Redis), of an unknown rule, refused by the claim script, or stale.",
		}, []string{"reason"}),
		digested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_digested_total",
			Help: "Alerts sent as part of a digest, past the alert budget (also in fraudwatch_alerts_sent_total).",
		}, []string{"rule"}),
		copies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_copies_total",
			Help: "Messages of the alerts topic acknowledged without a post because another message of the same alert holds its claim (a copy on another partition), which posts it.",
		}, []string{"rule"}),
		legacy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_unsealed_total",
			Help: "Alerts written without a seal by a fraudwatch older than seals (a rolling upgrade), taken with only what Redis vouches for: rule, group, event and value.",
		}),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fraudwatch_alerts_parked",
			Help: "Alerts waiting because Slack refuses their channel (channel_not_found, not_in_channel, is_archived), by channel, as the replica that last retried them counts them.",
		}, []string{"channel"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fraudwatch_alerts_waiting",
			Help: "Alerts waiting in Redis for their destination's budget, by receiver and channel, as Redis held them at this replica's last drain pass (every 250 ms).",
		}, []string{"channel"}),
		elsewhere: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_routed_elsewhere_total",
			Help: "Alerts of the topic this receiver skips: their rule's routes send them to other receivers.",
		}, []string{"rule"}),
		history: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_before_receiver_total",
			Help: "Alerts of the topic a receiver skips because they were published before the receiver first ran (a receiver added to a running deployment is not sent the topic's history).",
		}, []string{"rule"}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_updates_total",
			Help: "Updates of an alert's life read from the alerts topic, by result: shown by the receiver, unchanged (shown already, or nothing to show), unknown (no such alert: forged, or ended), elsewhere (routed to other receivers), failed (refused for good).",
		}, []string{"result"}),
		ackSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fraudwatch_alert_ack_seconds",
			Help:    "Time from an alert's send decision to its first acknowledgement, observed once per alert by one replica.",
			Buckets: []float64{30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400},
		}, []string{"rule"}),
		repeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_repeats_total",
			Help: "Repeat crossings: alerts suppressed because another alert of their rule and group holds the cooldown, counted once per receiver, whether posted in that alert's thread or not.",
		}, []string{"rule"}),
	}
	for _, r := range []string{UpdateShown, UpdateUnchanged, UpdateUnknown, UpdateElsewhere, UpdateFailed} {
		m.updates.WithLabelValues(r)
	}
	for _, r := range []string{DroppedUnreadable, DroppedMalformed, DroppedUnverified, DroppedUnknownRule, DroppedRefused, DroppedStale} {
		m.dropped.WithLabelValues(r)
	}
	if reg != nil {
		// The time to acknowledge is the alert's, not a receiver's: one
		// series a rule, shared by every dispatcher of the process.
		ack, err := registerShared(reg, m.ackSeconds)
		if err != nil {
			return m, err
		}
		m.ackSeconds = ack
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"receiver": receiver}, reg)
		for _, c := range []prometheus.Collector{m.sent, m.suppressed, m.failures, m.retries, m.dropped, m.parked, m.waiting, m.digested, m.copies, m.legacy,
			m.elsewhere, m.history, m.updates, m.repeats} {
			if err := reg.Register(c); err != nil {
				return m, fmt.Errorf("alert: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// registerShared registers c, or returns the collector of its name that
// another dispatcher of the process registered first.
func registerShared[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("alert: register metrics: %w", err)
	}
	return c, nil
}

// track exports zero-valued series for a rule.
func (m *dispatcherMetrics) track(rule string) {
	m.sent.WithLabelValues(rule)
	m.digested.WithLabelValues(rule)
	m.failures.WithLabelValues(rule)
	m.retries.WithLabelValues(rule)
	m.copies.WithLabelValues(rule)
	m.elsewhere.WithLabelValues(rule)
	for _, reason := range []string{SuppressedCooldown, SuppressedShadow, SuppressedSilenced} {
		m.suppressed.WithLabelValues(rule, reason)
	}
}

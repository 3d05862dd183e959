package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/config"
)

// receiverKinds are the values of fraudwatch_alert_receiver's kind label.
var receiverKinds = []string{"slack_webhook", "slack_bot", "log", "custom"}

// receiverKind names where alerts go: the Slack mode the configuration
// sets, the log without one, or a notifier a caller supplied (the demo's
// console).
func receiverKind(c config.Slack, supplied bool) string {
	if supplied {
		return "custom"
	}
	switch c.Mode() {
	case config.SlackWebhook:
		return "slack_webhook"
	case config.SlackToken:
		return "slack_bot"
	}
	return "log"
}

// registerReceiver exports where alerts go, 1 for kind and 0 for the
// others: with a Secret key mistyped, a replica starts with alerts to its
// log, and an alert rule watches for that (deploy/prometheus).
func registerReceiver(reg prometheus.Registerer, kind string) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fraudwatch_alert_receiver",
		Help: "Where this replica sends alerts: 1 for its kind (slack_webhook, slack_bot, log, custom), 0 for the others.",
	}, []string{"kind"})
	for _, k := range receiverKinds {
		v := 0.0
		if k == kind {
			v = 1
		}
		g.WithLabelValues(k).Set(v)
	}
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("app: register metrics: %w", err)
	}
	return nil
}

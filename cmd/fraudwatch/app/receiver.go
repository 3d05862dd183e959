package app

import (
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/config"
)

// allReceiverKinds are the values of fraudwatch_alert_receiver's kind
// label.
var allReceiverKinds = []string{"slack_webhook", "slack_bot", "webhook", "pagerduty", "log", "custom"}

// receiverKinds names where alerts go, a kind each receiver: the Slack
// mode its settings make, a webhook, PagerDuty, the log without any, or a
// notifier a caller supplied (the demo's console).
func receiverKinds(specs []receiverSpec, supplied bool) []string {
	if supplied {
		return []string{"custom"}
	}
	var kinds []string
	for _, s := range specs {
		k := receiverKind(s.rc)
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

func receiverKind(rc config.Receiver) string {
	switch rc.Kind {
	case config.KindSlack:
		if rc.Slack != nil && rc.Slack.Mode() == config.SlackWebhook {
			return "slack_webhook"
		}
		return "slack_bot"
	case config.KindWebhook:
		return "webhook"
	case config.KindPagerDuty:
		return "pagerduty"
	}
	return "log"
}

// registerReceiver exports where alerts go, 1 for each kind in use and 0
// for the others: with a Secret key mistyped, a replica starts with alerts
// to its log, and an alert rule watches for that (deploy/prometheus).
func registerReceiver(reg prometheus.Registerer, kinds []string) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fraudwatch_alert_receiver",
		Help: "Where this replica sends alerts: 1 for each kind of its receivers (slack_webhook, slack_bot, webhook, pagerduty, log, custom), 0 for the others.",
	}, []string{"kind"})
	for _, k := range allReceiverKinds {
		v := 0.0
		if slices.Contains(kinds, k) {
			v = 1
		}
		g.WithLabelValues(k).Set(v)
	}
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("app: register metrics: %w", err)
	}
	return nil
}

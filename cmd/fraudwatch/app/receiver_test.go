package app

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// The start line says where alerts go, a WARN says it when that is the log
// alone (a Secret key mistyped starts a pod so), and
// fraudwatch_alert_receiver exports it for FraudwatchAlertsToLogOnly.
func TestStartSaysWhereAlertsGo(t *testing.T) {
	cases := []struct {
		name      string
		slack     func(*config.Slack)
		receivers []config.ReceiverSpec
		supplied  bool
		kind      string
		warn      bool
	}{
		{name: "no slack setting", slack: func(*config.Slack) {}, kind: "log", warn: true},
		{name: "webhook", slack: func(s *config.Slack) { s.WebhookURL = "https://hooks.slack.invalid/services/T/B/X" }, kind: "slack_webhook"},
		{name: "bot token", slack: func(s *config.Slack) { s.Token = "xoxb-test"; s.Channel = "#fraud" }, kind: "slack_bot"},
		{name: "a notifier supplied", slack: func(*config.Slack) {}, supplied: true, kind: "custom"},
		{name: "a webhook and PagerDuty", slack: func(*config.Slack) {}, kind: "webhook,pagerduty", receivers: []config.ReceiverSpec{
			{Name: "cases", Webhook: &config.WebhookSpec{URL: "https://cases.invalid/hook",
				Secrets: []config.Secret{"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}}},
			{Name: "pager", PagerDuty: &config.PagerDutySpec{RoutingKey: "R0UTEDTESTR0UTEDTESTR0UTEDTEST12"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPipeline(t, 1, countRule)
			tc.slack(&p.cfg.Slack)
			p.cfg.Receivers = tc.receivers
			logs := &testkit.Buffer{}
			opts := p.options()
			opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			if !tc.supplied {
				opts.Notifier = nil
			}
			r := p.startWith(opts)
			waitFor(t, 10*time.Second, "the start line", func() bool { return strings.Contains(logs.String(), "fraudwatch started") })
			var warned bool
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] == "fraudwatch started" && rec["alerts_to"] != tc.kind {
					t.Errorf("start line alerts_to = %v, want %s", rec["alerts_to"], tc.kind)
				}
				if rec["level"] == "WARN" && strings.Contains(line, "alerts go to this process's log only") {
					warned = true
				}
			}
			if warned != tc.warn {
				t.Errorf("warned of alerts to the log only: %v, want %v\n%s", warned, tc.warn, logs.String())
			}
			for _, kind := range allReceiverKinds {
				want := 0.0
				if slices.Contains(strings.Split(tc.kind, ","), kind) {
					want = 1
				}
				if got := r.metric("fraudwatch_alert_receiver", "kind", kind); got != want {
					t.Errorf("fraudwatch_alert_receiver{kind=%s} = %v, want %v", kind, got, want)
				}
			}
		})
	}
}

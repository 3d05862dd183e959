package config

import (
	"testing"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

func TestSummary(t *testing.T) {
	clearEnv(t)
	loaded, err := Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"defaults", func(c *Config) {},
			"testdata/minimal.yaml: ok: 5 rules (3 alert, 1 shadow, 1 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address; alerts to log"},
		{"webhook", func(c *Config) { c.Slack.WebhookURL = "https://hooks.slack.com/services/T/B/x" },
			"testdata/minimal.yaml: ok: 5 rules (3 alert, 1 shadow, 1 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address; alerts to slack webhook"},
		{"token", func(c *Config) {
			c.Slack.Token, c.Slack.Channel = "xoxb-1", "#risk"
			c.Rules = c.Rules[:1]
			c.Kafka.Brokers = []string{"a:1", "b:1", "c:1"}
			c.Kafka.TLS.Enabled = true
			c.Kafka.SASL = SASL{Mechanism: SASLScramSHA512, Username: "u", Password: "p"}
			c.Kafka.RefundsTopic = "orders"
			c.Redis.Cluster, c.Redis.Addrs = true, []string{"r1:1", "r2:1"}
			c.Redis.TLS.Enabled = true
		}, "testdata/minimal.yaml: ok: 1 rule (1 alert, 0 shadow, 0 disabled); kafka 3 brokers (tls, sasl scram-sha-512), topic orders for orders and refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis cluster 2 addresses (tls); alerts to slack bot token to #risk"},
		{"built in code", func(c *Config) {
			*c = Default()
			c.Rules = []rules.Rule{{Name: "x", Mode: alert.ModeShadow, Enabled: true}}
		}, "(defaults): ok: 1 rule (0 alert, 1 shadow, 0 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address; alerts to log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *loaded
			tt.mutate(&c)
			if got := c.Summary(); got != tt.want {
				t.Errorf("Summary()\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

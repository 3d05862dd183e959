package config

import (
	"strings"
	"testing"
	"time"

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
			"testdata/minimal.yaml: ok: 5 rules (3 alert, 1 shadow, 1 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address, 16 counting buckets; alerts to log"},
		{"webhook", func(c *Config) { c.Slack.WebhookURL = "https://hooks.slack.com/services/T/B/x" },
			"testdata/minimal.yaml: ok: 5 rules (3 alert, 1 shadow, 1 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address, 16 counting buckets; alerts to slack webhook"},
		{"token", func(c *Config) {
			c.Slack.Token, c.Slack.Channel = "xoxb-1", "#risk"
			c.Rules = c.Rules[:1]
			c.Kafka.Brokers = []string{"a:1", "b:1", "c:1"}
			c.Kafka.TLS.Enabled = true
			c.Kafka.SASL = SASL{Mechanism: SASLScramSHA512, Username: "u", Password: "p"}
			c.Kafka.RefundsTopic = "orders"
			c.Redis.Cluster, c.Redis.Addrs = true, []string{"r1:1", "r2:1"}
			c.Redis.TLS.Enabled = true
		}, "testdata/minimal.yaml: ok: 1 rule (1 alert, 0 shadow, 0 disabled); kafka 3 brokers (tls, sasl scram-sha-512), topic orders for orders and refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis cluster 2 addresses (tls), 256 counting buckets; alerts to slack bot token to #risk"},
		{"sliding, distinct and where rules", func(c *Config) {
			rs, err := LoadRules("testdata/rules-features.yaml")
			if err != nil {
				t.Fatal(err)
			}
			c.Rules = rs
		}, "testdata/minimal.yaml: ok: 4 rules (2 alert, 1 shadow, 1 disabled; 2 sliding, 2 distinct, 3 with where); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address, 16 counting buckets; alerts to log"},
		{"buckets set", func(c *Config) { c.Redis.Buckets = 64 },
			"testdata/minimal.yaml: ok: 5 rules (3 alert, 1 shadow, 1 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address, 64 counting buckets; alerts to log"},
		{"built in code", func(c *Config) {
			*c = Default()
			c.Rules = []rules.Rule{{Name: "x", Mode: alert.ModeShadow, Enabled: true}}
		}, "(defaults): ok: 1 rule (0 alert, 1 shadow, 0 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq, alerts fraudwatch.alerts; redis 1 address, 16 counting buckets; alerts to log"},
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

func TestRuleTable(t *testing.T) {
	rs, err := LoadRules("testdata/rules-features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	long := rules.Rule{
		Name: "long-where", Metric: alert.Count, GroupBy: []string{"email", "phone"},
		WindowType: alert.Fixed, Window: 90 * time.Minute, Threshold: 2, Cooldown: 2 * time.Hour,
		Severity: alert.SeverityInfo, Mode: alert.ModeAlert, Enabled: true,
		Where: []rules.Condition{
			{Field: "country", In: []string{"KR", "US", "JP", "DE", "FR", "GB"}},
			{Field: "note", NotIn: []string{"a b", "", "x|y", "ok"}},
		},
	}
	tests := []struct {
		name  string
		rules []rules.Rule
		want  string
	}{
		{"every kind of rule", append(rs, long), `
RULE                    STATE     SEVERITY  METRIC                     GROUP BY     WINDOW                    THRESHOLD  COOLDOWN  WHERE
orders-per-customer-1m  alert     warning   count                      customer_id  fixed 1m                  3          1m        -
cards-per-customer-10m  alert     high      distinct card_fingerprint  customer_id  sliding 10m, lateness 1m  4          10m       currency in KRW|USD; payment_method in card
big-amount-per-ip-1h    shadow    warning   amount                     ip           sliding 1h, lateness 5m   50000000   off       amount >= 10000 < 5000000; channel in web|app not kiosk <= 9; payment_method not gift_card|points
emails-per-device-1d    disabled  warning   distinct email             device_id    fixed 24h                 10000      24h       is_test not true; risk_score > 80
long-where              alert     info      count                      email,phone  fixed 1h30m               2          2h        country in KR|US|JP|(+3 more); note not "a b"|""|"x|y"|ok
`},
		{"no rules", nil, `
RULE  STATE  SEVERITY  METRIC  GROUP BY  WINDOW  THRESHOLD  COOLDOWN  WHERE
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Rules: tt.rules}
			want := strings.TrimPrefix(tt.want, "\n")
			if got := c.RuleTable(); got != want {
				t.Errorf("RuleTable()\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

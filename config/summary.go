package config

import (
	"fmt"
	"strings"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Summary is the one line `fraudwatch check` prints for a valid config:
//
//	config.yaml: ok: 4 rules (3 alert, 1 shadow, 0 disabled); kafka 1 broker, topics orders/refunds, dlq fraudwatch.dlq; redis 1 address; alerts to slack webhook
//
// It holds no secret.
func (c *Config) Summary() string {
	var alerting, shadow, disabled int
	for _, r := range c.Rules {
		switch {
		case !r.Enabled:
			disabled++
		case r.Mode == alert.ModeShadow:
			shadow++
		default:
			alerting++
		}
	}
	name := c.displayName()
	if name == "" {
		name = "(defaults)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ok: %s (%d alert, %d shadow, %d disabled)", name, plural(len(c.Rules), "rule", "rules"), alerting, shadow, disabled)

	k := &c.Kafka
	fmt.Fprintf(&b, "; kafka %s", plural(len(k.Brokers), "broker", "brokers"))
	var extras []string
	if k.TLS.Enabled {
		extras = append(extras, "tls")
	}
	if k.SASL.Mechanism != "" {
		extras = append(extras, "sasl "+k.SASL.Mechanism)
	}
	if len(extras) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(extras, ", "))
	}
	if k.SameTopic() {
		fmt.Fprintf(&b, ", topic %s for orders and refunds", k.OrdersTopic)
	} else {
		fmt.Fprintf(&b, ", topics %s/%s", k.OrdersTopic, k.RefundsTopic)
	}
	fmt.Fprintf(&b, ", dlq %s, alerts %s", k.DeadLetterTopic, k.AlertsTopic)

	r := &c.Redis
	b.WriteString("; redis ")
	if r.Cluster {
		b.WriteString("cluster ")
	}
	b.WriteString(plural(len(r.Addrs), "address", "addresses"))
	if r.TLS.Enabled {
		b.WriteString(" (tls)")
	}

	b.WriteString("; alerts to ")
	switch c.Slack.Mode() {
	case SlackWebhook:
		b.WriteString("slack webhook")
	case SlackToken:
		fmt.Fprintf(&b, "slack bot token to %s", c.Slack.Channel)
	default:
		b.WriteString("log")
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

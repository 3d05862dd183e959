package testkit

import (
	"fmt"
	"strconv"
	"strings"
)

// Process is the configuration of a fraudwatch process that a test or the
// bench starts: one template, so that a config key renamed in config/ is
// renamed here once. Empty fields are left out and take their defaults;
// the group always starts at the earliest offset, so a test's events
// produced before the process joins are read.
type Process struct {
	Brokers                                    []string
	Group, Orders, Refunds, DeadLetter, Alerts string
	// Outcomes is the outcomes topic; a replica's outcomes group waits
	// for it (and logs an ERROR while it is missing).
	Outcomes   string
	Kafka      []string // more lines of the kafka section, "key: value"
	RedisAddrs []string
	Cluster    bool
	Redis      []string // more lines of the redis section, "key: value"
	Prefix     string
	Webhook    string   // the Slack webhook; empty: no slack section
	Slack      []string // more lines of the slack section
	Metrics    string   // the metrics listener
	Pprof      bool     // metrics.pprof: Go's profiles on that listener
	Shutdown   string   // shutdown_timeout, a duration
	Rules      string   // rules_file, relative to the config's directory
}

// YAML is p as a configuration file.
func (p Process) YAML() string {
	var b strings.Builder
	b.WriteString("kafka:\n")
	if len(p.Brokers) > 0 {
		line(&b, "brokers", "["+quoted(p.Brokers)+"]")
	}
	for _, kv := range [][2]string{{"group_id", p.Group}, {"orders_topic", p.Orders}, {"refunds_topic", p.Refunds},
		{"dead_letter_topic", p.DeadLetter}, {"alerts_topic", p.Alerts}, {"outcomes_topic", p.Outcomes}} {
		if kv[1] != "" {
			line(&b, kv[0], strconv.Quote(kv[1]))
		}
	}
	line(&b, "start_offset", "earliest")
	more(&b, p.Kafka)
	if len(p.RedisAddrs) > 0 || p.Cluster || p.Prefix != "" || len(p.Redis) > 0 {
		b.WriteString("redis:\n")
	}
	if len(p.RedisAddrs) > 0 {
		line(&b, "addrs", "["+quoted(p.RedisAddrs)+"]")
	}
	if p.Cluster {
		line(&b, "cluster", "true")
	}
	if p.Prefix != "" {
		line(&b, "key_prefix", strconv.Quote(p.Prefix))
	}
	more(&b, p.Redis)
	if p.Webhook != "" {
		b.WriteString("slack:\n")
		line(&b, "webhook_url", strconv.Quote(p.Webhook))
		more(&b, p.Slack)
	}
	if p.Metrics != "" || p.Pprof {
		b.WriteString("metrics:\n")
	}
	if p.Metrics != "" {
		line(&b, "listen", strconv.Quote(p.Metrics))
	}
	if p.Pprof {
		line(&b, "pprof", "true")
	}
	if p.Shutdown != "" {
		fmt.Fprintf(&b, "shutdown_timeout: %s\n", p.Shutdown)
	}
	if p.Rules != "" {
		fmt.Fprintf(&b, "rules_file: %q\n", p.Rules)
	}
	return b.String()
}

func line(b *strings.Builder, key, value string) {
	fmt.Fprintf(b, "  %s: %s\n", key, value)
}

func more(b *strings.Builder, lines []string) {
	for _, l := range lines {
		fmt.Fprintf(b, "  %s\n", l)
	}
}

// quoted is a YAML flow list's items.
func quoted(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = strconv.Quote(it)
	}
	return strings.Join(q, ", ")
}

package testkit

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/config"
)

// A Process's YAML loads as the configuration it names, and an empty field
// takes its default: a key renamed in config/ fails here, not in a crash
// test's replica that never starts.
func TestProcessYAMLLoads(t *testing.T) {
	def := config.Default()
	full := Process{
		Brokers: []string{"127.0.0.1:9092", "127.0.0.1:9093"}, Group: "g",
		Orders: "o", Refunds: "r", DeadLetter: "d", Alerts: "a",
		Kafka:      []string{"heartbeat_interval: 200ms"},
		RedisAddrs: []string{"127.0.0.1:7000"}, Cluster: true, Prefix: "p", Redis: []string{"buckets: 4"},
		Webhook: "http://127.0.0.1:1/hook", Slack: []string{"digest_size: 7"},
		Metrics: "127.0.0.1:0", Pprof: true, Shutdown: "20s", Rules: "rules.yaml",
	}
	for _, tc := range []struct {
		name string
		p    Process
		want []any
	}{
		{"every field", full, []any{full.Brokers, "g", "o", "r", "d", "a", "earliest",
			200 * time.Millisecond, full.RedisAddrs, true, "p", full.Webhook, 7,
			"127.0.0.1:0", 20 * time.Second, 1, 4, true}},
		{"the rules alone", Process{Rules: "rules.yaml"}, []any{def.Kafka.Brokers, def.Kafka.GroupID,
			def.Kafka.OrdersTopic, def.Kafka.RefundsTopic, def.Kafka.DeadLetterTopic, def.Kafka.AlertsTopic, "earliest",
			def.Kafka.HeartbeatInterval, def.Redis.Addrs, false, def.Redis.KeyPrefix, "", def.Slack.DigestSize,
			def.Metrics.Listen, def.ShutdownTimeout, 1, def.Redis.Buckets, false}},
		{"redis lines alone", Process{Redis: []string{"buckets: 1"}, Rules: "rules.yaml"}, []any{def.Kafka.Brokers, def.Kafka.GroupID,
			def.Kafka.OrdersTopic, def.Kafka.RefundsTopic, def.Kafka.DeadLetterTopic, def.Kafka.AlertsTopic, "earliest",
			def.Kafka.HeartbeatInterval, def.Redis.Addrs, false, def.Redis.KeyPrefix, "", def.Slack.DigestSize,
			def.Metrics.Listen, def.ShutdownTimeout, 1, 1, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, tc.p.YAML())
			k, r := c.Kafka, c.Redis
			got := []any{k.Brokers, k.GroupID, k.OrdersTopic, k.RefundsTopic, k.DeadLetterTopic, k.AlertsTopic,
				k.StartOffset, k.HeartbeatInterval, r.Addrs, r.Cluster, r.KeyPrefix, string(c.Slack.WebhookURL),
				c.Slack.DigestSize, c.Metrics.Listen, c.ShutdownTimeout, len(c.Rules), r.Buckets, c.Metrics.Pprof}
			for i := range tc.want {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("field %d: got %#v, want %#v\n%s", i, got[i], tc.want[i], tc.p.YAML())
				}
			}
		})
	}
}

// load writes yaml and a rules file of one rule, and loads them.
func load(t *testing.T, yaml string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	rules := "rules:\n  - {name: r, metric: count, group_by: [ip], window: 1m, threshold: 3}\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fraudwatch.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	return c
}

package config

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// secretText is the credential every address of TestAddressesWithCredentials
// carries: no error may show it.
const secretText = "tok3nSECRET"

// Every address key refuses an address carrying credentials (or a URL, or a
// query), from the file and from the environment, naming the key (and the
// variable) and quoting the address with its credentials redacted.
func TestAddressesWithCredentials(t *testing.T) {
	// buttons makes slack.interactions_listen's other settings right, so
	// that its address is the one error.
	const buttons = "slack:\n  token: xoxb-1\n  signing_secret: s3cret\n"
	keys := []struct {
		field, env string
		file       func(addr string) string // the config with addr under the key
		base       string                   // the config when addr comes from env
	}{
		{"kafka.brokers[0]", "FRAUDWATCH_KAFKA_BROKERS",
			func(a string) string { return fmt.Sprintf("kafka:\n  brokers: [%q]\n", a) }, ""},
		{"redis.addrs[0]", "FRAUDWATCH_REDIS_ADDRS",
			func(a string) string { return fmt.Sprintf("redis:\n  addrs: [%q]\n", a) }, ""},
		{"metrics.listen", "FRAUDWATCH_METRICS_LISTEN",
			func(a string) string { return fmt.Sprintf("metrics:\n  listen: %q\n", a) }, ""},
		{"slack.interactions_listen", "FRAUDWATCH_SLACK_INTERACTIONS_LISTEN",
			func(a string) string { return buttons + fmt.Sprintf("  interactions_listen: %q\n", a) }, buttons},
	}
	addrs := []struct {
		name, addr, shown string
		why               string // in the message, past the quoted address
	}{
		{"a one-word userinfo", secretText + "@127.0.0.1:6379", "[redacted]@127.0.0.1:6379", "credentials (user@ or user:password@)"},
		{"user and password", "fw:" + secretText + "@cache:6379", "fw:[redacted]@cache:6379", "credentials (user@ or user:password@)"},
		{"a URL with a password", "redis://:" + secretText + "@cache:6379", "redis://:[redacted]@cache:6379", "credentials (user@ or user:password@)"},
		{"a URL with user and password", "rediss://default:" + secretText + "@cache:6380/0", "rediss://default:[redacted]@cache:6380/0",
			"credentials (user@ or user:password@)"},
		{"a query after the port", "cache:6379?password=" + secretText, "cache:6379?[redacted]", "port must be a number"},
		{"a query before the port", "cache?password=" + secretText + ":6379", "cache?[redacted]", "a host holds only letters"},
		{"a URL with a query", "kafka://b:9092?password=" + secretText, "kafka://b:9092?[redacted]", "without kafka://"},
	}
	for _, key := range keys {
		for _, a := range addrs {
			for _, fromEnv := range []bool{false, true} {
				name := key.field + "/" + a.name + "/file"
				if fromEnv {
					name = key.field + "/" + a.name + "/" + key.env
				}
				t.Run(name, func(t *testing.T) {
					clearEnv(t)
					yaml, suffix := key.file(a.addr), ""
					if fromEnv {
						yaml, suffix = key.base, " (set by "+key.env+")"
						t.Setenv(key.env, a.addr)
					}
					path := writeConfig(t, yaml+"rules_file: rules.yaml\n")
					_, err := Load(path)
					if err == nil {
						t.Fatalf("Load accepted %q", a.addr)
					}
					if strings.Contains(err.Error(), secretText) {
						t.Errorf("the error shows the secret: %v", err)
					}
					wantMessages(t, err, fmt.Sprintf("%s: %s: %q is not host:port", path, key.field, a.shown))
					if msg := err.Error(); !strings.Contains(msg, a.why) || !strings.HasSuffix(msg, suffix) {
						t.Errorf("the error does not say %q, ending %q: %v", a.why, suffix, err)
					}
				})
			}
		}
	}
}

// The messages say where credentials go, and what to write instead of a
// URL.
func TestAddressMessages(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"redis credentials", func(c *Config) { c.Redis.Addrs = []string{"tok@cache:6379"} },
			`redis.addrs[0]: "[redacted]@cache:6379" is not host:port: credentials (user@ or user:password@) do not go in an address, but in redis.username and redis.password`},
		{"kafka credentials", func(c *Config) { c.Kafka.Brokers = []string{"ok:9092", "u:p@b:9092"} },
			`kafka.brokers[1]: "u:[redacted]@b:9092" is not host:port: credentials (user@ or user:password@) do not go in an address, but in kafka.sasl.username and kafka.sasl.password`},
		{"a listener", func(c *Config) { c.Metrics.Listen = "admin@:9464" },
			`metrics.listen: "[redacted]@:9464" is not host:port (or :port): a listener takes no credentials (user@ or user:password@)`},
		{"a redis URL", func(c *Config) { c.Redis.Addrs = []string{"redis://cache:6379"} },
			`redis.addrs[0]: "redis://cache:6379" is not host:port: write the host:port alone, without redis://`},
		{"white space", func(c *Config) { c.Redis.Addrs = []string{"cache :6379"} },
			`redis.addrs[0]: "cache :6379" is not host:port: a host holds only letters, digits, '.', '-' and '_' (an IPv6 address goes in brackets)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			wantMessages(t, c.Validate(), tt.want)
			// CheckAddresses is the same check, for code given a Config
			// that may not have been validated.
			wantMessages(t, c.CheckAddresses(), tt.want)
		})
	}
}

// Addresses fraudwatch takes: names, IPv4, IPv6 (with a zone), and the
// ":port" of a listener.
func TestAddressesAccepted(t *testing.T) {
	c := validConfig()
	c.Kafka.Brokers = []string{"kafka-0.kafka.svc:9092", "10.0.0.7:9093", "[::1]:9094", "[fe80::1%eth0]:9095", "kafka_1:9092"}
	c.Redis.Addrs, c.Redis.Cluster = []string{"redis.redis:6379", "[2001:db8::1]:6379"}, true
	c.Metrics.Listen = ":9464"
	c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", "0.0.0.0:9091"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckAddresses(); err != nil {
		t.Fatal(err)
	}
}

// metrics.listen defaults to loopback: its status page shows each rule's
// threshold, window and cooldown, and a deployment opens it on purpose
// (docs/configuration.md, whose table row says so, and docs/operations.md,
// Metrics and health).
func TestMetricsListenDefaultsToLoopback(t *testing.T) {
	listen := Default().Metrics.Listen
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("metrics.listen defaults to %q, want a loopback address", listen)
	}
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if row := fmt.Sprintf("| `metrics.listen` | `%s` |", listen); !strings.Contains(string(doc), row) {
		t.Errorf("docs/configuration.md's table has no row %q", row)
	}
}

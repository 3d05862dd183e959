package config

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

const testFile = "/etc/fraudwatch/config.yaml"

// validConfig is Default with a rule: the baseline every case breaks.
func validConfig() Config {
	c := Default()
	c.File = testFile
	c.RulesFile = "/etc/fraudwatch/rules.yaml"
	c.Rules = []rules.Rule{{Name: "r", Metric: alert.Count, GroupBy: []string{"customer_id"},
		Window: time.Minute, Threshold: 3, Cooldown: time.Minute, Severity: alert.SeverityHigh, Mode: alert.ModeAlert, Enabled: true}}
	return c
}

func TestValidate(t *testing.T) {
	p := writePKI(t, t.TempDir())
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string // "field: message"; nil means valid
	}{
		{"defaults with a rule", func(c *Config) {}, nil},
		{"no brokers", func(c *Config) { c.Kafka.Brokers = nil }, []string{"kafka.brokers: needs at least one broker (host:port)"}},
		{"broker without port", func(c *Config) { c.Kafka.Brokers = []string{"k:9092", "kafka"} },
			[]string{`kafka.brokers[1]: "kafka" is not host:port: missing port in address`}},
		{"broker without host", func(c *Config) { c.Kafka.Brokers = []string{":9092"} },
			[]string{`kafka.brokers[0]: ":9092" is not host:port: missing host`}},
		{"broker bad port", func(c *Config) { c.Kafka.Brokers = []string{"k:0", "k:http", "k:70000"} }, []string{
			`kafka.brokers[0]: "k:0" is not host:port: port must be a number from 1 to 65535`,
			`kafka.brokers[1]: "k:http" is not host:port`, `kafka.brokers[2]: "k:70000" is not host:port`}},
		{"ipv6 broker", func(c *Config) { c.Kafka.Brokers = []string{"[::1]:9092"} }, nil},
		{"no group", func(c *Config) { c.Kafka.GroupID = "" }, []string{"kafka.group_id: is required"}},
		{"no client id", func(c *Config) { c.Kafka.ClientID = "" }, []string{"kafka.client_id: is required"}},
		{"no orders topic", func(c *Config) { c.Kafka.OrdersTopic = "" }, []string{"kafka.orders_topic: is required"}},
		{"bad refunds topic", func(c *Config) { c.Kafka.RefundsTopic = "shop refunds" },
			[]string{`kafka.refunds_topic: "shop refunds" may only contain a-z, A-Z, 0-9, '.', '_' and '-'`}},
		{"long dlq", func(c *Config) { c.Kafka.DeadLetterTopic = strings.Repeat("d", 250) },
			[]string{"kafka.dead_letter_topic: must be at most 249 characters, got 250"}},
		{"dot topic", func(c *Config) { c.Kafka.OrdersTopic = ".." }, []string{`kafka.orders_topic: ".." is not a valid topic name`}},
		{"one topic for both", func(c *Config) { c.Kafka.RefundsTopic = c.Kafka.OrdersTopic }, nil},
		{"topics that hash alike", func(c *Config) { c.Kafka.OrdersTopic, c.Kafka.RefundsTopic = "orders-4338", "orders-31606" },
			[]string{`kafka.refunds_topic: "orders-31606" hashes like kafka.orders_topic ("orders-4338")`}},
		{"dlq is orders", func(c *Config) { c.Kafka.DeadLetterTopic = "orders" },
			[]string{`kafka.dead_letter_topic: must differ from kafka.orders_topic ("orders")`}},
		{"dlq is refunds", func(c *Config) { c.Kafka.DeadLetterTopic = "refunds" },
			[]string{`kafka.dead_letter_topic: must differ from kafka.refunds_topic ("refunds")`}},
		{"alerts topic is the dlq", func(c *Config) { c.Kafka.AlertsTopic = c.Kafka.DeadLetterTopic },
			[]string{`kafka.alerts_topic: must differ from kafka.dead_letter_topic ("fraudwatch.dlq")`}},
		{"alerts topic is orders", func(c *Config) { c.Kafka.AlertsTopic = "orders" },
			[]string{`kafka.alerts_topic: must differ from kafka.orders_topic ("orders")`}},
		{"no alerts topic", func(c *Config) { c.Kafka.AlertsTopic = "" }, []string{"kafka.alerts_topic: is required"}},
		{"outcomes topic is the alerts topic", func(c *Config) { c.Kafka.OutcomesTopic = c.Kafka.AlertsTopic },
			[]string{`kafka.outcomes_topic: must differ from kafka.alerts_topic ("fraudwatch.alerts")`}},
		{"outcomes topic is refunds", func(c *Config) { c.Kafka.OutcomesTopic = "refunds" },
			[]string{`kafka.outcomes_topic: must differ from kafka.refunds_topic ("refunds")`}},
		{"no outcomes topic", func(c *Config) { c.Kafka.OutcomesTopic = "" }, []string{"kafka.outcomes_topic: is required"}},
		{"outcomes kept an hour", func(c *Config) { c.Outcomes.Retention = time.Hour },
			[]string{"outcomes.retention: must be between a day (24h) and three years (26280h), got 1h0m0s"}},
		{"no outcomes kept", func(c *Config) { c.Outcomes.MaxOrders = 0 },
			[]string{"outcomes.max_orders: must be between 1 and 10000000, got 0"}},
		{"start offset", func(c *Config) { c.Kafka.StartOffset = "newest" },
			[]string{`kafka.start_offset: must be earliest or latest, not "newest"`}},
		{"earliest", func(c *Config) { c.Kafka.StartOffset = "earliest" }, nil},
		{"event size too small", func(c *Config) { c.Kafka.MaxEventBytes = 1023 },
			[]string{"kafka.max_event_bytes: must be between 1024 (1 KiB) and 16777216 (16 MiB), got 1023"}},
		{"event size too large", func(c *Config) { c.Kafka.MaxEventBytes = 16<<20 + 1 },
			[]string{"kafka.max_event_bytes: must be between 1024 (1 KiB) and 16777216 (16 MiB), got 16777217"}},
		{"event size bounds", func(c *Config) { c.Kafka.MaxEventBytes = 1024 }, nil},
		{"event size upper bound", func(c *Config) { c.Kafka.MaxEventBytes = 16 << 20 }, nil},
		{"retry window negative", func(c *Config) { c.Kafka.RetryWindow = -1 },
			[]string{"kafka.retry_window: must be between 0 (off) and 1000000 records, got -1"}},
		{"retry window too large", func(c *Config) { c.Kafka.RetryWindow = 1_000_001 },
			[]string{"kafka.retry_window: must be between 0 (off) and 1000000 records, got 1000001"}},
		{"retry window off", func(c *Config) { c.Kafka.RetryWindow = 0 }, nil},
		{"retry window upper bound", func(c *Config) { c.Kafka.RetryWindow = 1_000_000 }, nil},
		{"durations", func(c *Config) {
			c.Kafka.CommitInterval = 0
			c.Kafka.SessionTimeout = -time.Second
			c.Kafka.RebalanceTimeout = 0
			c.Redis.DialTimeout = 0
			c.Redis.ReadTimeout = 0
			c.Redis.WriteTimeout = -1
			c.Slack.Timeout = 0
			c.ShutdownTimeout = 0
		}, []string{
			"kafka.commit_interval: must be a positive duration (such as 30s), got 0s",
			"kafka.session_timeout: must be a positive duration (such as 30s), got -1s",
			"kafka.rebalance_timeout: must be a positive duration",
			"redis.dial_timeout: must be a positive duration", "redis.read_timeout: must be a positive duration",
			"redis.write_timeout: must be a positive duration", "slack.timeout: must be a positive duration",
			"shutdown_timeout: must be a positive duration",
		}},
		{"heartbeat zero", func(c *Config) { c.Kafka.HeartbeatInterval = 0 },
			[]string{"kafka.heartbeat_interval: must be a positive duration"}},
		{"heartbeat not below session", func(c *Config) { c.Kafka.HeartbeatInterval = c.Kafka.SessionTimeout },
			[]string{"kafka.heartbeat_interval: must be shorter than kafka.session_timeout (30s), got 30s"}},
		{"unknown sasl", func(c *Config) { c.Kafka.SASL.Mechanism = "gssapi" },
			[]string{`kafka.sasl.mechanism: must be plain, scram-sha-256 or scram-sha-512 (or empty for no SASL), not "gssapi"`}},
		{"sasl without credentials", func(c *Config) { c.Kafka.SASL.Mechanism = "scram-sha-256" }, []string{
			"kafka.sasl.username: is required with SASL mechanism scram-sha-256",
			"kafka.sasl.password: is required with SASL mechanism scram-sha-256"}},
		{"credentials without sasl", func(c *Config) { c.Kafka.SASL.Username = "fw" },
			[]string{"kafka.sasl.mechanism: is required when kafka.sasl.username or kafka.sasl.password is set"}},
		{"sasl plain", func(c *Config) { c.Kafka.SASL = SASL{Mechanism: "plain", Username: "u", Password: "p"} }, nil},
		{"no redis", func(c *Config) { c.Redis.Addrs = []string{} }, []string{"redis.addrs: needs at least one address (host:port)"}},
		{"bad redis addr", func(c *Config) { c.Redis.Addrs = []string{"redis"} },
			[]string{`redis.addrs[0]: "redis" is not host:port: missing port in address`}},
		{"seeds without cluster", func(c *Config) { c.Redis.Addrs = []string{"a:6379", "b:6379"} },
			[]string{"redis.addrs: 2 addresses need redis.cluster: true"}},
		{"cluster seeds", func(c *Config) { c.Redis.Cluster, c.Redis.Addrs = true, []string{"a:6379", "b:6379"} }, nil},
		{"cluster db", func(c *Config) { c.Redis.Cluster, c.Redis.DB = true, 2 },
			[]string{"redis.db: must be 0 with redis.cluster: Redis Cluster has only database 0"}},
		{"negative db", func(c *Config) { c.Redis.DB = -1 }, []string{"redis.db: must not be negative, got -1"}},
		{"db 5", func(c *Config) { c.Redis.DB = 5 }, nil},
		{"empty prefix", func(c *Config) { c.Redis.KeyPrefix = "" }, []string{"redis.key_prefix: must not be empty"}},
		{"brace prefix", func(c *Config) { c.Redis.KeyPrefix = "f{w}" },
			[]string{`redis.key_prefix: "f{w}" must not contain braces or white space`}},
		{"space prefix", func(c *Config) { c.Redis.KeyPrefix = "f w" },
			[]string{`redis.key_prefix: "f w" must not contain braces or white space`}},
		{"negative pool", func(c *Config) { c.Redis.PoolSize = -1 },
			[]string{"redis.pool_size: must not be negative (0 keeps the go-redis default), got -1"}},
		{"negative buckets", func(c *Config) { c.Redis.Buckets = -1 },
			[]string{"redis.buckets: must be 1 to 256 (0: 16 on one Redis, 256 on a cluster), got -1"}},
		{"too many buckets", func(c *Config) { c.Redis.Buckets = 257 },
			[]string{"redis.buckets: must be 1 to 256 (0: 16 on one Redis, 256 on a cluster), got 257"}},
		{"one bucket", func(c *Config) { c.Redis.Buckets = 1 }, nil},
		{"all buckets", func(c *Config) { c.Redis.Buckets = 256 }, nil},
		{"webhook and token", func(c *Config) { c.Slack.WebhookURL, c.Slack.Token = "https://hooks.slack.com/x", "xoxb-1" },
			[]string{"slack.token: slack.webhook_url and slack.token are both set"}},
		{"webhook not a url", func(c *Config) { c.Slack.WebhookURL = "hooks.slack.com/services/T0/B0/x" },
			[]string{"slack.webhook_url: is not an http(s) URL"}},
		{"webhook ftp", func(c *Config) { c.Slack.WebhookURL = "ftp://hooks.slack.com/x" },
			[]string{"slack.webhook_url: is not an http(s) URL"}},
		{"webhook newline", func(c *Config) { c.Slack.WebhookURL = "https://hooks.slack.com/x\n" },
			[]string{"slack.webhook_url: has leading or trailing white space"}},
		{"webhook", func(c *Config) { c.Slack.WebhookURL = "https://hooks.slack.com/services/T0/B0/x" }, nil},
		{"token without channel", func(c *Config) { c.Slack.Token, c.Slack.Channel = "xoxb-1", "" },
			[]string{"slack.channel: is required with slack.token"}},
		{"token with a blank channel", func(c *Config) { c.Slack.Token, c.Slack.Channel = "xoxb-1", "  " },
			[]string{"slack.channel: is required with slack.token"}},
		{"token newline", func(c *Config) { c.Slack.Token = "xoxb-1\n" },
			[]string{"slack.token: has leading or trailing white space"}},
		{"token", func(c *Config) { c.Slack.Token = "xoxb-1" }, nil},
		{"bad api url", func(c *Config) { c.Slack.APIURL = "localhost:8080/api" },
			[]string{`slack.api_url: is not an http(s) URL`}},
		{"bad api url with credentials, not echoed", func(c *Config) { c.Slack.APIURL = "ftp://user:SecretPw@proxy/api" },
			[]string{`slack.api_url: is not an http(s) URL`}},
		{"api url", func(c *Config) { c.Slack.APIURL = "http://127.0.0.1:8080/api/" }, nil},
		{"a slower budget", func(c *Config) { c.Slack.Rate, c.Slack.Burst = 0.2, 1 }, nil},
		{"no rate", func(c *Config) { c.Slack.Rate = 0 }, []string{"slack.rate: must be a number of messages a second above 0"}},
		{"no overall burst", func(c *Config) { c.Slack.OverallBurst = 0 }, []string{"slack.overall_burst: must be 1 to 100000"}},
		{"a digest too long for Slack", func(c *Config) { c.Slack.DigestSize = 101 }, []string{"slack.digest_size: must be 1 to 100"}},
		{"buttons", func(c *Config) {
			c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", ":9091"
		}, nil},
		{"a signing secret without a listener", func(c *Config) { c.Slack.Token, c.Slack.SigningSecret = "xoxb-1", "s3cret" },
			[]string{"slack.interactions_listen: slack.signing_secret and slack.interactions_listen go together"}},
		{"a listener without a signing secret", func(c *Config) { c.Slack.Token, c.Slack.InteractionsListen = "xoxb-1", ":9091" },
			[]string{"slack.interactions_listen: slack.signing_secret and slack.interactions_listen go together"}},
		{"buttons without a token", func(c *Config) { c.Slack.SigningSecret, c.Slack.InteractionsListen = "s3cret", ":9091" },
			[]string{"slack.interactions_listen: needs slack.token"}},
		{"buttons on the metrics listener", func(c *Config) {
			c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", c.Metrics.Listen
		}, []string{"slack.interactions_listen: must differ from metrics.listen"}},
		{"buttons on every interface, metrics on loopback, one port", func(c *Config) {
			c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", ":9464"
		}, []string{"slack.interactions_listen: must differ from metrics.listen"}},
		{"buttons and metrics on any free port", func(c *Config) {
			c.Metrics.Listen = "127.0.0.1:0"
			c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", "127.0.0.1:0"
		}, nil},
		{"buttons on another interface's port", func(c *Config) {
			c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", "10.0.0.5:9464"
		}, nil},
		{"buttons on no address", func(c *Config) {
			c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", "9091"
		}, []string{`slack.interactions_listen: "9091" is not host:port`}},
		{"no listen", func(c *Config) { c.Metrics.Listen = "" }, []string{"metrics.listen: is required"}},
		{"port only", func(c *Config) { c.Metrics.Listen = "9464" },
			[]string{`metrics.listen: "9464" is not host:port (or :port): missing port in address`}},
		{"listen port range", func(c *Config) { c.Metrics.Listen = "localhost:99999" },
			[]string{`metrics.listen: "localhost:99999" is not host:port (or :port): port must be a number from 0 to 65535`}},
		{"listen any port", func(c *Config) { c.Metrics.Listen = "127.0.0.1:0" }, nil},
		{"no rules", func(c *Config) { c.Rules = nil }, []string{"rules_file: no rules loaded from /etc/fraudwatch/rules.yaml"}},
		{"no rules file", func(c *Config) { c.Rules, c.RulesFile = nil, "" }, []string{"rules_file: is required"}},
		{"rules from code", func(c *Config) { c.RulesFile = "" }, nil},
		{"tls files", func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, CAFile: p.CA, CertFile: p.Cert, KeyFile: p.Key}
			c.Redis.TLS = TLS{Enabled: true, CAFile: p.CA}
		}, nil},
		{"tls ca unreadable", func(c *Config) { c.Kafka.TLS.CAFile = missing },
			[]string{"kafka.tls.ca_file: open " + missing + ": no such file or directory"}},
		{"tls ca a directory", func(c *Config) { c.Redis.TLS.CAFile = filepath.Dir(p.CA) },
			[]string{"redis.tls.ca_file: read " + filepath.Dir(p.CA) + ": is a directory"}},
		{"tls ca not pem", func(c *Config) { c.Redis.TLS.CAFile = p.NotPEM },
			[]string{"redis.tls.ca_file: " + p.NotPEM + " holds no PEM certificate"}},
		{"tls cert without key", func(c *Config) { c.Kafka.TLS.CertFile = p.Cert },
			[]string{"kafka.tls.key_file: is required with kafka.tls.cert_file"}},
		{"tls key without cert", func(c *Config) { c.Redis.TLS.KeyFile = p.Key },
			[]string{"redis.tls.cert_file: is required with redis.tls.key_file"}},
		{"tls key unreadable", func(c *Config) { c.Kafka.TLS.CertFile, c.Kafka.TLS.KeyFile = p.Cert, missing },
			[]string{"kafka.tls.key_file: open " + missing}},
		{"tls mismatched key", func(c *Config) { c.Kafka.TLS.CertFile, c.Kafka.TLS.KeyFile = p.Cert, p.OtherKey },
			[]string{"kafka.tls.cert_file: " + p.Cert + " and " + p.OtherKey + " are not a certificate and its key"}},
		{"tls files checked while disabled", func(c *Config) { c.Kafka.TLS = TLS{Enabled: false, CAFile: missing} },
			[]string{"kafka.tls.ca_file: open " + missing}},
		{"everything at once", func(c *Config) {
			c.Kafka.GroupID = ""
			c.Redis.KeyPrefix = ""
			c.Slack.Token, c.Slack.Channel = "xoxb-1", ""
			c.Rules = nil
		}, []string{"kafka.group_id: is required", "redis.key_prefix: must not be empty",
			"slack.channel: is required with slack.token", "rules_file: no rules loaded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			var want []string
			for _, w := range tt.want {
				// Every message names the file and the dotted field.
				want = append(want, testFile+": "+w)
			}
			wantMessages(t, err, want...)
		})
	}
}

func TestValidateWithoutFile(t *testing.T) {
	c := Default()
	wantMessages(t, c.Validate(), "rules_file: no rules loaded from rules.yaml")
	if msg := c.Validate().Error(); strings.HasPrefix(msg, ":") {
		t.Errorf("message %q starts with an empty file name", msg)
	}
}

func TestTLSClientConfig(t *testing.T) {
	p := writePKI(t, t.TempDir())
	tests := []struct {
		name    string
		tls     TLS
		wantNil bool
		wantErr string
		check   func(t *testing.T, c *tls.Config)
	}{
		{name: "disabled", tls: TLS{CAFile: p.CA}, wantNil: true},
		{name: "system roots", tls: TLS{Enabled: true, ServerName: "kafka.internal"}, check: func(t *testing.T, c *tls.Config) {
			if c.RootCAs != nil || len(c.Certificates) != 0 || c.ServerName != "kafka.internal" || c.InsecureSkipVerify {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "ca and client cert", tls: TLS{Enabled: true, CAFile: p.CA, CertFile: p.Cert, KeyFile: p.Key, InsecureSkipVerify: true},
			check: func(t *testing.T, c *tls.Config) {
				if c.RootCAs == nil || len(c.Certificates) != 1 || !c.InsecureSkipVerify || c.MinVersion != tls.VersionTLS12 {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "bad ca", tls: TLS{Enabled: true, CAFile: p.NotPEM}, wantErr: "holds no PEM certificate"},
		{name: "bad pair", tls: TLS{Enabled: true, CertFile: p.Cert, KeyFile: p.OtherKey}, wantErr: "tls cert_file/key_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.tls.ClientConfig()
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tt.wantNil:
				if c != nil {
					t.Fatalf("got %+v, want nil", c)
				}
			default:
				tt.check(t, c)
			}
		})
	}
}

// redis.buckets' default depends on the Redis: 16 on one, all 256 on a
// cluster, whose masters its tags must spread over.
func TestCountingBuckets(t *testing.T) {
	for _, tc := range []struct {
		buckets int
		cluster bool
		want    int
	}{
		{0, false, 16},
		{0, true, 256},
		{64, false, 64},
		{64, true, 64},
		{1, false, 1},
	} {
		r := Redis{Buckets: tc.buckets, Cluster: tc.cluster}
		if got := r.CountingBuckets(); got != tc.want {
			t.Errorf("buckets %d, cluster %v: CountingBuckets() = %d, want %d", tc.buckets, tc.cluster, got, tc.want)
		}
	}
}

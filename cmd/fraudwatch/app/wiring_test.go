package app

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go/sasl/plain"

	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
	"github.com/fraudwatch/fraudwatch/lua"
)

// The two groups every replica runs, as docs/configuration.md and
// docs/design.md (Delivery guarantees) describe them.
func TestGroupConfigs(t *testing.T) {
	for _, start := range []string{"earliest", "latest"} {
		t.Run(start, func(t *testing.T) {
			c := config.Default()
			c.Kafka.Brokers = []string{"127.0.0.1:9092"}
			c.Kafka.GroupID = "fw"
			c.Kafka.StartOffset = start
			c.ShutdownTimeout = 40 * time.Second
			events, alerts, err := groupConfigs(&c)
			if err != nil {
				t.Fatal(err)
			}
			if events.StartEarliest != (start == "earliest") {
				t.Errorf("events group starts earliest: %v, want it as start_offset says", events.StartEarliest)
			}
			// A new alerts group must not skip alerts already handed off.
			if !alerts.StartEarliest {
				t.Error("the alerts group does not start at the earliest offset")
			}
			if alerts.GroupID != "fw.alerts" || !slices.Equal(alerts.Topics, []string{c.Kafka.AlertsTopic}) {
				t.Errorf("alerts group %s on %v, want fw.alerts on the alerts topic", alerts.GroupID, alerts.Topics)
			}
			// Three quarters of the shutdown for the drain.
			if events.DrainTimeout != 30*time.Second || alerts.DrainTimeout != 30*time.Second {
				t.Errorf("drain timeouts %v and %v, want 30s of a 40s shutdown_timeout", events.DrainTimeout, alerts.DrainTimeout)
			}
			// An alert Slack did not take comes round again 1 s, then up
			// to 30 s, later (docs/alerts.md).
			if alerts.RetryMin != time.Second || alerts.RetryMax != 30*time.Second {
				t.Errorf("alerts group retries after %v to %v, want 1s to 30s", alerts.RetryMin, alerts.RetryMax)
			}
			if !slices.Equal(events.RequiredTopics, []string{c.Kafka.AlertsTopic}) {
				t.Errorf("the events group waits for %v, want the alerts topic", events.RequiredTopics)
			}
		})
	}
}

// go-redis's own retries are off: a resent script whose reply was lost
// would apply twice (docs/design.md, Delivery guarantees). A ClusterClient
// resends up to MaxRedirects whatever MaxRetries says, so the scripts
// whose second run answers otherwise are sent once (lua/once.go,
// TestALostReplyIsNotResent); the single client is the one to check here.
func TestRedisClientDoesNotRetry(t *testing.T) {
	rdb, err := NewRedis(config.Default().Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	c, ok := rdb.(*redis.Client)
	if !ok {
		t.Fatalf("client %T, want a single-node client", rdb)
	}
	// -1 is go-redis's "none", which it keeps as 0; its default is 3.
	if got := c.Options().MaxRetries; got != 0 {
		t.Errorf("MaxRetries = %d, want none", got)
	}
}

// Every Redis setting reaches the client, single or cluster
// (docs/configuration.md).
func TestRedisClientCarriesEverySetting(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprint("cluster=", cluster), func(t *testing.T) {
			c := config.Default().Redis
			c.Addrs = []string{"127.0.0.1:7001"}
			if cluster {
				c.Addrs = append(c.Addrs, "127.0.0.1:7002")
			}
			c.Cluster = cluster
			c.Username, c.Password = "fw", config.Secret("redis-secret")
			if !cluster {
				c.DB = 3
			}
			c.DialTimeout, c.ReadTimeout, c.WriteTimeout = 2*time.Second, 500*time.Millisecond, 750*time.Millisecond
			c.PoolSize = 40
			c.TLS = config.TLS{Enabled: true, ServerName: "redis.internal", InsecureSkipVerify: true}
			rdb, err := NewRedis(c)
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			type opts struct {
				Addrs                                  []string
				Username, Password                     string
				DB                                     int
				DialTimeout, ReadTimeout, WriteTimeout time.Duration
				PoolSize                               int
				ServerName                             string
				InsecureSkipVerify                     bool
			}
			var got opts
			switch r := rdb.(type) {
			case *redis.Client:
				o := r.Options()
				got = opts{[]string{o.Addr}, o.Username, o.Password, o.DB, o.DialTimeout, o.ReadTimeout, o.WriteTimeout,
					o.PoolSize, o.TLSConfig.ServerName, o.TLSConfig.InsecureSkipVerify}
			case *redis.ClusterClient:
				o := r.Options()
				got = opts{o.Addrs, o.Username, o.Password, 0, o.DialTimeout, o.ReadTimeout, o.WriteTimeout,
					o.PoolSize, o.TLSConfig.ServerName, o.TLSConfig.InsecureSkipVerify}
			default:
				t.Fatalf("client %T", rdb)
			}
			if _, isCluster := rdb.(*redis.ClusterClient); isCluster != cluster {
				t.Errorf("a cluster client: %v, want %v", isCluster, cluster)
			}
			want := opts{c.Addrs, "fw", "redis-secret", c.DB, 2 * time.Second, 500 * time.Millisecond, 750 * time.Millisecond,
				40, "redis.internal", true}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("client options\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// Every kafka setting reaches both groups: client id, timings, TLS, SASL
// with the mechanism named, and the event size bound
// (docs/configuration.md).
func TestGroupConfigsCarryEverySetting(t *testing.T) {
	for _, tt := range []struct {
		mechanism, name string
	}{
		{config.SASLPlain, "PLAIN"},
		{config.SASLScramSHA256, "SCRAM-SHA-256"},
		{config.SASLScramSHA512, "SCRAM-SHA-512"},
	} {
		t.Run(tt.mechanism, func(t *testing.T) {
			c := config.Default()
			k := &c.Kafka
			k.Brokers, k.GroupID, k.ClientID = []string{"127.0.0.1:9092", "127.0.0.1:9093"}, "fw", "fraudwatch-eu"
			k.OrdersTopic, k.RefundsTopic, k.DeadLetterTopic = "o", "r", "d"
			k.CommitInterval, k.SessionTimeout, k.HeartbeatInterval, k.RebalanceTimeout = 2*time.Second, 45*time.Second, 5*time.Second, time.Minute
			k.MaxEventBytes, k.RetryWindow = 131072, 777
			k.TLS = config.TLS{Enabled: true, ServerName: "kafka.internal"}
			k.SASL = config.SASL{Mechanism: tt.mechanism, Username: "fw", Password: config.Secret("kafka-secret")}
			events, alerts, err := groupConfigs(&c)
			if err != nil {
				t.Fatal(err)
			}
			for name, g := range map[string]consumer.GroupConfig{"events": events.GroupConfig, "alerts": alerts} {
				if !slices.Equal(g.Brokers, k.Brokers) || g.ClientID != "fraudwatch-eu" || g.CommitInterval != 2*time.Second ||
					g.SessionTimeout != 45*time.Second || g.HeartbeatInterval != 5*time.Second || g.RebalanceTimeout != time.Minute {
					t.Errorf("%s group: %+v", name, g)
				}
				if g.TLS == nil || g.TLS.ServerName != "kafka.internal" {
					t.Errorf("%s group's TLS: %+v", name, g.TLS)
				}
				if g.SASL == nil || g.SASL.Name() != tt.name {
					t.Errorf("%s group's SASL: %v, want %s", name, g.SASL, tt.name)
				}
			}
			if events.GroupID != "fw" || events.OrdersTopic != "o" || events.RefundsTopic != "r" || events.DeadLetterTopic != "d" ||
				events.MaxEventBytes != 131072 || events.RetryWindow != 777 {
				t.Errorf("events group: %+v", events)
			}
			if p, ok := events.SASL.(plain.Mechanism); ok && (p.Username != "fw" || p.Password != "kafka-secret") {
				t.Errorf("plain credentials %q/%q, want the configured ones", p.Username, p.Password)
			}
		})
	}
}

// The slack section's budgets and digest size, the key prefix and the
// counting buckets reach the dispatcher; its timings are the caller's
// (docs/alerts.md, Floods).
func TestDispatcherConfig(t *testing.T) {
	c := config.Default()
	c.Redis.KeyPrefix, c.Redis.Buckets = "fwprod", 32
	c.Slack.Rate, c.Slack.Burst, c.Slack.OverallRate, c.Slack.OverallBurst, c.Slack.DigestSize = 0.5, 2, 4, 8, 20
	got := dispatcherConfig(&c, dispatch.DispatcherConfig{MaxAttempts: 7})
	want := dispatch.DispatcherConfig{MaxAttempts: 7, KeyPrefix: "fwprod", Buckets: 32, ChannelBudget: lua.Budget{Rate: 0.5, Burst: 2},
		OverallBudget: lua.Budget{Rate: 4, Burst: 8}, DigestSize: 20}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dispatcher config\n%+v\nwant\n%+v", got, want)
	}
}

// New refuses an address that carries credentials, as Load does, before it
// dials or listens: a Config built in code never reaches a dial error, a
// listen error or a log line that would quote them.
func TestNewRefusesAddressesWithCredentials(t *testing.T) {
	const secret = "tok3nSECRET"
	tests := []struct {
		field string
		set   func(c *config.Config)
	}{
		{"kafka.brokers[0]", func(c *config.Config) { c.Kafka.Brokers = []string{secret + "@127.0.0.1:9092"} }},
		{"redis.addrs[0]", func(c *config.Config) { c.Redis.Addrs = []string{secret + "@127.0.0.1:6379"} }},
		{"metrics.listen", func(c *config.Config) { c.Metrics.Listen = secret + "@127.0.0.1:0" }},
		{"slack.interactions_listen", func(c *config.Config) {
			c.Slack.Token, c.Slack.SigningSecret, c.Slack.InteractionsListen = "xoxb-1", "s3cret", secret+"@127.0.0.1:0"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			cfg := config.Default()
			cfg.RulesFile, cfg.Metrics.Listen = "", "127.0.0.1:0"
			tt.set(&cfg)
			var logs bytes.Buffer
			a, err := New(&cfg, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err == nil {
				a.Close()
				t.Fatal("New accepted the address")
			}
			if !strings.Contains(err.Error(), tt.field+`: "[redacted]@127.0.0.1:`) {
				t.Errorf("the error does not name %s with the address redacted: %v", tt.field, err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
				t.Errorf("the secret shows:\nerr: %v\nlogs: %s", err, logs.String())
			}
		})
	}
}

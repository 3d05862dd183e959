// Package config is the one home of fraudwatch's settings and rules
// (docs/configuration.md): their types, defaults (Default, a rule's
// optional fields) and checks (Validate, ParseRules). Messages name the
// file, rule, key and environment variable at fault. Components take the
// checked values and never default or check a setting again; a
// component's Validate only notices a value unset or unusable.
//
// Load reads the configuration and the rules file the strict way of
// strict.go, and overlays the environment with viper. Every key can be set
// as FRAUDWATCH_ + its upper-cased dotted path, _ for . (kafka.tls.enabled:
// FRAUDWATCH_KAFKA_TLS_ENABLED); lists are comma-separated, and an empty
// variable counts as unset. Relative paths resolve against the config
// file's directory.
package config

import (
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Start offsets of a new consumer group.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// SASL mechanisms.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Config is fraudwatch's whole configuration.
type Config struct {
	Kafka   Kafka   `mapstructure:"kafka"`
	Redis   Redis   `mapstructure:"redis"`
	Slack   Slack   `mapstructure:"slack"`
	Metrics Metrics `mapstructure:"metrics"`
	// Outcomes bounds the outcomes kept in Redis (docs/outcomes.md).
	Outcomes Outcomes `mapstructure:"outcomes"`
	// Receivers, when set, are where alerts go, in the slack: section's
	// stead (receivers.go); ReceiverList resolves them.
	Receivers []ReceiverSpec `mapstructure:"receivers"`
	// RulesFile is absolute after Load.
	RulesFile       string        `mapstructure:"rules_file"`
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`

	// File is the absolute path the config was loaded from, "" for Default.
	File string `mapstructure:"-"`
	// Rules are the rules of RulesFile, loaded by Load, and EventFields
	// the fields it declares (event_fields).
	Rules       []rules.Rule `mapstructure:"-"`
	EventFields []string     `mapstructure:"-"`
	// Routes, DefaultReceivers and Routing are the rules file's
	// (RuleSet): where each rule's alerts go.
	Routes           []Route  `mapstructure:"-"`
	DefaultReceivers []string `mapstructure:"-"`
	Routing          Routing  `mapstructure:"-"`

	// name is the file as the user named it, for messages.
	name string
	// env maps the keys that came from the environment to their variable,
	// so that an error about one points at the variable, not the file.
	env map[string]string
}

// Kafka is the kafka: section.
type Kafka struct {
	Brokers      []string `mapstructure:"brokers"`
	GroupID      string   `mapstructure:"group_id"`
	OrdersTopic  string   `mapstructure:"orders_topic"`
	RefundsTopic string   `mapstructure:"refunds_topic"`
	// DeadLetterTopic receives invalid events with their reason.
	DeadLetterTopic string `mapstructure:"dead_letter_topic"`
	// AlertsTopic carries every first crossing from the events consumer to
	// the alert dispatchers (group GroupID + ".alerts"); a feed for other
	// systems too.
	AlertsTopic string `mapstructure:"alerts_topic"`
	// OutcomesTopic carries outcomes of orders that other systems write
	// (chargebacks, reviews), read in the group GroupID + ".outcomes"
	// (docs/outcomes.md).
	OutcomesTopic string `mapstructure:"outcomes_topic"`
	// StartOffset is where a new consumer group starts: earliest | latest.
	StartOffset string `mapstructure:"start_offset"`
	ClientID    string `mapstructure:"client_id"`
	// MaxEventBytes bounds a message; larger ones are invalid ("oversized").
	MaxEventBytes int `mapstructure:"max_event_bytes"`
	// RetryWindow is how many records back in its partition a second
	// record of an event (a producer's retry) is caught; 0: not at all.
	RetryWindow       int           `mapstructure:"retry_window"`
	CommitInterval    time.Duration `mapstructure:"commit_interval"`
	SessionTimeout    time.Duration `mapstructure:"session_timeout"`
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	RebalanceTimeout  time.Duration `mapstructure:"rebalance_timeout"`
	TLS               TLS           `mapstructure:"tls"`
	SASL              SASL          `mapstructure:"sasl"`
}

// SameTopic reports whether orders and refunds share one topic, in which
// case every event must carry its "type".
func (k *Kafka) SameTopic() bool { return k.OrdersTopic == k.RefundsTopic }

// OutcomesGroupID is the consumer group that reads the outcomes topic.
func (k *Kafka) OutcomesGroupID() string { return k.GroupID + ".outcomes" }

// Outcomes is the outcomes: section.
type Outcomes struct {
	// Retention is how long an order's outcome, and an alert's record of
	// its orders, are kept after they are last written.
	Retention time.Duration `mapstructure:"retention"`
	// MaxOrders bounds the orders with an outcome: past it the oldest
	// written are dropped first.
	MaxOrders int `mapstructure:"max_orders"`
}

// SASL is kafka.sasl.
type SASL struct {
	// Mechanism is "" (no SASL), plain, scram-sha-256 or scram-sha-512.
	Mechanism string `mapstructure:"mechanism"`
	Username  string `mapstructure:"username"`
	Password  Secret `mapstructure:"password"`
}

// TLS is the tls: block of kafka and redis.
type TLS struct {
	Enabled bool `mapstructure:"enabled"`
	// CAFile replaces the system roots when set.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are a client certificate, both or neither.
	CertFile   string `mapstructure:"cert_file"`
	KeyFile    string `mapstructure:"key_file"`
	ServerName string `mapstructure:"server_name"`
	// InsecureSkipVerify disables certificate verification: for tests only.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// Redis is the redis: section.
type Redis struct {
	// Addrs is one address, or the seed nodes of a cluster.
	Addrs     []string `mapstructure:"addrs"`
	Cluster   bool     `mapstructure:"cluster"`
	KeyPrefix string   `mapstructure:"key_prefix"`
	Username  string   `mapstructure:"username"`
	Password  Secret   `mapstructure:"password"`
	DB        int      `mapstructure:"db"`

	DialTimeout  time.Duration `mapstructure:"dial_timeout"`
	ReadTimeout  time.Duration `mapstructure:"read_timeout"`
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	// PoolSize 0 keeps go-redis's default.
	PoolSize int `mapstructure:"pool_size"`
	// Buckets is how many hash tags the groups' counting keys spread over,
	// 1 to lua.Buckets; 0 picks CountingBuckets' default.
	Buckets int `mapstructure:"buckets"`
	TLS     TLS `mapstructure:"tls"`
}

// SingleBuckets is redis.buckets' default on one Redis: a batch's windows
// share 16 calls rather than up to 256, a seventh as many in make bench's
// (b), and its p99 at half load fell from 55 to 39 ms (docs/performance.md).
// A Redis Cluster keeps lua.Buckets, to spread the groups over its masters
// evenly.
const SingleBuckets = 16

// CountingBuckets is how many hash tags the counting keys spread over:
// redis.buckets, or its default.
func (r Redis) CountingBuckets() int {
	switch {
	case r.Buckets != 0:
		return r.Buckets
	case r.Cluster:
		return lua.Buckets
	}
	return SingleBuckets
}

// Slack is the slack: section. Webhook mode, token mode, or neither (alerts
// go to the log).
type Slack struct {
	WebhookURL Secret `mapstructure:"webhook_url"`
	Token      Secret `mapstructure:"token"`
	// Channel is where token mode posts unless a rule names its own.
	Channel string `mapstructure:"channel"`
	// APIURL overrides the Slack Web API base URL (proxies, tests).
	APIURL  string        `mapstructure:"api_url"`
	Timeout time.Duration `mapstructure:"timeout"`
	// SigningSecret verifies the clicks on alerts' buttons (the Slack
	// app's signing secret); InteractionsListen is the address their
	// requests arrive at (/slack/interactions). Together, in token mode,
	// they put Snooze and Acknowledge buttons on every alert.
	SigningSecret      Secret `mapstructure:"signing_secret"`
	InteractionsListen string `mapstructure:"interactions_listen"`
	// Rate and Burst bound the messages to one channel, OverallRate and
	// OverallBurst to all of them, shared by every replica (messages a
	// second; at most Burst at once). Past them a batch's alerts go out as
	// one digest per rule, listing DigestSize of them.
	Rate         float64 `mapstructure:"rate"`
	Burst        int     `mapstructure:"burst"`
	OverallRate  float64 `mapstructure:"overall_rate"`
	OverallBurst int     `mapstructure:"overall_burst"`
	DigestSize   int     `mapstructure:"digest_size"`
}

// SlackMode is how alerts are delivered.
type SlackMode string

// Slack modes.
const (
	SlackOff     SlackMode = "off" // alerts go to the log
	SlackWebhook SlackMode = "webhook"
	SlackToken   SlackMode = "token"
)

// Mode says how alerts are delivered. With both a webhook and a token set
// (which Validate refuses) it answers webhook.
func (s *Slack) Mode() SlackMode {
	switch {
	case s.WebhookURL != "":
		return SlackWebhook
	case s.Token != "":
		return SlackToken
	}
	return SlackOff
}

// Metrics is the metrics: section.
type Metrics struct {
	// Listen serves /metrics, /healthz, /readyz and the status page. The
	// default is loopback only: the page shows each rule's threshold,
	// window and cooldown, what a fraudster needs to stay under them, so a
	// deployment opens it (":9464") to its own network on purpose.
	Listen string `mapstructure:"listen"`
	// Pprof serves Go's profiles (net/http/pprof) at /debug/pprof/ on the
	// same listener: off by default, since a profile shows the code's hot
	// paths and costs CPU while it is taken (docs/operations.md).
	Pprof bool `mapstructure:"pprof"`
}

// Default returns the configuration with every default and no rules.
func Default() Config {
	return Config{
		Kafka: Kafka{
			Brokers:           []string{"127.0.0.1:9092"},
			GroupID:           "fraudwatch",
			OrdersTopic:       "orders",
			RefundsTopic:      "refunds",
			DeadLetterTopic:   "fraudwatch.dlq",
			AlertsTopic:       "fraudwatch.alerts",
			OutcomesTopic:     "fraudwatch.outcomes",
			StartOffset:       StartLatest,
			ClientID:          "fraudwatch",
			MaxEventBytes:     64 << 10,
			RetryWindow:       4096,
			CommitInterval:    time.Second,
			SessionTimeout:    30 * time.Second,
			HeartbeatInterval: 3 * time.Second,
			RebalanceTimeout:  30 * time.Second,
		},
		Redis: Redis{
			Addrs:        []string{"127.0.0.1:6379"},
			KeyPrefix:    "fw",
			DialTimeout:  5 * time.Second,
			ReadTimeout:  3 * time.Second,
			WriteTimeout: 3 * time.Second,
		},
		Slack: Slack{
			Channel: "#fraud-alerts",
			Timeout: 10 * time.Second,
			// Slack's own limit: about one message a second a channel.
			Rate: 1, Burst: 3, OverallRate: 5, OverallBurst: 15, DigestSize: 10,
		},
		Metrics: Metrics{Listen: "127.0.0.1:9464"},
		// Chargebacks come within 120 days of an order.
		Outcomes:        Outcomes{Retention: 180 * 24 * time.Hour, MaxOrders: 1_000_000},
		RulesFile:       "rules.yaml",
		ShutdownTimeout: 30 * time.Second,
	}
}

// RuleSet is the rules file as Load read it.
func (c *Config) RuleSet() RuleSet {
	return RuleSet{Rules: c.Rules, EventFields: c.EventFields, Routes: c.Routes, DefaultReceivers: c.DefaultReceivers,
		Routing: c.Routing, File: c.RulesFile}
}

// StartOffsetEarliest reports whether a new consumer group starts at the
// earliest offset rather than the latest.
func (c *Config) StartOffsetEarliest() bool { return c.Kafka.StartOffset == StartEarliest }

// AlertsGroupID is the consumer group of the alert dispatchers.
func (k *Kafka) AlertsGroupID() string { return k.GroupID + ".alerts" }

package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// Kafka limits: on a message size fraudwatch accepts, and on the records
// a partition remembers for its retries.
const (
	MinEventBytes = 1 << 10
	MaxEventBytes = 16 << 20
	// MaxRetryWindow bounds kafka.retry_window: the consumer keeps about
	// 50 bytes a record, so 50 MB for each partition held at the bound.
	MaxRetryWindow = 1_000_000
)

// Validate reports every problem of the configuration at once, each naming
// the file and the dotted key. It never quotes a secret.
func (c *Config) Validate() error {
	errs := c.checkSettings()
	if len(c.Rules) == 0 {
		k := &checker{c: c}
		if c.RulesFile == "" {
			k.bad("rules_file", "is required")
		} else {
			k.bad("rules_file", "no rules loaded from %s", c.RulesFile)
		}
		errs = append(errs, k.errs...)
	}
	if len(errs) == 0 && len(c.Rules) > 0 {
		// The routes name receivers of this file: checked once both are
		// good.
		s := c.RuleSet()
		errs = append(errs, s.CheckReceivers(c.ReceiverList()))
	}
	return errors.Join(errs...)
}

// checkSettings checks everything but the presence of rules.
func (c *Config) checkSettings() []error {
	k := &checker{c: c}
	k.kafka(&c.Kafka)
	k.redis(&c.Redis)
	k.slack(&c.Slack)
	k.receivers()
	k.addresses()
	k.positive("shutdown_timeout", c.ShutdownTimeout)
	k.outcomes(c.Outcomes)
	return k.errs
}

func (k *checker) kafka(kc *Kafka) {
	k.required("kafka.group_id", kc.GroupID)
	k.required("kafka.client_id", kc.ClientID)
	k.topics(kc)
	switch kc.StartOffset {
	case StartEarliest, StartLatest:
	default:
		k.bad("kafka.start_offset", "must be %s or %s, not %q", StartEarliest, StartLatest, kc.StartOffset)
	}
	if kc.MaxEventBytes < MinEventBytes || kc.MaxEventBytes > MaxEventBytes {
		k.bad("kafka.max_event_bytes", "must be between %d (1 KiB) and %d (16 MiB), got %d",
			MinEventBytes, MaxEventBytes, kc.MaxEventBytes)
	}
	if kc.RetryWindow < 0 || kc.RetryWindow > MaxRetryWindow {
		k.bad("kafka.retry_window", "must be between 0 (off) and %d records, got %d", MaxRetryWindow, kc.RetryWindow)
	}
	k.positive("kafka.commit_interval", kc.CommitInterval)
	k.positive("kafka.session_timeout", kc.SessionTimeout)
	k.positive("kafka.heartbeat_interval", kc.HeartbeatInterval)
	k.positive("kafka.rebalance_timeout", kc.RebalanceTimeout)
	if kc.HeartbeatInterval > 0 && kc.SessionTimeout > 0 && kc.HeartbeatInterval >= kc.SessionTimeout {
		k.bad("kafka.heartbeat_interval", "must be shorter than kafka.session_timeout (%v), got %v",
			kc.SessionTimeout, kc.HeartbeatInterval)
	}
	k.tls("kafka.tls", kc.TLS)
	k.sasl(kc.SASL)
}

// topics checks the four topic names, and that the topics fraudwatch
// writes differ from those it reads and from each other: writing dead
// letters or alerts to a source topic would feed them back in.
func (k *checker) topics(kc *Kafka) {
	k.topic("kafka.orders_topic", kc.OrdersTopic)
	k.topic("kafka.refunds_topic", kc.RefundsTopic)
	k.topic("kafka.dead_letter_topic", kc.DeadLetterTopic)
	k.topic("kafka.alerts_topic", kc.AlertsTopic)
	k.topic("kafka.outcomes_topic", kc.OutcomesTopic)
	if ot := kc.OutcomesTopic; ot != "" {
		for _, other := range []struct{ key, name string }{{"orders_topic", kc.OrdersTopic},
			{"refunds_topic", kc.RefundsTopic}, {"dead_letter_topic", kc.DeadLetterTopic}, {"alerts_topic", kc.AlertsTopic}} {
			if ot == other.name {
				k.bad("kafka.outcomes_topic", "must differ from kafka.%s (%q)", other.key, ot)
				break
			}
		}
	}
	if dlq := kc.DeadLetterTopic; dlq != "" {
		switch dlq {
		case kc.OrdersTopic:
			k.bad("kafka.dead_letter_topic", "must differ from kafka.orders_topic (%q)", dlq)
		case kc.RefundsTopic:
			k.bad("kafka.dead_letter_topic", "must differ from kafka.refunds_topic (%q)", dlq)
		}
	}
	if kc.OrdersTopic != kc.RefundsTopic && lua.Source(kc.OrdersTopic, 0) == lua.Source(kc.RefundsTopic, 0) {
		// A bucket of groups remembers the last offset applied from each partition
		// under a short hash of its topic: two topics that hash alike
		// would share those records.
		k.bad("kafka.refunds_topic", "%q hashes like kafka.orders_topic (%q) in fraudwatch's records: choose another name",
			kc.RefundsTopic, kc.OrdersTopic)
	}
	if at := kc.AlertsTopic; at != "" {
		switch at {
		case kc.OrdersTopic:
			k.bad("kafka.alerts_topic", "must differ from kafka.orders_topic (%q)", at)
		case kc.RefundsTopic:
			k.bad("kafka.alerts_topic", "must differ from kafka.refunds_topic (%q)", at)
		case kc.DeadLetterTopic:
			k.bad("kafka.alerts_topic", "must differ from kafka.dead_letter_topic (%q)", at)
		}
	}
}

// MaxOutcomeOrders bounds outcomes.max_orders: about 300 bytes an order
// in Redis, 3 GB at the bound.
const MaxOutcomeOrders = 10_000_000

func (k *checker) outcomes(o Outcomes) {
	if o.Retention < 24*time.Hour || o.Retention > 3*365*24*time.Hour {
		k.bad("outcomes.retention", "must be between a day (24h) and three years (26280h), got %v", o.Retention)
	}
	if o.MaxOrders < 1 || o.MaxOrders > MaxOutcomeOrders {
		k.bad("outcomes.max_orders", "must be between 1 and %d, got %d", MaxOutcomeOrders, o.MaxOrders)
	}
}

func (k *checker) sasl(s SASL) {
	switch s.Mechanism {
	case "":
		if s.Username != "" || s.Password != "" {
			k.bad("kafka.sasl.mechanism", "is required when kafka.sasl.username or kafka.sasl.password is set (%s, %s or %s)",
				SASLPlain, SASLScramSHA256, SASLScramSHA512)
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.Username == "" {
			k.bad("kafka.sasl.username", "is required with SASL mechanism %s", s.Mechanism)
		}
		if s.Password == "" {
			k.bad("kafka.sasl.password", "is required with SASL mechanism %s", s.Mechanism)
		}
	default:
		k.bad("kafka.sasl.mechanism", "must be %s, %s or %s (or empty for no SASL), not %q",
			SASLPlain, SASLScramSHA256, SASLScramSHA512, s.Mechanism)
	}
}

func (k *checker) redis(r *Redis) {
	if !r.Cluster && len(r.Addrs) > 1 {
		k.bad("redis.addrs", "%d addresses need redis.cluster: true (a single Redis takes one address)", len(r.Addrs))
	}
	if err := lua.ValidatePrefix(r.KeyPrefix); err != nil {
		k.bad("redis.key_prefix", "%v", err)
	}
	if r.DB < 0 {
		k.bad("redis.db", "must not be negative, got %d", r.DB)
	} else if r.Cluster && r.DB != 0 {
		k.bad("redis.db", "must be 0 with redis.cluster: Redis Cluster has only database 0")
	}
	k.positive("redis.dial_timeout", r.DialTimeout)
	k.positive("redis.read_timeout", r.ReadTimeout)
	k.positive("redis.write_timeout", r.WriteTimeout)
	if r.PoolSize < 0 {
		k.bad("redis.pool_size", "must not be negative (0 keeps the go-redis default), got %d", r.PoolSize)
	}
	if r.Buckets < 0 || r.Buckets > lua.Buckets {
		k.bad("redis.buckets", "must be 1 to %d (0: %d on one Redis, %d on a cluster), got %d", lua.Buckets, SingleBuckets, lua.Buckets, r.Buckets)
	}
	k.tls("redis.tls", r.TLS)
}

func (k *checker) slack(s *Slack) {
	if s.WebhookURL != "" && s.Token != "" {
		k.bad("slack.token", "slack.webhook_url and slack.token are both set: alerts go through one of them, remove the other")
	}
	// The webhook URL is itself a credential: say what is wrong, never
	// what it is.
	if trimmed(s.WebhookURL) {
		k.bad("slack.webhook_url", "has leading or trailing white space")
	}
	if trimmed(s.Token) {
		k.bad("slack.token", "has leading or trailing white space")
	}
	k.slackSettings("slack.", s)
	switch {
	case (s.SigningSecret == "") != (s.InteractionsListen == ""):
		k.bad("slack.interactions_listen", "slack.signing_secret and slack.interactions_listen go together: buttons need both")
	case s.InteractionsListen == "":
	case s.Token == "" && k.c.Receivers == nil:
		// With receivers:, receivers() asks for a receiver in token mode.
		k.bad("slack.interactions_listen", "needs slack.token: buttons update their messages in bot-token mode only")
	case sameListener(s.InteractionsListen, k.c.Metrics.Listen):
		k.bad("slack.interactions_listen", "must differ from metrics.listen: Slack's requests get a listener of their own")
	}
	if trimmed(s.SigningSecret) {
		k.bad("slack.signing_secret", "has leading or trailing white space")
	}
}

// slackSettings checks the keys the slack: section and a Slack receiver
// share; p is the section's key, "slack." or "receivers[1].slack.".
func (k *checker) slackSettings(p string, s *Slack) {
	if s.WebhookURL != "" && !trimmed(s.WebhookURL) && !httpURL(s.WebhookURL.Value()) {
		k.bad(p+"webhook_url", "is not an http(s) URL")
	}
	if s.Token != "" && strings.TrimSpace(s.Channel) == "" {
		k.bad(p+"channel", "is required with %stoken (bot-token mode posts to a channel)", p)
	}
	if s.APIURL != "" && !httpURL(s.APIURL) {
		// Not quoted: the URL may carry credentials for a proxy.
		k.bad(p+"api_url", "is not an http(s) URL")
	}
	k.positive(p+"timeout", s.Timeout)
	for _, r := range []struct {
		key  string
		rate float64
	}{{p + "rate", s.Rate}, {p + "overall_rate", s.OverallRate}} {
		if !(r.rate > 0 && r.rate <= 1000) {
			k.bad(r.key, "must be a number of messages a second above 0 and at most 1000, got %v", r.rate)
		}
	}
	for _, b := range []struct {
		key   string
		burst int
	}{{p + "burst", s.Burst}, {p + "overall_burst", s.OverallBurst}} {
		if b.burst < 1 || b.burst > 100000 {
			k.bad(b.key, "must be 1 to 100000 messages, got %d", b.burst)
		}
	}
	if s.DigestSize < 1 || s.DigestSize > 100 {
		// Slack takes 50 blocks and 40,000 characters a message.
		k.bad(p+"digest_size", "must be 1 to 100 alerts listed in a digest, got %d", s.DigestSize)
	}
}

// checker collects FieldErrors for one Config.
type checker struct {
	c    *Config
	errs []error
}

func (k *checker) bad(field, format string, args ...any) {
	base, _, _ := strings.Cut(field, "[")
	k.errs = append(k.errs, &FieldError{
		File:  k.c.displayName(),
		Field: field,
		Env:   k.c.env[base],
		Msg:   fmt.Sprintf(format, args...),
	})
}

func (k *checker) required(field, v string) {
	if v == "" {
		k.bad(field, "is required")
	}
}

func (k *checker) positive(field string, d time.Duration) {
	if d <= 0 {
		k.bad(field, "must be a positive duration (such as 30s), got %v", d)
	}
}

// topic checks a Kafka topic name as the broker would.
func (k *checker) topic(field, name string) {
	switch {
	case name == "":
		k.bad(field, "is required")
	case len(name) > 249:
		k.bad(field, "must be at most 249 characters, got %d", len(name))
	case name == "." || name == "..":
		k.bad(field, "%q is not a valid topic name", name)
	case strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}):
		k.bad(field, "%q may only contain a-z, A-Z, 0-9, '.', '_' and '-'", name)
	}
}

// tls checks that the files of a tls block are readable and hold what they
// should, whether or not the block is enabled: files named but unusable
// are a mistake either way.
func (k *checker) tls(prefix string, t TLS) {
	read := func(field, path string) []byte {
		if path == "" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			k.bad(prefix+"."+field, "%v", err)
			return nil
		}
		return b
	}
	ca := read("ca_file", t.CAFile)
	cert := read("cert_file", t.CertFile)
	key := read("key_file", t.KeyFile)
	if ca != nil && !x509.NewCertPool().AppendCertsFromPEM(ca) {
		k.bad(prefix+".ca_file", "%s holds no PEM certificate", t.CAFile)
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		k.bad(prefix+".key_file", "is required with %s.cert_file", prefix)
	case t.CertFile == "" && t.KeyFile != "":
		k.bad(prefix+".cert_file", "is required with %s.key_file", prefix)
	case cert != nil && key != nil:
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			k.bad(prefix+".cert_file", "%s and %s are not a certificate and its key: %v", t.CertFile, t.KeyFile, err)
		}
	}
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func trimmed(s Secret) bool { return strings.TrimSpace(s.Value()) != s.Value() }

// displayName is the config file as the user named it.
func (c *Config) displayName() string {
	if c.name != "" {
		return c.name
	}
	return c.File
}

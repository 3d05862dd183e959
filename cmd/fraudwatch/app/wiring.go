package app

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/pagerduty"
	"github.com/fraudwatch/fraudwatch/alert/slack"
	"github.com/fraudwatch/fraudwatch/alert/webhook"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
	"github.com/fraudwatch/fraudwatch/lua"
)

// NewRedis opens a client for one Redis, or for a Redis Cluster, as
// `fraudwatch run` does; the commands that work on its state (fraudwatch
// silence) use it too.
func NewRedis(c config.Redis) (redis.UniversalClient, error) {
	tc, err := c.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("app: redis tls: %w", err)
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:         c.Addrs,
		IsClusterMode: c.Cluster,
		Username:      c.Username,
		Password:      c.Password.Value(),
		DB:            c.DB,
		DialTimeout:   c.DialTimeout,
		ReadTimeout:   c.ReadTimeout,
		WriteTimeout:  c.WriteTimeout,
		PoolSize:      c.PoolSize,
		TLSConfig:     tc,
		// A single server's client would resend a command whose reply was
		// lost; a failed call instead fails its event or alert, which is
		// retried as a whole (the scripts' offsets and claims make a second
		// run harmless). A cluster's client resends anyway, up to
		// MaxRedirects, but the scripts whose second run answers otherwise
		// (outcome_open, ...) and the SET NXs of the Slack replay guard and
		// the silence-end lease are sent once (internal/redisonce).
		MaxRetries: -1,
	}), nil
}

// newReceiver makes the notifier of one receiver the configuration names,
// and its budget when it has one of its own (nil: the slack section's,
// which Slack's receivers keep to).
func newReceiver(rc config.Receiver, log *slog.Logger) (alert.Notifier, *lua.Budget, error) {
	switch rc.Kind {
	case config.KindSlack:
		n, err := newSlack(*rc.Slack, rc.Name, log)
		return n, nil, err
	case config.KindLog:
		return dispatch.NewLogNotifier(log.With("component", "alert")), nil, nil
	case config.KindWebhook:
		w := rc.Webhook
		secrets := make([]string, len(w.Secrets))
		for i, s := range w.Secrets {
			secrets[i] = s.Value()
		}
		n, err := webhook.New(webhook.Config{Name: rc.Name, URL: w.URL, Secrets: secrets, Template: w.Template,
			ContentType: w.ContentType, Timeout: w.Timeout})
		if err != nil {
			return nil, nil, err
		}
		return n, &lua.Budget{Rate: w.Rate, Burst: w.Burst}, nil
	case config.KindPagerDuty:
		p := rc.PagerDuty
		n, err := pagerduty.New(pagerduty.Config{Name: rc.Name, RoutingKey: p.RoutingKey.Value(), URL: p.URL, Timeout: p.Timeout})
		if err != nil {
			return nil, nil, err
		}
		return n, &lua.Budget{Rate: p.Rate, Burst: p.Burst}, nil
	}
	return nil, nil, fmt.Errorf("unknown receiver kind %q", rc.Kind)
}

// NewNotifier picks Slack (webhook or bot token) or, without Slack, the log.
func NewNotifier(c config.Slack, log *slog.Logger) (alert.Notifier, error) {
	return newSlack(c, "", log)
}

// newSlack is NewNotifier for the receiver name (slack when "").
func newSlack(c config.Slack, name string, log *slog.Logger) (alert.Notifier, error) {
	var sc slack.Config
	switch c.Mode() {
	case config.SlackWebhook:
		sc = slack.Config{WebhookURL: c.WebhookURL.Value(), Timeout: c.Timeout}
	case config.SlackToken:
		sc = slack.Config{Token: c.Token.Value(), Channel: c.Channel, APIURL: c.APIURL, Timeout: c.Timeout,
			Buttons: c.InteractionsListen != ""}
	default:
		return dispatch.NewLogNotifier(log.With("component", "alert")), nil
	}
	sc.Name = name
	s, err := slack.NewReceiver(sc)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return s, nil
}

// dispatcherConfig maps the slack section's budgets and digests, and the
// key prefix, onto base (the dispatcher's timings).
func dispatcherConfig(c *config.Config, base dispatch.DispatcherConfig) dispatch.DispatcherConfig {
	base.KeyPrefix = c.Redis.KeyPrefix
	base.Buckets = c.Redis.CountingBuckets()
	return slackBudgets(c.Slack, base)
}

// slackBudgets maps a Slack receiver's budgets and digests onto base.
func slackBudgets(s config.Slack, base dispatch.DispatcherConfig) dispatch.DispatcherConfig {
	base.ChannelBudget = lua.Budget{Rate: s.Rate, Burst: s.Burst}
	base.OverallBudget = lua.Budget{Rate: s.OverallRate, Burst: s.OverallBurst}
	base.DigestSize = s.DigestSize
	return base
}

// groupConfigs maps the kafka section onto the two groups every replica
// runs: the events group, and the alert dispatchers' group.
func groupConfigs(c *config.Config) (events consumer.Config, alerts consumer.GroupConfig, err error) {
	k := c.Kafka
	tc, mech, err := kafkaSecurity(k)
	if err != nil {
		return consumer.Config{}, consumer.GroupConfig{}, fmt.Errorf("app: %w", err)
	}
	base := consumer.GroupConfig{
		Brokers:           k.Brokers,
		GroupID:           k.GroupID,
		ClientID:          k.ClientID,
		TLS:               tc,
		SASL:              mech,
		StartEarliest:     c.StartOffsetEarliest(),
		CommitInterval:    k.CommitInterval,
		SessionTimeout:    k.SessionTimeout,
		HeartbeatInterval: k.HeartbeatInterval,
		RebalanceTimeout:  k.RebalanceTimeout,
		// The drain may take most of the shutdown budget; closing clients
		// and the HTTP server take the rest.
		DrainTimeout: c.ShutdownTimeout * 3 / 4,
	}
	events = consumer.Config{
		GroupConfig:     base,
		OrdersTopic:     k.OrdersTopic,
		RefundsTopic:    k.RefundsTopic,
		DeadLetterTopic: k.DeadLetterTopic,
		MaxEventBytes:   k.MaxEventBytes,
		RetryWindow:     k.RetryWindow,
	}
	// The events group hands crossings to the alerts topic: it waits for
	// it, as for the dead-letter topic.
	events.RequiredTopics = []string{k.AlertsTopic}

	alerts = base
	alerts.GroupID = k.AlertsGroupID()
	alerts.Topics = []string{k.AlertsTopic}
	// A new alerts group must not skip alerts already handed off; delivery
	// records make replaying them harmless.
	alerts.StartEarliest = true
	// The dispatcher has already retried within the call: Slack is down, so
	// wait longer before the next round.
	alerts.RetryMin, alerts.RetryMax = time.Second, 30*time.Second
	return events, alerts, nil
}

// KafkaTransport connects to the configured brokers as the consumer does
// (client id, TLS, SASL): for tools that read the topics outside a group,
// such as backtest --from-topic.
func KafkaTransport(k config.Kafka) (*kafka.Transport, error) {
	tc, mech, err := kafkaSecurity(k)
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{ClientID: k.ClientID, DialTimeout: 10 * time.Second, TLS: tc, SASL: mech}, nil
}

// kafkaSecurity builds the TLS and SASL settings of the kafka section, for
// every Kafka client of the cluster (the groups, the writers, produce).
func kafkaSecurity(k config.Kafka) (*tls.Config, sasl.Mechanism, error) {
	tc, err := k.TLS.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kafka tls: %w", err)
	}
	mech, err := saslMechanism(k.SASL)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka sasl: %w", err)
	}
	return tc, mech, nil
}

func saslMechanism(s config.SASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case config.SASLPlain:
		return plain.Mechanism{Username: s.Username, Password: s.Password.Value()}, nil
	case config.SASLScramSHA256:
		return scram.Mechanism(scram.SHA256, s.Username, s.Password.Value())
	case config.SASLScramSHA512:
		return scram.Mechanism(scram.SHA512, s.Username, s.Password.Value())
	}
	return nil, fmt.Errorf("unknown mechanism %q", s.Mechanism)
}

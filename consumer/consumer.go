// Package consumer reads messages from Kafka as a member of a consumer
// group, committing an offset only once everything before it has been
// handled: delivery is at least once.
//
// Group is the generic member; Consumer builds on it for order and refund
// events: it decodes them, sends invalid ones to the dead-letter topic and
// hands valid ones to a Handler.
package consumer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/fraudwatch/fraudwatch/event"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// Handler evaluates one valid event. It returns nil once the event's
// effects are done (counters updated, alerts handed off); an error is
// retried with backoff, and the offset is not committed past the event,
// unless it wraps event.ErrUnprocessable: such an event goes to the
// dead-letter topic instead.
type Handler interface {
	Handle(ctx context.Context, ev *event.Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, ev *event.Event) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, ev *event.Event) error { return f(ctx, ev) }

// Config configures a Consumer. Zero durations take the defaults.
type Config struct {
	Brokers         []string
	GroupID         string
	OrdersTopic     string
	RefundsTopic    string // may equal OrdersTopic: events then carry their type
	DeadLetterTopic string
	// RequiredTopics are waited for at start besides the three above:
	// topics the Handler writes to (the alerts topic).
	RequiredTopics []string
	// StartEarliest makes a new group (no committed offset) start at the
	// oldest retained event instead of the newest.
	StartEarliest bool
	ClientID      string
	// MaxEventBytes: larger message values are invalid ("oversized").
	MaxEventBytes     int
	CommitInterval    time.Duration
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// DrainTimeout bounds how long in-flight events may take to finish
	// once Run's context is done.
	DrainTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between attempts at an event
	// whose handling failed (Redis down, say).
	RetryMin time.Duration
	RetryMax time.Duration
	// LagInterval is how often fraudwatch_consumer_lag is refreshed from
	// the partitions' high-water marks (default 5s).
	LagInterval time.Duration
	TLS         *tls.Config
	SASL        sasl.Mechanism
}

// group returns the settings of the underlying Group.
func (c *Config) group() GroupConfig {
	topics := []string{c.OrdersTopic, c.RefundsTopic}
	if c.OrdersTopic == c.RefundsTopic {
		topics = topics[:1]
	}
	return GroupConfig{
		Brokers:           c.Brokers,
		GroupID:           c.GroupID,
		Topics:            topics,
		RequiredTopics:    append([]string{c.DeadLetterTopic}, c.RequiredTopics...),
		StartEarliest:     c.StartEarliest,
		ClientID:          c.ClientID,
		MaxMessageBytes:   max(4<<20, 2*c.MaxEventBytes),
		CommitInterval:    c.CommitInterval,
		SessionTimeout:    c.SessionTimeout,
		HeartbeatInterval: c.HeartbeatInterval,
		RebalanceTimeout:  c.RebalanceTimeout,
		DrainTimeout:      c.DrainTimeout,
		RetryMin:          c.RetryMin,
		RetryMax:          c.RetryMax,
		LagInterval:       c.LagInterval,
		TLS:               c.TLS,
		SASL:              c.SASL,
	}
}

func (c *Config) setDefaults() {
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = 64 << 10
	}
}

// Validate reports settings that cannot work.
func (c *Config) Validate() error {
	var errs []error
	if c.OrdersTopic == "" || c.RefundsTopic == "" || c.DeadLetterTopic == "" {
		errs = append(errs, errors.New("orders, refunds and dead-letter topics are all required"))
	}
	if c.DeadLetterTopic == c.OrdersTopic || c.DeadLetterTopic == c.RefundsTopic {
		errs = append(errs, errors.New("the dead-letter topic must differ from the source topics"))
	}
	if c.MaxEventBytes < 1 {
		errs = append(errs, errors.New("max event bytes must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	g := c.group()
	g.setDefaults()
	return g.Validate()
}

// Consumer is one member of the events consumer group.
type Consumer struct {
	*Group
	cfg     Config
	handler Handler
	log     *slog.Logger
	m       metrics
	dlq     *kafka.Writer

	closeOnce sync.Once
	closeErr  error
}

// New returns an events consumer; Run starts it.
func New(cfg Config, h Handler, log *slog.Logger, reg prometheus.Registerer) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("consumer: nil handler")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	c := &Consumer{
		cfg:     cfg,
		handler: h,
		log:     log,
		m:       m,
		dlq: &kafka.Writer{
			Addr:         kafka.TCP(cfg.Brokers...),
			Topic:        cfg.DeadLetterTopic,
			Balancer:     &kafka.Murmur2Balancer{},
			RequiredAcks: kafka.RequireAll,
			// Each dead letter is written on its own and waited for; a
			// batch timeout would only add latency.
			BatchSize: 1,
			// kafka-go's default (1 MiB) would refuse, client side, events
			// we read and must dead-letter; room for every message a fetch
			// can bring, plus the headers we add.
			BatchBytes: int64(cfg.group().MaxMessageBytes) + deadLetterHeaderRoom,
			Transport:  transport(cfg.ClientID, cfg.TLS, cfg.SASL),
			ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
				log.Warn("kafka dead-letter writer: "+fmt.Sprintf(msg, args...), "topic", cfg.DeadLetterTopic)
			}),
		},
	}
	if c.Group, err = NewGroup(cfg.group(), MessageHandlerFunc(c.handleMessage), log, reg); err != nil {
		return nil, err
	}
	return c, nil
}

// Close releases the dead-letter writer. Run must have returned. Close is
// idempotent.
func (c *Consumer) Close() error {
	c.closeOnce.Do(func() {
		if err := c.dlq.Close(); err != nil {
			c.closeErr = fmt.Errorf("consumer: close dead-letter writer: %w", err)
		}
	})
	return c.closeErr
}

// topicType is the event type a topic implies ("" for a shared topic).
func (c *Consumer) topicType(topic string) event.Type {
	switch {
	case c.cfg.OrdersTopic == c.cfg.RefundsTopic:
		return ""
	case topic == c.cfg.OrdersTopic:
		return event.Order
	default:
		return event.Refund
	}
}

// handleMessage is one attempt at one message: a valid event goes to the
// Handler, an invalid one to the dead-letter topic.
func (c *Consumer) handleMessage(ctx context.Context, msg kafka.Message) error {
	start := time.Now()
	defer func() { c.m.processing.Observe(time.Since(start).Seconds()) }()
	ev, invalid := c.decode(msg)
	if invalid != nil {
		return c.reject(ctx, msg, invalid, "invalid event sent to the dead-letter topic")
	}
	if err := c.handler.Handle(ctx, ev); err != nil {
		if !errors.Is(err, event.ErrUnprocessable) {
			return err
		}
		// No retry can succeed, and retrying for ever would stop the
		// partition: it is dead-lettered like an invalid event. The
		// engine's error text names rules and scripts, never payload
		// values, so it may travel in the header and the log.
		why := &event.InvalidError{Reason: event.ReasonUnprocessable, Detail: err.Error()}
		return c.reject(ctx, msg, why, "unprocessable event sent to the dead-letter topic")
	}
	c.m.consumed.WithLabelValues(string(ev.Type)).Inc()
	return nil
}

// reject dead-letters msg, then counts and logs it.
func (c *Consumer) reject(ctx context.Context, msg kafka.Message, why *event.InvalidError, logMsg string) error {
	if err := c.deadLetter(ctx, msg, why); err != nil {
		return err
	}
	c.m.invalid.WithLabelValues(string(why.Reason)).Inc()
	c.log.Warn(logMsg, "topic", msg.Topic, "partition", msg.Partition,
		"offset", msg.Offset, "reason", why.Reason, "err", why.Error())
	return nil
}

func (c *Consumer) decode(msg kafka.Message) (*event.Event, *event.InvalidError) {
	if len(msg.Value) > c.cfg.MaxEventBytes {
		return nil, &event.InvalidError{Reason: event.ReasonOversized,
			Detail: fmt.Sprintf("value of %d bytes exceeds %d", len(msg.Value), c.cfg.MaxEventBytes)}
	}
	ev, err := event.Decode(msg.Value, c.topicType(msg.Topic))
	if err != nil {
		var inv *event.InvalidError
		if errors.As(err, &inv) {
			return nil, inv
		}
		return nil, &event.InvalidError{Reason: event.ReasonMalformedJSON, Detail: "undecodable"}
	}
	ev.Source = event.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
	return ev, nil
}

// Dead-letter headers (SPEC §3).
const (
	HeaderError           = "fraudwatch-error"
	HeaderSourceTopic     = "fraudwatch-source-topic"
	HeaderSourcePartition = "fraudwatch-source-partition"
	HeaderSourceOffset    = "fraudwatch-source-offset"
	// HeaderValueDropped is set, to the original value's size in bytes, on
	// a dead letter written without its value because the dead-letter
	// writer or topic would not take it whole.
	HeaderValueDropped = "fraudwatch-value-dropped"
)

// deadLetterHeaderRoom is what the dead-letter writer allows beyond the
// largest fetched message, for the headers deadLetter adds.
const deadLetterHeaderRoom = 64 << 10

// deadLetter writes the original key, value and headers to the dead-letter
// topic, adding why and where from.
func (c *Consumer) deadLetter(ctx context.Context, msg kafka.Message, why *event.InvalidError) error {
	headers := make([]kafka.Header, 0, len(msg.Headers)+4)
	headers = append(headers, msg.Headers...)
	headers = append(headers,
		kafka.Header{Key: HeaderError, Value: []byte(why.Error())},
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	)
	err := c.dlq.WriteMessages(ctx, kafka.Message{Key: msg.Key, Value: msg.Value, Headers: headers})
	if err == nil {
		return nil
	}
	if !tooLarge(err) {
		return fmt.Errorf("consumer: write dead letter: %w", err)
	}
	// Too large for the writer or for the dead-letter topic: no retry can
	// help, and an invalid event must never stop the partition. The key,
	// headers and source still let an operator find the original.
	headers = append(headers, kafka.Header{Key: HeaderValueDropped, Value: []byte(strconv.Itoa(len(msg.Value)))})
	if err := c.dlq.WriteMessages(ctx, kafka.Message{Key: msg.Key, Headers: headers}); err != nil {
		return fmt.Errorf("consumer: write dead letter without its value: %w", err)
	}
	c.log.Warn("dead letter too large for the dead-letter topic; written without its value",
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
		"dead_letter_topic", c.cfg.DeadLetterTopic, "value_bytes", len(msg.Value), "err", err)
	return nil
}

// tooLarge reports whether a write failed because a message is too large:
// refused by the writer (kafka.MessageTooLargeError, which unwraps to
// kafka.MessageSizeTooLarge) or by the broker (inside kafka.WriteErrors,
// which does not unwrap).
func tooLarge(err error) bool {
	permanent := func(err error) bool {
		// RecordListTooLarge: the batch exceeds the topic's segment size.
		return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge)
	}
	if permanent(err) {
		return true
	}
	if we, ok := errors.AsType[kafka.WriteErrors](err); ok {
		for _, e := range we {
			if e != nil && permanent(e) {
				return true
			}
		}
	}
	return false
}

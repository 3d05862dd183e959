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
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/event"
)

// Handler evaluates the valid events of a batch, read from one partition
// in order. It returns once their effects are done (counters updated,
// alerts handed off), naming in unprocessable (by index) the events no
// retry can process, each wrapping event.ErrUnprocessable: those go to the
// dead-letter topic. An error means none of the batch may be committed: it
// is retried as a whole, with backoff.
type Handler interface {
	Handle(ctx context.Context, evs []*event.Event) (unprocessable map[int]error, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, evs []*event.Event) (map[int]error, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, evs []*event.Event) (map[int]error, error) {
	return f(ctx, evs)
}

// Config configures a Consumer: the group's settings, and the events'
// topics. Like the group's, the topics and MaxEventBytes come checked from
// package config.
type Config struct {
	// GroupConfig holds the membership settings. Its Topics are the orders
	// and refunds topics and are set by New (leave them empty), which also
	// waits for the dead-letter topic besides RequiredTopics and sizes
	// MaxMessageBytes to fetch the largest event it must dead-letter.
	GroupConfig
	OrdersTopic  string
	RefundsTopic string // may equal OrdersTopic: events then carry their type
	// DeadLetterTopic receives invalid events.
	DeadLetterTopic string
	// MaxEventBytes: larger message values are invalid ("oversized").
	MaxEventBytes int
	// RetryWindow is how many records back, in its partition, a second
	// record of an event is caught as a producer's retry (0: not at all);
	// bounded by package config.
	RetryWindow int
}

// group returns the settings of the underlying Group.
func (c *Config) group() GroupConfig {
	g := c.GroupConfig
	g.Topics = []string{c.OrdersTopic}
	if c.RefundsTopic != c.OrdersTopic {
		g.Topics = append(g.Topics, c.RefundsTopic)
	}
	g.RequiredTopics = append([]string{c.DeadLetterTopic}, c.RequiredTopics...)
	g.MaxMessageBytes = max(4<<20, 2*c.MaxEventBytes)
	return g
}

// Validate reports settings left unset.
func (c *Config) Validate() error {
	var errs []error
	if c.OrdersTopic == "" || c.RefundsTopic == "" || c.DeadLetterTopic == "" {
		errs = append(errs, errors.New("orders, refunds and dead-letter topics are all required"))
	}
	if len(c.Topics) > 0 {
		errs = append(errs, errors.New("Topics are the orders and refunds topics: leave them empty"))
	}
	if c.MaxEventBytes < 1 {
		errs = append(errs, errors.New("max event bytes must be positive"))
	}
	if c.RetryWindow < 0 {
		errs = append(errs, fmt.Errorf("retry window must be 0 or more, got %d", c.RetryWindow))
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
	// retries holds each held partition's memory of its event ids.
	retries *memories

	closeOnce sync.Once
	closeErr  error
}

// New returns an events consumer; Run starts it.
func New(cfg Config, h Handler, log *slog.Logger, reg prometheus.Registerer) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("consumer: nil handler")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg, cfg.group().Topics)
	if err != nil {
		return nil, err
	}
	group := cfg.group()
	c := &Consumer{
		cfg:     cfg,
		handler: h,
		log:     log,
		m:       m,
		retries: newMemories(cfg.RetryWindow),
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
			BatchBytes: int64(group.MaxMessageBytes) + deadLetterHeaderRoom,
			Transport:  cfg.Transport(),
			ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
				log.Warn("kafka dead-letter writer: "+fmt.Sprintf(msg, args...), "topic", cfg.DeadLetterTopic)
			}),
		},
	}
	if c.Group, err = NewGroup(group, eventsHandler{c}, log, reg); err != nil {
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

// handleMessages is one attempt at a batch of one partition's messages:
// valid events go to the Handler, invalid and unprocessable ones to the
// dead-letter topic, a producer's retries of events nowhere. It is all or
// nothing: on error the whole batch is tried again, which the scripts make
// harmless for the events counted already.
func (c *Consumer) handleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	start := time.Now()
	defer func() { c.m.processing.Observe(time.Since(start).Seconds()) }()
	mem := c.retries.of(msgs)
	// What a failed attempt saw is forgotten: the next one sees the same
	// records again, and must find the same retries.
	defer mem.Discard()
	s := c.sortOut(msgs, mem)
	decoded := time.Now()
	timer := &Timer{}
	unprocessable, err := c.handler.Handle(context.WithValue(ctx, timerKey{}, timer), s.evs)
	if err != nil {
		return 0, err
	}
	handled := time.Now()
	for j, err := range unprocessable {
		// No retry can succeed, and retrying for ever would stop the
		// partition: it is dead-lettered like an invalid event. The
		// engine's error text names rules and scripts, never payload
		// values, so it may travel in the header and the log.
		why := &event.InvalidError{Reason: event.ReasonUnprocessable, Detail: err.Error()}
		s.rejects = append(s.rejects, reject{s.from[j], why, "unprocessable event sent to the dead-letter topic"})
	}
	for _, r := range s.rejects {
		if err := c.deadLetter(ctx, msgs[r.msg], r.why); err != nil {
			return 0, err
		}
	}
	mem.Commit()
	done := time.Now()
	c.m.handled(len(msgs), start, decoded, handled, done, timer)
	for j, ev := range s.evs {
		if unprocessable[j] == nil {
			c.m.consumedOne(ev.Type)
			c.m.latency.Observe(done.Sub(msgs[s.from[j]].Time).Seconds())
		}
	}
	for _, r := range s.rejects {
		msg := msgs[r.msg]
		c.m.invalid.WithLabelValues(string(r.why.Reason)).Inc()
		c.log.Warn(r.log, "topic", msg.Topic, "partition", msg.Partition,
			"offset", msg.Offset, "reason", r.why.Reason, "err", r.why.Error())
	}
	for _, i := range s.retried {
		msg := msgs[i]
		c.m.retried.WithLabelValues(msg.Topic).Inc()
		c.log.Debug("producer retry of an event not handled again", "topic", msg.Topic,
			"partition", msg.Partition, "offset", msg.Offset)
	}
	return len(msgs), nil
}

// sorted is a batch's messages sorted out.
type sorted struct {
	evs     []*event.Event // for the Handler
	from    []int          // the message of each event
	rejects []reject       // for the dead-letter topic
	retried []int          // the messages that are a producer's retries
}

// sortOut decodes a batch and sorts its messages out; mem, when set, takes
// their event ids and tells retries.
func (c *Consumer) sortOut(msgs []kafka.Message, mem *Retries) sorted {
	s := sorted{evs: make([]*event.Event, 0, len(msgs)), from: make([]int, 0, len(msgs))}
	// The batch's events share their allocations (event.Batch); an
	// oversized message is not decoded, nor copied.
	batch := c.batch(msgs)
	for i, msg := range msgs {
		ev, why := c.decode(batch, i, msg)
		switch {
		case why != nil:
			s.rejects = append(s.rejects, reject{i, why, "invalid event sent to the dead-letter topic"})
		case mem.Seen(ev.EventID, msg.Offset):
			s.retried = append(s.retried, i)
		default:
			s.evs = append(s.evs, ev)
			s.from = append(s.from, i)
		}
	}
	return s
}

// batch prepares msgs for decoding: values larger than MaxEventBytes are
// left out.
func (c *Consumer) batch(msgs []kafka.Message) *event.Batch {
	values := make([][]byte, len(msgs))
	for i := range msgs {
		if len(msgs[i].Value) <= c.cfg.MaxEventBytes {
			values[i] = msgs[i].Value
		}
	}
	return event.NewBatch(values)
}

// reject is a message of a batch that goes to the dead-letter topic.
type reject struct {
	msg int
	why *event.InvalidError
	log string
}

// decode decodes msg, message i of batch.
func (c *Consumer) decode(batch *event.Batch, i int, msg kafka.Message) (*event.Event, *event.InvalidError) {
	if len(msg.Value) > c.cfg.MaxEventBytes {
		return nil, &event.InvalidError{Reason: event.ReasonOversized,
			Detail: fmt.Sprintf("value of %d bytes exceeds %d", len(msg.Value), c.cfg.MaxEventBytes)}
	}
	ev, err := batch.Decode(i, c.topicType(msg.Topic))
	if err != nil {
		var inv *event.InvalidError
		if errors.As(err, &inv) {
			return nil, inv
		}
		return nil, &event.InvalidError{Reason: event.ReasonMalformedJSON, Detail: "undecodable"}
	}
	ev.Source = event.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset, Time: msg.Time}
	return ev, nil
}

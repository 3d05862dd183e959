// Package consumer reads order and refund events from Kafka as a member of a
// consumer group and hands each one to a Handler, committing an offset only
// once everything before it has been handled: delivery is at least once.
//
// It uses kafka-go's ConsumerGroup/Generation API rather than a group Reader,
// because the Reader hides assignments (needed for /readyz) and, with
// ReadMessage, commits before the message is processed.
package consumer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/fraudwatch/fraudwatch/rules"
)

// Handler evaluates one valid event. It returns nil once the event's
// effects are done (counters updated, alerts handed off); an error is
// retried with backoff, and the offset is not committed past the event.
type Handler interface {
	Handle(ctx context.Context, ev *rules.Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, ev *rules.Event) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, ev *rules.Event) error { return f(ctx, ev) }

// Config configures a Consumer. Zero durations take the defaults.
type Config struct {
	Brokers         []string
	GroupID         string
	OrdersTopic     string
	RefundsTopic    string // may equal OrdersTopic: events then carry their type
	DeadLetterTopic string
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
	TLS      *tls.Config
	SASL     sasl.Mechanism
}

func (c *Config) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "fraudwatch"
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = 64 << 10
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = time.Second
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 3 * time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 30 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 5 * time.Second
	}
}

// Validate reports settings that cannot work.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	if c.GroupID == "" {
		errs = append(errs, errors.New("no group id"))
	}
	if c.OrdersTopic == "" || c.RefundsTopic == "" || c.DeadLetterTopic == "" {
		errs = append(errs, errors.New("orders, refunds and dead-letter topics are all required"))
	}
	if c.DeadLetterTopic == c.OrdersTopic || c.DeadLetterTopic == c.RefundsTopic {
		errs = append(errs, errors.New("the dead-letter topic must differ from the source topics"))
	}
	if c.MaxEventBytes < 1 {
		errs = append(errs, errors.New("max event bytes must be positive"))
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		errs = append(errs, errors.New("heartbeat interval must be shorter than the session timeout"))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, errors.New("retry backoff must satisfy 0 < min <= max"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	return nil
}

// Consumer is one member of the consumer group.
type Consumer struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
	m       metrics

	dialer    *kafka.Dialer
	transport *kafka.Transport
	client    *kafka.Client
	dlq       *kafka.Writer

	ready  atomic.Bool
	status atomic.Pointer[string] // why not ready, for /readyz

	closeOnce sync.Once
	closeErr  error
}

// New returns a consumer; Run starts it.
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
	dialer := &kafka.Dialer{
		ClientID:      cfg.ClientID,
		Timeout:       10 * time.Second,
		DualStack:     true,
		TLS:           cfg.TLS,
		SASLMechanism: cfg.SASL,
	}
	transport := &kafka.Transport{
		ClientID:    cfg.ClientID,
		DialTimeout: 10 * time.Second,
		TLS:         cfg.TLS,
		SASL:        cfg.SASL,
	}
	c := &Consumer{
		cfg:       cfg,
		handler:   h,
		log:       log,
		m:         m,
		dialer:    dialer,
		transport: transport,
		client:    &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: transport, Timeout: 10 * time.Second},
		dlq: &kafka.Writer{
			Addr:         kafka.TCP(cfg.Brokers...),
			Topic:        cfg.DeadLetterTopic,
			Balancer:     &kafka.Murmur2Balancer{},
			RequiredAcks: kafka.RequireAll,
			// Each dead letter is written on its own and waited for; a
			// batch timeout would only add latency.
			BatchSize: 1,
			Transport: transport,
			ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
				log.Warn("kafka dead-letter writer: "+fmt.Sprintf(msg, args...), "topic", cfg.DeadLetterTopic)
			}),
		},
	}
	return c, nil
}

// Ready reports whether the consumer is a member of the group with its
// partition assignment (possibly empty, when the group has more members
// than partitions).
func (c *Consumer) Ready() bool { return c.ready.Load() }

// Status says what the consumer is doing while it is not ready ("" when
// it is), for /readyz.
func (c *Consumer) Status() string {
	if c.ready.Load() {
		return ""
	}
	if s := c.status.Load(); s != nil {
		return *s
	}
	return "not started"
}

func (c *Consumer) setStatus(s string) { c.status.Store(&s) }

// Run joins the group and consumes until ctx is done. Then it stops
// fetching, lets in-flight events finish (up to DrainTimeout), commits, and
// leaves the group. It returns nil after a clean shutdown.
func (c *Consumer) Run(ctx context.Context) error {
	defer c.setStatus("stopped")
	if err := c.waitForTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // shut down while waiting: nothing was consumed
		}
		return err
	}
	c.setStatus("joining the consumer group")
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                c.cfg.GroupID,
		Brokers:           c.cfg.Brokers,
		Dialer:            c.dialer,
		Topics:            c.topics(),
		HeartbeatInterval: c.cfg.HeartbeatInterval,
		SessionTimeout:    c.cfg.SessionTimeout,
		RebalanceTimeout:  c.cfg.RebalanceTimeout,
		// Rejoin quickly after a failed join; the coordinator throttles.
		JoinGroupBackoff: time.Second,
		StartOffset:      c.startOffset(),
		Logger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.log.Debug("kafka group: "+fmt.Sprintf(msg, args...), "group", c.cfg.GroupID)
		}),
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.log.Warn("kafka group: "+fmt.Sprintf(msg, args...), "group", c.cfg.GroupID)
		}),
	})
	if err != nil {
		return fmt.Errorf("consumer: create group: %w", err)
	}

	// Work on an event is not cut short by shutdown or a rebalance; it gets
	// DrainTimeout after ctx is done, then it is aborted uncommitted.
	work, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	stopDrainTimer := context.AfterFunc(ctx, func() {
		time.AfterFunc(c.cfg.DrainTimeout, abort)
	})
	defer stopDrainTimer()

	closed := make(chan struct{})
	go func() {
		<-ctx.Done()
		// Ends the current generation: partition loops stop fetching,
		// finish their event and commit; then the member leaves the group.
		_ = group.Close()
		close(closed)
	}()

	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			c.setStatus("joining the consumer group failed; retrying")
			c.log.Warn("joining consumer group failed; retrying", "group", c.cfg.GroupID, "err", err)
			continue
		}
		c.runGeneration(work, gen)
	}
	<-closed
	c.ready.Store(false)
	if work.Err() != nil {
		return errors.New("consumer: drain timeout: in-flight events were aborted uncommitted")
	}
	return nil
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

func (c *Consumer) topics() []string {
	if c.cfg.OrdersTopic == c.cfg.RefundsTopic {
		return []string{c.cfg.OrdersTopic}
	}
	return []string{c.cfg.OrdersTopic, c.cfg.RefundsTopic}
}

func (c *Consumer) startOffset() int64 {
	if c.cfg.StartEarliest {
		return kafka.FirstOffset
	}
	return kafka.LastOffset
}

// topicType is the event type a topic implies ("" for a shared topic).
func (c *Consumer) topicType(topic string) rules.Type {
	switch {
	case c.cfg.OrdersTopic == c.cfg.RefundsTopic:
		return ""
	case topic == c.cfg.OrdersTopic:
		return rules.Order
	default:
		return rules.Refund
	}
}

// runGeneration starts one loop per assigned partition and a committer.
// It returns at once; the generation ends when kafka-go closes its context
// (a rebalance, or the group closing) and all loops have returned.
func (c *Consumer) runGeneration(work context.Context, gen *kafka.Generation) {
	offsets := newOffsets()
	var loops sync.WaitGroup
	n := 0
	for topic, parts := range gen.Assignments {
		for _, p := range parts {
			n++
			loops.Add(1)
			gen.Start(func(ctx context.Context) {
				defer loops.Done()
				c.consumePartition(ctx, work, gen, topic, p, offsets)
			})
		}
	}
	c.ready.Store(true)
	c.log.Info("joined consumer group", "group", c.cfg.GroupID, "generation", gen.ID, "partitions", n)
	gen.Start(func(ctx context.Context) {
		t := time.NewTicker(c.cfg.CommitInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.commit(gen, offsets)
			case <-ctx.Done():
				c.setStatus("rebalancing")
				c.ready.Store(false)
				// The generation's connection stays open until every
				// function started on it has returned, so this last commit
				// still reaches the coordinator.
				loops.Wait()
				c.commit(gen, offsets)
				c.log.Info("left consumer group generation", "group", c.cfg.GroupID, "generation", gen.ID)
				return
			}
		}
	})
}

func (c *Consumer) commit(gen *kafka.Generation, o *offsets) {
	pending := o.pending()
	if len(pending) == 0 {
		return
	}
	if err := gen.CommitOffsets(pending); err != nil {
		// Not fatal: the offsets stay pending for the next commit, and if
		// the partitions moved on, their new owner re-processes (at least
		// once).
		c.log.Warn("commit failed", "group", c.cfg.GroupID, "generation", gen.ID, "err", err)
		return
	}
	o.committed(pending)
}

// consumePartition fetches and handles one partition's events in order
// until the generation ends.
func (c *Consumer) consumePartition(ctx, work context.Context, gen *kafka.Generation, topic string, p kafka.PartitionAssignment, o *offsets) {
	log := c.log.With("topic", topic, "partition", p.ID)
	lag := c.m.lag.WithLabelValues(topic, strconv.Itoa(p.ID))
	defer c.m.lag.DeleteLabelValues(topic, strconv.Itoa(p.ID))

	start := p.Offset
	if start < 0 {
		// A new group: resolve earliest/latest to an offset now and commit
		// it, so that events arriving before this group's first commit are
		// not skipped if the partition moves to another member meanwhile.
		abs, err := c.resolveOffset(ctx, topic, p.ID, start)
		if err != nil {
			log.Warn("resolving start offset failed; rejoining", "err", err)
			return
		}
		start = abs
		o.mark(topic, p.ID, abs)
		c.commit(gen, o)
	}

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        c.cfg.Brokers,
		Topic:          topic,
		Partition:      p.ID,
		Dialer:         c.dialer,
		MinBytes:       1,
		MaxBytes:       max(4<<20, 2*c.cfg.MaxEventBytes),
		MaxWait:        500 * time.Millisecond,
		ReadBackoffMin: 100 * time.Millisecond,
		ReadBackoffMax: time.Second,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			log.Warn("kafka reader: " + fmt.Sprintf(msg, args...))
		}),
	})
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		log.Error("setting the reader offset failed", "offset", start, "err", err)
		return
	}
	log.Debug("consuming partition", "offset", start)
	for {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("fetch failed; rejoining", "err", err)
			}
			return
		}
		if !c.process(ctx, work, msg) {
			return // aborted: not committed, redelivered later
		}
		o.mark(topic, p.ID, msg.Offset+1)
		lag.Set(float64(max(0, msg.HighWaterMark-msg.Offset-1)))
	}
}

// process handles one message until it succeeds. It gives up, returning
// false, when work is aborted or when an attempt failed and the generation
// has ended (the partition's next owner will retry it).
func (c *Consumer) process(gen, work context.Context, msg kafka.Message) bool {
	start := time.Now()
	defer func() { c.m.processing.Observe(time.Since(start).Seconds()) }()
	log := c.log.With("topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)

	ev, invalid := c.decode(msg)
	backoff := c.cfg.RetryMin
	for {
		var err error
		if invalid != nil {
			err = c.deadLetter(work, msg, invalid)
		} else {
			err = c.handler.Handle(work, ev)
		}
		if err == nil {
			if invalid != nil {
				c.m.invalid.WithLabelValues(invalid.Reason).Inc()
				log.Warn("invalid event sent to the dead-letter topic", "reason", invalid.Reason, "err", invalid.Error())
			} else {
				c.m.consumed.WithLabelValues(string(ev.Type)).Inc()
			}
			return true
		}
		if work.Err() != nil || gen.Err() != nil {
			log.Warn("event abandoned uncommitted", "err", err)
			return false
		}
		log.Warn("processing failed; retrying", "retry_in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-work.Done():
		case <-gen.Done():
		}
		backoff = min(2*backoff, c.cfg.RetryMax)
	}
}

func (c *Consumer) decode(msg kafka.Message) (*rules.Event, *rules.InvalidError) {
	if len(msg.Value) > c.cfg.MaxEventBytes {
		return nil, &rules.InvalidError{Reason: rules.ReasonOversized,
			Detail: fmt.Sprintf("value of %d bytes exceeds %d", len(msg.Value), c.cfg.MaxEventBytes)}
	}
	ev, err := rules.DecodeEvent(msg.Value, c.topicType(msg.Topic))
	if err != nil {
		var inv *rules.InvalidError
		if errors.As(err, &inv) {
			return nil, inv
		}
		return nil, &rules.InvalidError{Reason: rules.ReasonMalformedJSON, Detail: "undecodable"}
	}
	ev.Source = rules.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
	return ev, nil
}

// Dead-letter headers (SPEC §3).
const (
	HeaderError           = "fraudwatch-error"
	HeaderSourceTopic     = "fraudwatch-source-topic"
	HeaderSourcePartition = "fraudwatch-source-partition"
	HeaderSourceOffset    = "fraudwatch-source-offset"
)

// deadLetter writes the original key, value and headers to the dead-letter
// topic, adding why and where from.
func (c *Consumer) deadLetter(ctx context.Context, msg kafka.Message, why *rules.InvalidError) error {
	headers := make([]kafka.Header, 0, len(msg.Headers)+4)
	headers = append(headers, msg.Headers...)
	headers = append(headers,
		kafka.Header{Key: HeaderError, Value: []byte(why.Error())},
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	)
	err := c.dlq.WriteMessages(ctx, kafka.Message{Key: msg.Key, Value: msg.Value, Headers: headers})
	if err != nil {
		return fmt.Errorf("consumer: write dead letter: %w", err)
	}
	return nil
}

// waitForTopics returns once the source and dead-letter topics exist,
// checking with backoff meanwhile. fraudwatch never creates topics (its
// metadata requests do not ask for auto-creation): a typo in a topic name
// must surface, not quietly create an empty topic that nobody writes to.
func (c *Consumer) waitForTopics(ctx context.Context) error {
	topics := append(c.topics(), c.cfg.DeadLetterTopic)
	backoff := 500 * time.Millisecond
	var logged time.Time
	for {
		md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		var missing []string
		if err == nil {
			for _, t := range md.Topics {
				if t.Error != nil || len(t.Partitions) == 0 {
					missing = append(missing, t.Name)
				}
			}
			if len(missing) == 0 {
				return nil
			}
		}
		status := "kafka brokers not answering"
		if err == nil {
			status = "waiting for missing topics: " + strings.Join(missing, ", ")
		}
		c.setStatus(status)
		if time.Since(logged) >= time.Minute { // not every few seconds for ever
			logged = time.Now()
			if err != nil {
				c.log.Error("kafka metadata request failed; retrying", "err", err)
			} else {
				c.log.Error("topics missing: create them (fraudwatch does not); waiting", "topics", strings.Join(missing, ","))
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// resolveOffset turns kafka.FirstOffset/LastOffset into an absolute offset.
func (c *Consumer) resolveOffset(ctx context.Context, topic string, partition int, rel int64) (int64, error) {
	req := kafka.LastOffsetOf(partition)
	if rel == kafka.FirstOffset {
		req = kafka.FirstOffsetOf(partition)
	}
	resp, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{topic: {req}},
	})
	if err != nil {
		return 0, fmt.Errorf("consumer: list offsets: %w", err)
	}
	for _, po := range resp.Topics[topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return 0, fmt.Errorf("consumer: list offsets: %w", po.Error)
		}
		if rel == kafka.FirstOffset {
			return po.FirstOffset, nil
		}
		return po.LastOffset, nil
	}
	return 0, fmt.Errorf("consumer: list offsets: no answer for %s/%d", topic, partition)
}

// offsets tracks, per partition, the next offset to commit.
type offsets struct {
	mu   sync.Mutex
	next map[string]map[int]int64
	done map[string]map[int]int64
}

func newOffsets() *offsets {
	return &offsets{next: map[string]map[int]int64{}, done: map[string]map[int]int64{}}
}

func (o *offsets) mark(topic string, partition int, next int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.next[topic] == nil {
		o.next[topic] = map[int]int64{}
	}
	o.next[topic][partition] = next
}

// pending returns the offsets not yet committed.
func (o *offsets) pending() map[string]map[int]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out map[string]map[int]int64
	for topic, parts := range o.next {
		for p, off := range parts {
			if d, ok := o.done[topic][p]; ok && d == off {
				continue
			}
			if out == nil {
				out = map[string]map[int]int64{}
			}
			if out[topic] == nil {
				out[topic] = map[int]int64{}
			}
			out[topic][p] = off
		}
	}
	return out
}

func (o *offsets) committed(c map[string]map[int]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, parts := range c {
		if o.done[topic] == nil {
			o.done[topic] = map[int]int64{}
		}
		for p, off := range parts {
			o.done[topic][p] = off
		}
	}
}

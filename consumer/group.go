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
)

// MessageHandler processes one message. It returns nil once the message's
// effects are done; an error is retried with backoff, and the offset is not
// committed past the message meanwhile.
type MessageHandler interface {
	HandleMessage(ctx context.Context, msg kafka.Message) error
}

// MessageHandlerFunc adapts a function to MessageHandler.
type MessageHandlerFunc func(ctx context.Context, msg kafka.Message) error

// HandleMessage calls f.
func (f MessageHandlerFunc) HandleMessage(ctx context.Context, msg kafka.Message) error {
	return f(ctx, msg)
}

// GroupConfig configures a Group. Zero durations take the defaults.
type GroupConfig struct {
	Brokers []string
	GroupID string
	// Topics are consumed; RequiredTopics are only waited for at start
	// (topics the handler writes to).
	Topics         []string
	RequiredTopics []string
	// StartEarliest makes a new group (no committed offset) start at the
	// oldest retained message instead of the newest.
	StartEarliest bool
	ClientID      string
	// MaxMessageBytes sizes fetches (default 4 MiB).
	MaxMessageBytes   int
	CommitInterval    time.Duration
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// DrainTimeout bounds how long in-flight messages may take to finish
	// once Run's context is done.
	DrainTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between attempts at a
	// message whose handling failed.
	RetryMin time.Duration
	RetryMax time.Duration
	// LagInterval is how often the lag gauge is refreshed from the held
	// partitions' high-water marks (default 5s), besides after each
	// message.
	LagInterval time.Duration
	TLS         *tls.Config
	SASL        sasl.Mechanism
}

func (c *GroupConfig) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "fraudwatch"
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 4 << 20
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
	if c.LagInterval == 0 {
		c.LagInterval = 5 * time.Second
	}
}

// Validate reports settings that cannot work.
func (c *GroupConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	if c.GroupID == "" {
		errs = append(errs, errors.New("no group id"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("no topics"))
	}
	if c.MaxMessageBytes < 1 {
		errs = append(errs, errors.New("max message bytes must be positive"))
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		errs = append(errs, errors.New("heartbeat interval must be shorter than the session timeout"))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, errors.New("retry backoff must satisfy 0 < min <= max"))
	}
	if c.LagInterval < 0 {
		errs = append(errs, errors.New("lag interval must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	return nil
}

// Group is one member of a consumer group. It reads each assigned
// partition in order, hands every message to its MessageHandler, and
// commits an offset only once the message and all before it are handled:
// delivery is at least once.
//
// It uses kafka-go's ConsumerGroup/Generation API rather than a group
// Reader, because the Reader hides assignments (needed for readiness) and,
// with ReadMessage, commits before the message is processed.
type Group struct {
	cfg     GroupConfig
	handler MessageHandler
	log     *slog.Logger
	lag     *prometheus.GaugeVec

	dialer *kafka.Dialer
	client *kafka.Client

	ready  atomic.Bool
	status atomic.Pointer[string] // why not ready, for /readyz
}

// NewGroup returns a group member; Run starts it.
func NewGroup(cfg GroupConfig, h MessageHandler, log *slog.Logger, reg prometheus.Registerer) (*Group, error) {
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
	lag, err := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fraudwatch_consumer_lag",
		Help: "Messages behind the partition's high-water mark, for partitions this member holds.",
	}, []string{"topic", "partition"}))
	if err != nil {
		return nil, err
	}
	return &Group{
		cfg:     cfg,
		handler: h,
		log:     log,
		lag:     lag,
		dialer: &kafka.Dialer{
			ClientID:      cfg.ClientID,
			Timeout:       10 * time.Second,
			DualStack:     true,
			TLS:           cfg.TLS,
			SASLMechanism: cfg.SASL,
		},
		client: &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: transport(cfg.ClientID, cfg.TLS, cfg.SASL), Timeout: 10 * time.Second},
	}, nil
}

// transport returns a kafka-go transport with the given security settings.
func transport(clientID string, tc *tls.Config, mech sasl.Mechanism) *kafka.Transport {
	return &kafka.Transport{ClientID: clientID, DialTimeout: 10 * time.Second, TLS: tc, SASL: mech}
}

// register registers c, or returns the collector already registered under
// its name: several groups in one process share one lag gauge.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("consumer: register metrics: %w", err)
	}
	return c, nil
}

// Ready reports whether the member is in the group with its partition
// assignment (possibly empty, when the group has more members than
// partitions).
func (c *Group) Ready() bool { return c.ready.Load() }

// Status says what the member is doing while it is not ready ("" when it
// is), for /readyz.
func (c *Group) Status() string {
	if c.ready.Load() {
		return ""
	}
	if s := c.status.Load(); s != nil {
		return *s
	}
	return "not started"
}

func (c *Group) setStatus(s string) { c.status.Store(&s) }

// Run joins the group and consumes until ctx is done. Then it stops
// fetching, lets in-flight messages finish (up to DrainTimeout), commits, and
// leaves the group. It returns nil after a clean shutdown.
func (c *Group) Run(ctx context.Context) error {
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
		Topics:            c.cfg.Topics,
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

	// Work on a message is not cut short by shutdown or a rebalance; it gets
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

	rs := &runState{stopping: ctx}
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
		c.runGeneration(work, rs, gen)
	}
	<-closed
	c.ready.Store(false)
	// The drain timer may fire with nothing in flight (group.Close waiting
	// on a JoinGroup, say): only messages actually given up make this an
	// unclean shutdown.
	if n := rs.aborted.Load(); n > 0 {
		return fmt.Errorf("consumer: drain timeout: %d in-flight messages were aborted uncommitted", n)
	}
	return nil
}

// runState is shared by the generations of one Run.
type runState struct {
	// stopping is Run's context: done once shutdown has begun.
	stopping context.Context
	// aborted counts messages given up during shutdown because their work
	// was cancelled.
	aborted atomic.Int64
}

func (c *Group) startOffset() int64 {
	if c.cfg.StartEarliest {
		return kafka.FirstOffset
	}
	return kafka.LastOffset
}

// runGeneration starts one loop per assigned partition, a lag refresher
// and a committer.
// It returns at once; the generation ends when kafka-go closes its context
// (a rebalance, or the group closing) and all loops have returned.
func (c *Group) runGeneration(work context.Context, rs *runState, gen *kafka.Generation) {
	offsets := newOffsets()
	held := newHeld(c.lag)
	// In-flight work outlives the generation's end by at most half the
	// rebalance timeout: the member must rejoin within it, or the group
	// moves on without it while it still works on partitions that are no
	// longer its own. Work cut short is not committed and is redelivered.
	work, cutShort := context.WithCancel(work)
	var loops sync.WaitGroup
	n := 0
	for topic, parts := range gen.Assignments {
		for _, p := range parts {
			n++
			loops.Add(1)
			gen.Start(func(ctx context.Context) {
				defer loops.Done()
				c.consumePartition(ctx, work, rs, gen, topic, p, offsets, held)
			})
		}
	}
	c.ready.Store(true)
	c.log.Info("joined consumer group", "group", c.cfg.GroupID, "generation", gen.ID, "partitions", n)
	// Lag is refreshed from the high-water marks on a timer too, not only
	// after a message succeeds: while a message is retried (Redis down) the
	// gauge must keep growing with new events, and a partition whose first
	// message is still pending must have a series. It runs apart from the
	// committer so that a slow broker answer never delays a commit.
	gen.Start(func(ctx context.Context) {
		t := time.NewTicker(c.cfg.LagInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.refreshLag(ctx, held)
			case <-ctx.Done():
				return
			}
		}
	})
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
				grace := time.AfterFunc(c.cfg.RebalanceTimeout/2, cutShort)
				// The generation's connection stays open until every
				// function started on it has returned, so this last commit
				// still reaches the coordinator.
				loops.Wait()
				grace.Stop()
				cutShort()
				c.commit(gen, offsets)
				c.log.Info("left consumer group generation", "group", c.cfg.GroupID, "generation", gen.ID)
				return
			}
		}
	})
}

func (c *Group) commit(gen *kafka.Generation, o *offsets) {
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
func (c *Group) consumePartition(ctx, work context.Context, rs *runState, gen *kafka.Generation, topic string, p kafka.PartitionAssignment, o *offsets, h *held) {
	log := c.log.With("topic", topic, "partition", p.ID)
	defer h.release(topic, p.ID)

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
		MaxBytes:       c.cfg.MaxMessageBytes,
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
	h.assign(topic, p.ID, start)
	log.Debug("consuming partition", "offset", start)
	for {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("fetch failed; rejoining", "err", err)
			}
			return
		}
		switch c.process(ctx, work, msg) {
		case aborted:
			// A rebalance cutting work short while running is routine (the
			// next owner redelivers); during shutdown it makes Run fail.
			if rs.stopping.Err() != nil {
				rs.aborted.Add(1)
			}
			return // not committed, redelivered later
		case givenUp:
			return // not committed, redelivered later
		}
		o.mark(topic, p.ID, msg.Offset+1)
		h.advance(topic, p.ID, msg.Offset+1, msg.HighWaterMark)
	}
}

// outcome is how process left a message.
type outcome int

const (
	succeeded outcome = iota
	// givenUp: an attempt failed and the generation has ended; the
	// partition's next owner retries the message.
	givenUp
	// aborted: the work context was cancelled (drain timeout, or work cut
	// short after a rebalance) and the last attempt failed.
	aborted
)

// process handles one message until it succeeds, or gives up on it
// uncommitted when work is aborted or when an attempt failed and the
// generation has ended.
func (c *Group) process(gen, work context.Context, msg kafka.Message) outcome {
	backoff := c.cfg.RetryMin
	for {
		err := c.handler.HandleMessage(work, msg)
		if err == nil {
			return succeeded
		}
		log := c.log.With("topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
		if work.Err() != nil {
			log.Warn("message aborted uncommitted", "err", err)
			return aborted
		}
		if gen.Err() != nil {
			log.Warn("message abandoned uncommitted", "err", err)
			return givenUp
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

// waitForTopics returns once the consumed and required topics exist,
// checking with backoff meanwhile. fraudwatch never creates topics (its
// metadata requests do not ask for auto-creation): a typo in a topic name
// must surface, not quietly create an empty topic that nobody writes to.
func (c *Group) waitForTopics(ctx context.Context) error {
	topics := append(append([]string(nil), c.cfg.Topics...), c.cfg.RequiredTopics...)
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
func (c *Group) resolveOffset(ctx context.Context, topic string, partition int, rel int64) (int64, error) {
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

// refreshLag sets the lag of every held partition from its high-water
// mark, asked for all of them in one ListOffsets request.
func (c *Group) refreshLag(ctx context.Context, h *held) {
	req := h.request()
	if req == nil {
		return
	}
	resp, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		// The fetches fail too and say so; the next tick tries again.
		if ctx.Err() == nil {
			c.log.Debug("listing high-water marks for lag failed", "group", c.cfg.GroupID, "err", err)
		}
		return
	}
	h.refresh(resp)
}

type topicPartition struct {
	topic     string
	partition int
}

// held tracks, per partition a generation's loops hold, the next offset
// to process, and owns those partitions' lag series. One mutex covers the
// positions and the gauge, so that a refresh racing a loop's exit cannot
// bring back the series of a partition no longer held.
type held struct {
	mu   sync.Mutex
	lag  *prometheus.GaugeVec
	next map[topicPartition]int64
}

func newHeld(lag *prometheus.GaugeVec) *held {
	return &held{lag: lag, next: map[topicPartition]int64{}}
}

// assign starts tracking a partition at its start offset, before its first
// message.
func (h *held) assign(topic string, partition int, next int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next[topicPartition{topic, partition}] = next
}

// advance records a handled message and the high-water mark its fetch saw.
func (h *held) advance(topic string, partition int, next, highWaterMark int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := topicPartition{topic, partition}
	if _, ok := h.next[k]; !ok {
		return
	}
	h.next[k] = next
	h.lag.WithLabelValues(topic, strconv.Itoa(partition)).Set(float64(max(0, highWaterMark-next)))
}

// release stops tracking a partition and deletes its lag series.
func (h *held) release(topic string, partition int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.next, topicPartition{topic, partition})
	h.lag.DeleteLabelValues(topic, strconv.Itoa(partition))
}

// request asks for the high-water mark of every held partition (nil when
// none is held).
func (h *held) request() map[string][]kafka.OffsetRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.next) == 0 {
		return nil
	}
	req := map[string][]kafka.OffsetRequest{}
	for k := range h.next {
		req[k.topic] = append(req[k.topic], kafka.LastOffsetOf(k.partition))
	}
	return req
}

// refresh sets the lag of the partitions still held from resp.
func (h *held) refresh(resp *kafka.ListOffsetsResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for topic, parts := range resp.Topics {
		for _, po := range parts {
			next, ok := h.next[topicPartition{topic, po.Partition}]
			if !ok || po.Error != nil || po.LastOffset < 0 {
				continue
			}
			h.lag.WithLabelValues(topic, strconv.Itoa(po.Partition)).Set(float64(max(0, po.LastOffset-next)))
		}
	}
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

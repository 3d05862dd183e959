package consumer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// MessageHandler processes a batch of messages from one partition, in
// order. It returns how many of them, from the first, have their effects
// done, and nil when that is all of them; with an error, the rest are
// handed over again (with backoff), and no offset past them is committed
// meanwhile.
type MessageHandler interface {
	HandleMessages(ctx context.Context, msgs []kafka.Message) (done int, err error)
}

// A handler that also has HandleMessagesIn is handed, beside the work
// context, one that ends with the generation (a rebalance, or shutdown):
// the partition is then going to another member, or nowhere, and waiting
// on its behalf (for a receiver's Retry-After, say) is pointless. A
// handler that stops waiting and fails then leaves the rest uncommitted
// for the next owner, as a rebalance does, and a shutdown stays clean.
// (The dispatcher no longer waits on a partition: alerts past their
// budget wait in Redis.)
type generationHandler interface {
	HandleMessagesIn(work, generation context.Context, msgs []kafka.Message) (done int, err error)
}

// MessageHandlerFunc adapts a function to MessageHandler.
type MessageHandlerFunc func(ctx context.Context, msgs []kafka.Message) (int, error)

// HandleMessages calls f.
func (f MessageHandlerFunc) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	return f(ctx, msgs)
}

// GroupConfig configures a Group. Its settings (brokers to rebalance
// timeout) come checked from package config, which is their one home: they
// have no defaults here, and Validate only notices one left unset. The
// knobs below them are this package's own, and zero takes their default.
type GroupConfig struct {
	Brokers  []string
	GroupID  string
	ClientID string
	TLS      *tls.Config
	SASL     sasl.Mechanism
	// Topics are consumed; RequiredTopics are only waited for at start
	// (topics the handler writes to).
	Topics         []string
	RequiredTopics []string
	// StartEarliest makes a new group (no committed offset) start at the
	// oldest retained message instead of the newest.
	StartEarliest     bool
	CommitInterval    time.Duration
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration

	// MaxMessageBytes is the largest message the group must read (default
	// 4 MiB). FetchMaxBytes is what one fetch of a partition asks for
	// (default 128 KiB, about a batch of 500 events): a record batch
	// larger than it still comes whole (fetch v3 and later), so it bounds
	// memory, not messages. Each partition holds up to two fetches' worth
	// (one handed over, one in flight): fetches of 4 MiB, three a
	// partition, held 512 MiB in a backlog of 16 partitions
	// (docs/performance.md). FetchMaxWait is how long the broker may hold a
	// fetch while a partition has nothing new (default 500ms, Kafka's own
	// default): an answer comes as soon as a record does, and the wait
	// costs nothing at a rebalance or shutdown, which abandon the fetch.
	MaxMessageBytes int
	FetchMaxBytes   int
	FetchMaxWait    time.Duration
	// BatchSize bounds the messages of a partition handed over at once
	// (default 500); BatchLinger is how long a batch waits for more once it
	// has one (default 2ms), so that low traffic is not held back.
	BatchSize   int
	BatchLinger time.Duration
	// DrainTimeout bounds how long in-flight messages may take to finish
	// once Run's context is done (default 10s).
	DrainTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between attempts at a
	// message whose handling failed (default 100ms to 5s).
	RetryMin time.Duration
	RetryMax time.Duration
	// JoinWarnAfter is how long joins of the group may fail before it is
	// a WARN (default 30s): until then each failure is INFO, since a
	// coordinator loading or moving refuses joins for a moment.
	JoinWarnAfter time.Duration
	// LagInterval is how often the lag gauge is refreshed from the held
	// partitions' high-water marks (default 5s), besides after each
	// message.
	LagInterval time.Duration
}

func (c *GroupConfig) setDefaults() {
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 4 << 20
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = 128 << 10
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = 500 * time.Millisecond
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.BatchLinger == 0 {
		c.BatchLinger = 2 * time.Millisecond
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
	if c.JoinWarnAfter == 0 {
		c.JoinWarnAfter = 30 * time.Second
	}
}

// Validate reports settings left unset and knobs that cannot work.
func (c *GroupConfig) Validate() error {
	var errs []error
	for _, s := range []struct {
		name  string
		unset bool
	}{
		{"Brokers", len(c.Brokers) == 0},
		{"GroupID", c.GroupID == ""},
		{"Topics", len(c.Topics) == 0},
		{"CommitInterval", c.CommitInterval <= 0},
		{"SessionTimeout", c.SessionTimeout <= 0},
		{"HeartbeatInterval", c.HeartbeatInterval <= 0},
		{"RebalanceTimeout", c.RebalanceTimeout <= 0},
	} {
		if s.unset {
			errs = append(errs, fmt.Errorf("%s is not set", s.name))
		}
	}
	if c.MaxMessageBytes < 1 || c.FetchMaxBytes < 1 || c.BatchSize < 1 || c.BatchLinger < 0 || c.FetchMaxWait < time.Millisecond {
		errs = append(errs, errors.New("max message bytes, fetch max bytes, batch size and fetch max wait (at least 1ms) must be positive, batch linger not negative"))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, errors.New("retry backoff must satisfy 0 < min <= max"))
	}
	if c.DrainTimeout < 0 || c.LagInterval < 0 {
		errs = append(errs, errors.New("drain timeout and lag interval must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	return nil
}

// Group is one member of a consumer group. It reads each assigned
// partition in order, hands its messages to its MessageHandler in batches,
// and
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
	stalled *stalls
	commits prometheus.Histogram
	// stages, when the handler times them (the events Consumer), takes
	// each handed message's stages up to its hand-over.
	stages *stageHistogram

	dialer *kafka.Dialer
	client *kafka.Client
	// transport carries the partition readers' fetches; its metadata
	// (partition leaders) covers the group's topics only.
	transport *kafka.Transport
	fetch     *fetchMetrics

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
	if reg != nil {
		// Several groups read one topic (an alerts group per receiver):
		// their partitions' series must not overwrite each other.
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"group": cfg.GroupID}, reg)
	}
	lag, err := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fraudwatch_consumer_lag",
		Help: "Messages behind the partition's high-water mark, for partitions this member holds.",
	}, []string{"topic", "partition"}))
	if err != nil {
		return nil, err
	}
	stalled, err := register(reg, newStalls())
	if err != nil {
		return nil, err
	}
	fetch, err := newFetchMetrics(reg, cfg.Topics)
	if err != nil {
		return nil, err
	}
	commits, err := register(reg, newCommitHistogram())
	if err != nil {
		return nil, err
	}
	transport := cfg.Transport()
	transport.MetadataTopics = cfg.Topics
	// A moved partition leader is found within this (kafka-go's default
	// is 6 s); meanwhile fetches fail and are retried.
	transport.MetadataTTL = 3 * time.Second
	return &Group{
		cfg:     cfg,
		handler: h,
		log:     log,
		lag:     lag,
		stalled: stalled,
		commits: commits,
		stages:  stagesOf(h),
		dialer: &kafka.Dialer{
			ClientID:      cfg.ClientID,
			Timeout:       10 * time.Second,
			DualStack:     true,
			TLS:           cfg.TLS,
			SASLMechanism: cfg.SASL,
		},
		client:    &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: cfg.Transport(), Timeout: 10 * time.Second},
		transport: transport,
		fetch:     fetch,
	}, nil
}

// Transport is a kafka-go transport to the group's cluster, with its client
// id and security settings, for other clients of the same cluster (the
// dead-letter and alerts writers).
func (c *GroupConfig) Transport() *kafka.Transport {
	return &kafka.Transport{ClientID: c.ClientID, DialTimeout: 10 * time.Second, TLS: c.TLS, SASL: c.SASL}
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
	defer c.transport.CloseIdleConnections()
	if err := c.waitForTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // shut down while waiting: nothing was consumed
		}
		return err
	}
	c.setStatus("joining the consumer group")
	group, err := kafka.NewConsumerGroup(c.groupConfig())
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
	joins := joinFailures{warnAfter: c.cfg.JoinWarnAfter}
	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			c.setStatus("joining the consumer group failed; retrying")
			now := time.Now()
			level := joins.failed(now)
			c.log.Log(ctx, level, "joining consumer group failed; retrying", "group", c.cfg.GroupID,
				"failures", joins.n, "failing_for", now.Sub(joins.since).Round(time.Second), "err", err)
			continue
		}
		if n, lasted, warned := joins.joined(time.Now()); warned {
			c.log.Info("consumer group joined again", "group", c.cfg.GroupID, "failures", n, "failed_for", lasted.Round(time.Second))
		}
		c.startGeneration(work, rs, gen)
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

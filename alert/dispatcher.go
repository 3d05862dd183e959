package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("alert: dispatcher closed")

// DispatcherConfig tunes delivery. Zero values take the defaults.
type DispatcherConfig struct {
	// QueueSize bounds the alerts waiting for delivery. A full queue makes
	// Publish wait, which holds back the consumer instead of dropping.
	QueueSize int
	// MaxAttempts bounds the deliveries of one alert, 429s included.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential wait between failed
	// attempts that carry no Retry-After.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxRetryAfter caps a server's Retry-After.
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds one delivery attempt.
	AttemptTimeout time.Duration
}

func (c *DispatcherConfig) setDefaults() {
	if c.QueueSize == 0 {
		c.QueueSize = 1024
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 10
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = 5 * time.Minute
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 15 * time.Second
	}
}

// Validate reports settings that cannot work.
func (c *DispatcherConfig) Validate() error {
	switch {
	case c.QueueSize < 1:
		return errors.New("alert: queue size must be at least 1")
	case c.MaxAttempts < 1:
		return errors.New("alert: max attempts must be at least 1")
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return errors.New("alert: backoff must satisfy 0 < min <= max")
	case c.MaxRetryAfter <= 0 || c.AttemptTimeout <= 0:
		return errors.New("alert: max retry-after and attempt timeout must be positive")
	}
	return nil
}

// cooldownStore is the part of a Redis client the dispatcher needs.
type cooldownStore interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// Dispatcher delivers alerts one at a time, in the order they were
// published, after taking each (rule, group)'s cooldown.
type Dispatcher struct {
	cfg      DispatcherConfig
	notifier Notifier
	store    cooldownStore
	log      *slog.Logger
	m        dispatcherMetrics

	mu     sync.RWMutex // guards closed against Publish
	closed bool
	queue  chan Alert
	// closing is closed when Close starts, to release Publish calls
	// waiting on a full queue: they hold mu.RLock, which Close needs.
	closing chan struct{}

	stop      context.CancelFunc // aborts deliveries when Close runs out of time
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
	abandoned atomic.Int64 // deliveries cut short by Close's deadline
}

type dispatcherMetrics struct {
	sent       *prometheus.CounterVec
	suppressed *prometheus.CounterVec
	failures   *prometheus.CounterVec
}

// NewDispatcher starts a dispatcher that delivers through n and takes
// cooldowns in store.
func NewDispatcher(cfg DispatcherConfig, n Notifier, store cooldownStore, log *slog.Logger, reg prometheus.Registerer) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n == nil || store == nil {
		return nil, errors.New("alert: dispatcher needs a notifier and a cooldown store")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := dispatcherMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_sent_total",
			Help: "Alerts delivered to the notifier (Slack, or the log).",
		}, []string{"rule"}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alerts_suppressed_total",
			Help: "Crossings not notified: the cooldown was held, or the rule is in shadow mode.",
		}, []string{"rule", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_failures_total",
			Help: "Alerts given up on after every delivery attempt failed.",
		}, []string{"rule"}),
	}
	queue := make(chan Alert, cfg.QueueSize)
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fraudwatch_alert_queue_length",
		Help: "Alerts waiting for delivery.",
	}, func() float64 { return float64(len(queue)) })
	if reg != nil {
		for _, c := range []prometheus.Collector{m.sent, m.suppressed, m.failures, queued} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("alert: register metrics: %w", err)
			}
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	d := &Dispatcher{
		cfg:      cfg,
		notifier: n,
		store:    store,
		log:      log,
		m:        m,
		queue:    queue,
		closing:  make(chan struct{}),
		stop:     stop,
		done:     make(chan struct{}),
	}
	go d.run(ctx)
	return d, nil
}

// Publish hands an alert over for delivery. It returns once the alert is
// queued (or, for a shadow rule, counted and logged): delivery happens in
// the background. It waits while the queue is full.
func (d *Dispatcher) Publish(ctx context.Context, a Alert) error {
	if a.Shadow() {
		d.m.suppressed.WithLabelValues(a.Rule, "shadow").Inc()
		d.log.Info("shadow rule crossed its threshold; not notifying",
			"rule", a.Rule, "current", a.Current, "threshold", a.Threshold, "event_id", a.EventID)
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	select {
	case d.queue <- a:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("alert: publish %s: %w", a.Rule, ctx.Err())
	case <-d.closing:
		return ErrClosed
	}
}

// Close stops taking alerts and delivers those already queued. When ctx
// ends first, the rest are abandoned: each is logged and counted as a
// failure. Close is idempotent; later calls return the first result.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.closeOnce.Do(func() {
		close(d.closing)
		d.mu.Lock()
		d.closed = true
		close(d.queue)
		d.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			d.stop()
			<-d.done
			if n := d.abandoned.Load(); n > 0 {
				d.closeErr = fmt.Errorf("alert: close: %d alerts abandoned undelivered: %w", n, ctx.Err())
			}
		}
		d.stop()
	})
	return d.closeErr
}

func (d *Dispatcher) run(ctx context.Context) {
	defer close(d.done)
	for a := range d.queue {
		d.deliver(ctx, a)
	}
}

// deliver takes the cooldown and notifies, retrying both within the
// attempt budget.
func (d *Dispatcher) deliver(ctx context.Context, a Alert) {
	log := d.log.With("rule", a.Rule, "event_id", a.EventID)
	backoff := d.cfg.MinBackoff
	cooldownHeld := false
	var err error
	for attempt := 1; attempt <= d.cfg.MaxAttempts; attempt++ {
		if ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		if !cooldownHeld {
			var took bool
			took, err = d.takeCooldown(ctx, a)
			if err == nil && !took {
				d.m.suppressed.WithLabelValues(a.Rule, "cooldown").Inc()
				log.Info("alert suppressed: cooldown held")
				return
			}
			cooldownHeld = err == nil
		}
		if cooldownHeld {
			actx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
			err = d.notifier.Notify(actx, a)
			cancel()
			if err == nil {
				d.m.sent.WithLabelValues(a.Rule).Inc()
				log.Info("alert sent", "attempt", attempt)
				return
			}
		}
		retry, wait := retryPolicy(err)
		if !retry || attempt == d.cfg.MaxAttempts {
			break
		}
		if wait > 0 {
			wait = min(wait, d.cfg.MaxRetryAfter)
		} else {
			wait = backoff
			backoff = min(2*backoff, d.cfg.MaxBackoff)
		}
		log.Warn("alert delivery failed; will retry", "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	d.m.failures.WithLabelValues(a.Rule).Inc()
	if ctx.Err() != nil {
		d.abandoned.Add(1)
		log.Error("alert not delivered: shutdown deadline reached", "err", err)
		return
	}
	log.Error("alert not delivered", "err", err)
}

// takeCooldown claims the (rule, group)'s cooldown with SET NX EX. The
// event id is the token, so that the holder can be told apart later.
func (d *Dispatcher) takeCooldown(ctx context.Context, a Alert) (bool, error) {
	if a.Cooldown <= 0 {
		return true, nil
	}
	took, err := d.store.SetNX(ctx, a.CooldownKey, a.EventID, a.Cooldown).Result()
	if err != nil {
		return false, fmt.Errorf("alert: take cooldown: %w", err)
	}
	return took, nil
}

// Track exports zero-valued series for a rule, so that dashboards and
// rate() see it before its first alert.
func (d *Dispatcher) Track(rule string) {
	d.m.sent.WithLabelValues(rule)
	d.m.failures.WithLabelValues(rule)
	d.m.suppressed.WithLabelValues(rule, "cooldown")
	d.m.suppressed.WithLabelValues(rule, "shadow")
}

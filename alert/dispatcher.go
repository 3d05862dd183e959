package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/lua"
)

// ErrNotDelivered is returned by Deliver when every attempt failed with an
// error worth retrying (Slack down, 429s, timeouts). The alert is not lost:
// its caller keeps it (the alerts topic offset is not committed) and
// delivers it again later.
var ErrNotDelivered = errors.New("alert: not delivered yet")

// DispatcherConfig tunes delivery. Zero values take the defaults.
type DispatcherConfig struct {
	// MaxAttempts bounds the attempts of one Deliver call, 429s included.
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
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
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
	case c.MaxAttempts < 1:
		return errors.New("alert: max attempts must be at least 1")
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return errors.New("alert: backoff must satisfy 0 < min <= max")
	case c.MaxRetryAfter <= 0 || c.AttemptTimeout <= 0:
		return errors.New("alert: max retry-after and attempt timeout must be positive")
	}
	return nil
}

// claims is what the dispatcher needs from the Redis scripts: a decision
// per alert that every redelivery of it gets again, its outcome, and how
// long those records live.
type claims interface {
	ClaimAlert(ctx context.Context, cooldownKey, recordKey, id string, cooldown time.Duration, silences ...string) (lua.Claim, error)
	SettleAlert(ctx context.Context, cooldownKey, recordKey, id string, sent bool) error
	Retention() time.Duration
}

// Dispatcher delivers alerts through a Notifier, once each: it claims each
// alert in Redis (taking the (rule, group)'s cooldown), sends it, and
// records the outcome, so that an alert delivered again (the alerts topic
// is at least once) is neither posted twice nor suppressed by its own
// cooldown. It is safe for concurrent use.
type Dispatcher struct {
	cfg      DispatcherConfig
	notifier Notifier
	claims   claims
	log      *slog.Logger
	m        dispatcherMetrics
}

type dispatcherMetrics struct {
	sent       *prometheus.CounterVec
	suppressed *prometheus.CounterVec
	failures   *prometheus.CounterVec
	retries    *prometheus.CounterVec
}

// NewDispatcher returns a dispatcher that delivers through n and claims
// alerts with c.
func NewDispatcher(cfg DispatcherConfig, n Notifier, c claims, log *slog.Logger, reg prometheus.Registerer) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n == nil || c == nil {
		return nil, errors.New("alert: dispatcher needs a notifier and the claim scripts")
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
			Help: "Crossings not notified: the cooldown was held, the rule is in shadow mode, or a silence ran.",
		}, []string{"rule", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_failures_total",
			Help: "Alerts given up on: the notifier refused them for good (bad token, unknown channel).",
		}, []string{"rule"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_alert_delivery_errors_total",
			Help: "Failed delivery attempts that will be retried (Slack down, rate limited, timeouts).",
		}, []string{"rule"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.sent, m.suppressed, m.failures, m.retries} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("alert: register metrics: %w", err)
			}
		}
	}
	return &Dispatcher{cfg: cfg, notifier: n, claims: c, log: log, m: m}, nil
}

// Track exports zero-valued series for a rule, so that dashboards and
// rate() see it before its first alert.
func (d *Dispatcher) Track(rule string) {
	d.m.sent.WithLabelValues(rule)
	d.m.failures.WithLabelValues(rule)
	d.m.retries.WithLabelValues(rule)
	d.m.suppressed.WithLabelValues(rule, SuppressedCooldown)
	d.m.suppressed.WithLabelValues(rule, SuppressedShadow)
	d.m.suppressed.WithLabelValues(rule, SuppressedSilenced)
}

// HandleMessages settles a batch of the alerts topic's messages, one by
// one in order: the dispatcher is the alerts group's handler. It returns
// how many may be committed, and an error (see Deliver) when the next must
// come round again.
func (d *Dispatcher) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	for i, msg := range msgs {
		if err := d.HandleMessage(ctx, msg); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// HandleMessage settles one message of the alerts topic. It returns nil
// once the message may be committed, an error (see Deliver) when it must
// come round again.
func (d *Dispatcher) HandleMessage(ctx context.Context, msg kafka.Message) error {
	a, err := Decode(msg.Value)
	if err != nil {
		// Only fraudwatch writes this topic; a message it cannot read is
		// a bug or a foreign writer, and no retry will make it readable.
		d.log.Error("unreadable alert skipped", "topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "err", err)
		return nil
	}
	if age := time.Since(msg.Time); age > d.claims.Retention() {
		// Its delivery record may have expired: sending it now could post
		// it a second time, and days late it is news to nobody.
		d.log.Warn("stale alert skipped", "rule", a.Rule, "alert_id", a.ID, "age", age.Round(time.Second),
			"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
		return nil
	}
	return d.Deliver(ctx, a)
}

// Deliver settles one alert: it is sent, suppressed (cooldown or shadow),
// recognised as sent before, or given up on for good; then Deliver returns
// nil and the alert may be acknowledged. It returns an error, wrapping
// ErrNotDelivered when Slack kept failing, when the alert must be delivered
// again later.
func (d *Dispatcher) Deliver(ctx context.Context, a Alert) error {
	log := d.log.With("rule", a.Rule, "alert_id", a.ID)
	if a.Shadow() {
		d.m.suppressed.WithLabelValues(a.Rule, SuppressedShadow).Inc()
		log.Info("shadow rule crossed its threshold; not notifying", "current", a.Current, "threshold", a.Threshold)
		return nil
	}
	var silences []string
	if a.SilenceKey != "" && a.RuleSilence != "" {
		silences = []string{a.SilenceKey, a.RuleSilence}
	}
	claim, err := d.claims.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, a.Cooldown, silences...)
	if err != nil {
		return fmt.Errorf("alert: claim %s: %w", a.ID, err)
	}
	switch claim {
	case lua.ClaimSuppressed:
		d.m.suppressed.WithLabelValues(a.Rule, SuppressedCooldown).Inc()
		log.Info("alert suppressed: the cooldown is held by an earlier alert")
		return nil
	case lua.ClaimSilenced:
		d.m.suppressed.WithLabelValues(a.Rule, SuppressedSilenced).Inc()
		log.Info("alert silenced: a silence of its rule or group runs")
		return nil
	case lua.ClaimSent:
		log.Info("alert already delivered; not posting it again")
		return nil
	case lua.ClaimFailed:
		log.Info("alert given up on before; not retrying it")
		return nil
	}

	backoff := d.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
		err = d.notifier.Notify(actx, a)
		cancel()
		if err == nil {
			if err := d.settle(ctx, a, true); err != nil {
				return err
			}
			d.m.sent.WithLabelValues(a.Rule).Inc()
			log.Info("alert sent", "attempt", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("alert: deliver %s: %w", a.ID, ctx.Err())
		}
		retry, wait := RetryPolicy(err)
		if !retry {
			if err := d.settle(ctx, a, false); err != nil {
				return err
			}
			d.m.failures.WithLabelValues(a.Rule).Inc()
			log.Error("alert refused for good; given up, cooldown released", "err", err)
			return nil
		}
		d.m.retries.WithLabelValues(a.Rule).Inc()
		if attempt == d.cfg.MaxAttempts {
			log.Warn("alert not delivered yet; it stays queued", "attempts", attempt, "err", err)
			return fmt.Errorf("%w: %s: %d attempts, last: %w", ErrNotDelivered, a.ID, attempt, err)
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
			return fmt.Errorf("alert: deliver %s: %w", a.ID, ctx.Err())
		}
	}
}

// settle records the outcome of a claimed alert. It insists: an alert sent
// but not recorded as sent would be posted again by a redelivery. So it
// does not give up when ctx ends (a shutdown, a rebalance cutting work
// short, right after Slack took the post) but keeps trying for a bounded
// while on its own.
func (d *Dispatcher) settle(ctx context.Context, a Alert, sent bool) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(settleFor)
	backoff := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := d.claims.SettleAlert(actx, a.CooldownKey, a.RecordKey, a.ID, sent)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("alert: record outcome of %s: %w", a.ID, err)
		}
		d.log.Warn("recording the alert's outcome failed; retrying", "rule", a.Rule, "alert_id", a.ID, "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// settleFor bounds how long settle keeps trying.
const settleFor = 10 * time.Second

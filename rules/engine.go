package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// counters is what the engine needs from the Redis scripts.
type counters interface {
	IncrAndCheck(ctx context.Context, c lua.Count) (lua.Cross, error)
	SalesDecr(ctx context.Context, w lua.Window, eventID string, amount int64) (lua.Decr, error)
}

// sink takes crossings for notification; it returns once the alert is
// handed off, not once it is delivered.
type sink interface {
	Publish(ctx context.Context, a alert.Alert) error
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	// KeyPrefix starts every Redis key (redis.key_prefix, checked by
	// package config).
	KeyPrefix string
	// Now tells the time of events that carry no occurred_at (default
	// time.Now).
	Now func() time.Time
}

// Engine evaluates events against rules: every order runs incr_and_check
// for each enabled rule it has the group_by fields of, every refund runs
// sales_decr for each enabled amount rule, and first crossings go to the
// sink.
type Engine struct {
	cfg      EngineConfig
	keys     lua.Keys
	counters counters
	sink     sink
	log      *slog.Logger
	rules    atomic.Pointer[[]Rule]

	crossings *prometheus.CounterVec
	clamped   *prometheus.CounterVec
}

// NewEngine returns an engine evaluating rs.
func NewEngine(cfg EngineConfig, rs []Rule, c counters, s sink, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	keys, err := lua.NewKeys(cfg.KeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("rules: key prefix: %w", err)
	}
	if c == nil || s == nil {
		return nil, errors.New("rules: engine needs counters and a sink")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg:      cfg,
		keys:     keys,
		counters: c,
		sink:     s,
		log:      log,
		crossings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_threshold_crossings_total",
			Help: "First crossings of a rule's threshold in a window, shadow rules included.",
		}, []string{"rule"}),
		clamped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_refunds_clamped_total",
			Help: "Refunds larger than their window's amount counter, which was set to 0.",
		}, []string{"rule"}),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{e.crossings, e.clamped} {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("rules: register metrics: %w", err)
			}
		}
	}
	e.SetRules(rs)
	return e, nil
}

// SetRules replaces the rules; events being evaluated finish with the old
// set.
func (e *Engine) SetRules(rs []Rule) {
	rs = append([]Rule(nil), rs...)
	for _, r := range rs {
		e.crossings.WithLabelValues(r.Name)
		if r.Metric == alert.Amount {
			e.clamped.WithLabelValues(r.Name)
		}
	}
	e.rules.Store(&rs)
}

// Handle evaluates one event. It returns nil once every matching rule has
// run and every first crossing has been handed to the sink. On error the
// event may be partly counted; the caller retries it.
func (e *Engine) Handle(ctx context.Context, ev *event.Event) error {
	rs := *e.rules.Load()
	for i := range rs {
		r := &rs[i]
		if !r.Enabled {
			continue
		}
		values, ok := groupValues(r, ev)
		if !ok {
			continue
		}
		var err error
		switch ev.Type {
		case event.Order:
			err = e.order(ctx, r, ev, values)
		case event.Refund:
			if r.Metric == alert.Amount {
				err = e.refund(ctx, r, ev, values)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) order(ctx context.Context, r *Rule, ev *event.Event, values []string) error {
	inc := int64(1)
	if r.Metric == alert.Amount {
		inc = ev.Amount
	}
	g := e.keys.Group(r.Name, values)
	res, err := e.counters.IncrAndCheck(ctx, lua.Count{
		Window:    e.keys.Window(g, string(r.Metric)),
		EventID:   ev.EventID,
		Crossing:  e.keys.Crossing(g, ev.EventID),
		Increment: inc,
		Length:    r.Window,
		Threshold: r.Threshold,
	})
	if err != nil {
		return scriptError(lua.IncrAndCheckName, r.Name, err)
	}
	if !res.First {
		return nil
	}
	e.crossings.WithLabelValues(r.Name).Inc()
	at := ev.OccurredAt
	if at.IsZero() {
		at = e.cfg.Now()
	}
	a := alert.Alert{
		Rule:        r.Name,
		Description: r.Description,
		Severity:    r.Severity,
		Mode:        r.Mode,
		Channel:     r.Channel,
		Metric:      r.Metric,
		GroupBy:     slices.Clone(r.GroupBy), // the alert outlives this call; the rule set is shared
		GroupValues: displayValues(values),
		Current:     res.Current,
		Threshold:   r.Threshold,
		Currency:    ev.Currency,
		Window:      r.Window,
		Cooldown:    r.Cooldown,
		ID:          r.Name + "/" + ev.EventID,
		CooldownKey: e.keys.Cooldown(g),
		RecordKey:   e.keys.AlertRecord(g, ev.EventID),
		OrderID:     ev.OrderID,
		EventID:     ev.EventID,
		At:          at,
	}
	e.log.Info("threshold crossed", "rule", r.Name, "mode", r.Mode,
		"topic", ev.Source.Topic, "partition", ev.Source.Partition, "offset", ev.Source.Offset)
	if err := e.sink.Publish(ctx, a); err != nil {
		return fmt.Errorf("rules: hand off alert for rule %s: %w", r.Name, err)
	}
	return nil
}

func (e *Engine) refund(ctx context.Context, r *Rule, ev *event.Event, values []string) error {
	g := e.keys.Group(r.Name, values)
	res, err := e.counters.SalesDecr(ctx, e.keys.Window(g, string(r.Metric)), ev.EventID, ev.Amount)
	if err != nil {
		return scriptError(lua.SalesDecrName, r.Name, err)
	}
	if res.Clamped {
		e.clamped.WithLabelValues(r.Name).Inc()
		e.log.Warn("refund larger than the window's amount; clamped at 0", "rule", r.Name,
			"topic", ev.Source.Topic, "partition", ev.Source.Partition, "offset", ev.Source.Offset)
	}
	return nil
}

// maxDisplayValue bounds each group value an alert carries: the alert
// travels through a Kafka topic and into Slack, where a 10 KB address helps
// nobody and could make the alert too large to publish.
const maxDisplayValue = 1024

// displayValues returns the group values an alert shows, each cut to
// maxDisplayValue bytes on a rune boundary.
func displayValues(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		if len(v) <= maxDisplayValue {
			out[i] = v
			continue
		}
		cut := maxDisplayValue
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		out[i] = v[:cut] + "…"
	}
	return out
}

// scriptError wraps a failed script call. A script that refused its
// arguments will refuse them again: that makes the event unprocessable,
// not worth retrying.
func scriptError(script, rule string, err error) error {
	if errors.Is(err, lua.ErrInvalidArguments) {
		return fmt.Errorf("rules: eval %s for rule %s: %w: %w", script, rule, event.ErrUnprocessable, err)
	}
	return fmt.Errorf("rules: eval %s for rule %s: %w", script, rule, err)
}

// groupValues collects the rule's group_by values from the event; false
// when the event lacks any of them.
func groupValues(r *Rule, ev *event.Event) ([]string, bool) {
	values := make([]string, len(r.GroupBy))
	for i, f := range r.GroupBy {
		v, ok := ev.Field(f)
		if !ok {
			return nil, false
		}
		values[i] = v
	}
	return values, true
}

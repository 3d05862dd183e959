package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// counters is what the engine needs from Redis: batches of counting
// calls, sent pipelined, the crossings' evidence, and the seals of their
// alerts.
type counters interface {
	Batch() *lua.Batch
	AddEvidence(ctx context.Context, calls []*lua.Evidence) error
	CounterEvidence(ctx context.Context, keys []string) ([][]string, error)
	Seal(ctx context.Context, since string, seals []lua.Seal) error
}

// sink takes crossings for notification; it returns once the alerts are
// handed off, not once they are delivered.
type sink interface {
	Publish(ctx context.Context, alerts ...alert.Alert) error
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	// KeyPrefix starts every Redis key (redis.key_prefix, checked by
	// package config).
	KeyPrefix string
	// Now tells the time of events that carry no occurred_at (default
	// time.Now).
	Now func() time.Time
	// Buckets is how many hash tags groups are spread over (default
	// lua.Buckets; see lua.NewKeysIn).
	Buckets int
}

// Engine evaluates events against rules: it changes the windows of each
// enabled rule an event has the group_by fields of (orders count; refunds
// subtract from amount rules) through the scripts, in pipelined calls per
// partition and bucket (plan.go), and hands first crossings to the sink.
type Engine struct {
	cfg      EngineConfig
	keys     lua.Keys
	counters counters
	sink     sink
	log      *slog.Logger
	rules    atomic.Pointer[[]active]
	// setting serializes SetRules: each deletes the series of the rules
	// the set before it held.
	setting sync.Mutex
	plans   plans

	evaluations *prometheus.CounterVec
	skipped     *prometheus.CounterVec
	crossings   *prometheus.CounterVec
	clamped     *prometheus.CounterVec
	late        *prometheus.CounterVec
	future      prometheus.Counter
}

// active is a rule as the engine runs it.
type active struct {
	Rule
	// state names its windows' keys: its name and the fingerprint of its
	// definition, so that a changed definition starts fresh windows.
	state string
	// kind is the family of its calls: its orders' kind (kindOf).
	kind     lua.Kind
	counters ruleCounters
}

// MaxFuture is how far ahead of the engine's clock an event's time may be.
// An event from further ahead (a skewed clock) is counted at the time it is
// processed: otherwise it would move its group's sliding windows ahead and
// make every later event late.
const MaxFuture = time.Minute

// NewEngine returns an engine evaluating rs.
func NewEngine(cfg EngineConfig, rs []Rule, c counters, s sink, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Buckets == 0 {
		cfg.Buckets = lua.Buckets
	}
	keys, err := lua.NewKeysIn(cfg.KeyPrefix, cfg.Buckets)
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
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fraudwatch_events_late_total",
			Help: "Events a sliding rule did not count: older than their group's newest event time by more than the window and allowed_lateness.",
		}, []string{"rule"}),
		future: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fraudwatch_events_future_total",
			Help: "Events whose time was more than a minute ahead of the clock, counted at the time they were processed instead.",
		}),
	}
	e.evaluations, e.skipped = newEvaluationMetrics()
	if reg != nil {
		for _, col := range []prometheus.Collector{e.evaluations, e.skipped, e.crossings, e.clamped, e.late, e.future} {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("rules: register metrics: %w", err)
			}
		}
	}
	e.SetRules(rs)
	return e, nil
}

// SetRules replaces the rules; events being evaluated finish with the old
// set. The evaluation series of rules it removes are deleted; those of
// rules it keeps count on.
func (e *Engine) SetRules(rs []Rule) {
	e.setting.Lock()
	defer e.setting.Unlock()
	as := make([]active, len(rs))
	for i, r := range rs {
		as[i] = active{Rule: r, state: r.State(), kind: kindOf(&r, false), counters: e.countersOf(r.Name)}
		e.crossings.WithLabelValues(r.Name)
		if r.Metric == alert.Amount {
			e.clamped.WithLabelValues(r.Name)
		}
		if r.WindowType == alert.Sliding {
			e.late.WithLabelValues(r.Name)
		}
	}
	if old := e.rules.Load(); old != nil {
		e.forget(*old, rs)
	}
	e.rules.Store(&as)
}

// Handle evaluates a batch of events, each read from its partition in
// order: one pipelined script call per partition, bucket (lua.Keys) and
// script (a fixed rule's orders and refunds take turns, a call per run),
// then evidence, then the seals of the first crossings' alerts, then the
// alerts to the sink.
//
// A nil error means every rule ran for every event and each first crossing
// was handed off, but for the events in unprocessable (by index in evs,
// wrapping event.ErrUnprocessable), which no retry mends:
//
//   - A script refused them.
//   - Over lua.MaxWindows fixed rules count them in one bucket.
//   - The alerts topic refused their alert as too large.
//
// An error means: retry the whole batch. The scripts make recounting what
// was counted before the error harmless. Evaluations and skips are counted
// once the batch is done, not for an attempt that fails.
func (e *Engine) Handle(ctx context.Context, evs []*event.Event) (map[int]error, error) {
	rs := *e.rules.Load()
	p := e.plan(rs, evs)
	defer e.plans.put(p)
	unprocessable, err := e.run(ctx, p, evs)
	if err == nil {
		record(rs, p.tally)
	}
	return unprocessable, err
}

// run makes the plan's script calls and hands on what they answer; Handle
// says what its results mean.
func (e *Engine) run(ctx context.Context, p *plan, evs []*event.Event) (unprocessable map[int]error, err error) {
	if len(p.calls) == 0 {
		return nil, nil
	}
	if p.batch == nil {
		p.batch = e.counters.Batch()
	}
	batch := p.batch
	for _, c := range p.calls {
		if err := batch.Add(&c.Call); err != nil {
			return nil, fmt.Errorf("rules: %w", err)
		}
	}
	if err := batch.Exec(ctx); err != nil {
		return nil, fmt.Errorf("rules: run the scripts of %d events: %w", len(evs), err)
	}
	x, unprocessable, evidence := e.answers(p, evs)
	if err := e.addEvidence(ctx, evidence, x.alerts); err != nil {
		return nil, err
	}
	if len(x.alerts) > 0 {
		if err := e.seal(ctx, &x); err != nil {
			return nil, err
		}
		if err := e.sink.Publish(ctx, x.alerts...); err != nil {
			return e.refused(err, &x, evs, unprocessable)
		}
	}
	return unprocessable, nil
}

// crossings are a batch's first crossings: their alerts, the index in the
// batch of each one's event, and each one's marks key (Keys.Marks), where
// its seal goes.
type crossings struct {
	alerts []alert.Alert
	from   []int
	marks  []string
}

// refused handles a failed hand-off of the crossings' alerts. Alerts the
// alerts topic refused for their size would be refused on every retry,
// which would hold their partition for ever: their events are
// unprocessable, and go to the dead-letter topic. Any other failure
// retries the batch.
func (e *Engine) refused(err error, x *crossings, evs []*event.Event, unprocessable map[int]error) (map[int]error, error) {
	alerts, from := x.alerts, x.from
	tl, ok := errors.AsType[*alert.TooLargeError](err)
	if !ok || len(tl.Refused) == 0 {
		return nil, fmt.Errorf("rules: hand off %d alerts: %w", len(alerts), err)
	}
	for _, i := range tl.Refused {
		if i < 0 || i >= len(alerts) {
			return nil, fmt.Errorf("rules: hand off %d alerts: refusal of alert %d: %w", len(alerts), i, err)
		}
	}
	if unprocessable == nil {
		unprocessable = map[int]error{}
	}
	for _, i := range tl.Refused {
		a, ev := &alerts[i], evs[from[i]]
		e.log.Error("alert too large for the alerts topic; its event goes to the dead-letter topic", "rule", a.Rule,
			"topic", ev.Source.Topic, "partition", ev.Source.Partition, "offset", ev.Source.Offset, "err", tl.Err)
		if unprocessable[from[i]] == nil {
			unprocessable[from[i]] = fmt.Errorf("rules: publish the alert of rule %s: %w: %w", a.Rule, event.ErrUnprocessable, tl.Err)
		}
	}
	return unprocessable, nil
}

// answers reads the scripts' answers: the first crossings; late events
// and clamped refunds (counted and logged); the events a script refused;
// and the orders that go into their windows' evidence.
func (e *Engine) answers(p *plan, evs []*event.Event) (x crossings, unprocessable map[int]error, evidence *evidence) {
	for _, ref := range p.tooMany {
		if unprocessable == nil {
			unprocessable = map[int]error{}
		}
		if unprocessable[ref.event] == nil {
			unprocessable[ref.event] = fmt.Errorf("rules: eval rule %s: %w: more than %d fixed rules count the event into one bucket",
				ref.rule.Name, event.ErrUnprocessable, lua.MaxWindows)
		}
	}
	for _, c := range p.calls {
		for j, ref := range c.refs {
			r, ev, res := ref.rule, evs[ref.event], c.Results[j]
			switch {
			case res.Err != nil:
				if unprocessable[ref.event] == nil {
					if unprocessable == nil {
						unprocessable = map[int]error{}
					}
					unprocessable[ref.event] = fmt.Errorf("rules: eval %s for rule %s: %w: %w", c.Kind, r.Name, event.ErrUnprocessable, res.Err)
				}
			case res.First:
				w, name, values := c.window(j)
				x.alerts = append(x.alerts, e.crossed(r, ev, res.Current, name.Group, values))
				x.from, x.marks = append(x.from, ref.event), append(x.marks, w.Marks)
				if w.Keep > 0 {
					// Written by the counting call: read once it is done.
					evidence = evidence.read(p, r, len(x.alerts)-1, w.Key)
				} else {
					evidence = evidence.add(p, r, ev, res.Current, len(x.alerts)-1, w.Key, name.Group)
				}
			case res.Late:
				e.late.WithLabelValues(r.Name).Inc()
			case res.Clamped:
				e.clamped.WithLabelValues(r.Name).Inc()
				e.log.Warn("refund larger than the window's amount; clamped at 0", "rule", r.Name,
					"topic", ev.Source.Topic, "partition", ev.Source.Partition, "offset", ev.Source.Offset)
			default:
				if w, name, _ := c.window(j); w.Keep == 0 {
					evidence = evidence.add(p, r, ev, res.Current, -1, w.Key, name.Group)
				}
			}
		}
	}
	return x, unprocessable, evidence
}

// crossed counts a first crossing and makes its alert, of the group the
// plan found the event in.
func (e *Engine) crossed(r *active, ev *event.Event, current int64, g lua.Group, values []string) alert.Alert {
	e.crossings.WithLabelValues(r.Name).Inc()
	e.log.Info("threshold crossed", "rule", r.Name, "mode", r.Mode,
		"topic", ev.Source.Topic, "partition", ev.Source.Partition, "offset", ev.Source.Offset)
	at := ev.OccurredAt
	if at.IsZero() {
		at = e.cfg.Now()
	}
	a := alert.Alert{
		Rule:        r.Name,
		Severity:    r.Severity,
		Mode:        r.Mode,
		Channel:     clipText(r.Channel, maxNameText),
		Metric:      r.Metric,
		Field:       clipText(r.Field, maxNameText),
		GroupBy:     clipAll(r.GroupBy, maxNameText, maxGroupNames), // a copy: the alert outlives this call; the rule set is shared
		GroupValues: displayValues(values),
		Group:       g.Encoding(),
		Definition:  r.state[len(r.Name)+1:], // State is name.fingerprint
		Current:     current,
		Threshold:   r.Threshold,
		Currency:    clipText(ev.Currency, maxCurrency),
		Window:      r.Window,
		WindowType:  r.WindowType,
		Cooldown:    r.Cooldown,
		ID:          r.Name + "/" + ev.EventID,
		CooldownKey: e.keys.Cooldown(g, r.Name),
		SilenceKey:  e.keys.Silences(g, r.Name),
		RuleSilence: e.keys.RuleSilences(g, r.Name),
		RecordKey:   e.keys.AlertRecord(g, r.Name, ev.EventID),
		OrderID:     clipText(ev.OrderID, maxAlertText),
		EventID:     ev.EventID,
		At:          at,
	}
	a.Description = clipText(alert.Describe(r.Description, &a), maxAlertText)
	return a
}

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

// counters is what the engine needs from the Redis scripts: batches of
// counting calls, sent pipelined.
type counters interface {
	Batch() *lua.Batch
	AddEvidence(ctx context.Context, calls []*lua.Evidence) error
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
	rules    atomic.Pointer[[]active]

	crossings *prometheus.CounterVec
	clamped   *prometheus.CounterVec
	late      *prometheus.CounterVec
	future    prometheus.Counter
}

// active is a rule as the engine runs it.
type active struct {
	Rule
	// state names its windows' keys: its name and the fingerprint of its
	// definition, so that a changed definition starts fresh windows.
	state string
	kind  kind
}

// MaxFuture is how far ahead of the engine's clock an event's time may be:
// an event from further ahead (a skewed clock) is counted at the time it is
// processed, since one far in the future would otherwise move its group's
// sliding windows ahead and make every later event late.
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
	if reg != nil {
		for _, col := range []prometheus.Collector{e.crossings, e.clamped, e.late, e.future} {
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
	as := make([]active, len(rs))
	for i, r := range rs {
		as[i] = active{Rule: r, state: r.State(), kind: kindOf(&r)}
		e.crossings.WithLabelValues(r.Name)
		if r.Metric == alert.Amount {
			e.clamped.WithLabelValues(r.Name)
		}
		if r.WindowType == alert.Sliding {
			e.late.WithLabelValues(r.Name)
		}
	}
	e.rules.Store(&as)
}

// Handle evaluates a batch of events, each read from its partition in
// order: every order runs incr_and_check for each enabled rule it has the
// group_by fields of, every refund runs sales_decr for each enabled amount
// rule, and first crossings go to the sink. All the script calls of the
// batch go to Redis pipelined: one call per partition and bucket of groups
// (package lua's Keys) for each run of orders or refunds.
//
// Handle returns nil once every matching rule has run for every event and
// every first crossing is handed off; unprocessable then lists the events,
// by their index in evs, that a script refused (it will refuse them again:
// no retry counts them), wrapping event.ErrUnprocessable. An error means the
// batch is to be retried as a whole: some of it may have been counted,
// which the scripts make harmless.
func (e *Engine) Handle(ctx context.Context, evs []*event.Event) (unprocessable map[int]error, err error) {
	p := e.plan(*e.rules.Load(), evs)
	if len(p.calls) == 0 {
		return nil, nil
	}
	batch := e.counters.Batch()
	for _, c := range p.calls {
		switch c.kind {
		case fixedOrders:
			err = batch.Count(&c.count)
		case fixedRefunds:
			err = batch.Refund(&c.refund)
		case sliding:
			err = batch.Slide(&c.slide)
		case distinct:
			err = batch.Distinct(&c.distinct)
		}
		if err != nil {
			return nil, fmt.Errorf("rules: %w", err)
		}
	}
	if err := batch.Exec(ctx); err != nil {
		return nil, fmt.Errorf("rules: run the scripts of %d events: %w", len(evs), err)
	}
	alerts, from, unprocessable, evidence := e.answers(p, evs)
	if err := e.addEvidence(ctx, evidence, alerts); err != nil {
		return nil, err
	}
	if len(alerts) > 0 {
		if err := e.sink.Publish(ctx, alerts...); err != nil {
			return e.refused(err, alerts, from, evs, unprocessable)
		}
	}
	return unprocessable, nil
}

// refused handles a failed hand-off of alerts, from[i] the event of
// alerts[i]. Alerts the alerts topic refused for their size would be
// refused on every retry, which would hold their partition for ever: their
// events are unprocessable, and go to the dead-letter topic. Any other
// failure retries the batch.
func (e *Engine) refused(err error, alerts []alert.Alert, from []int, evs []*event.Event, unprocessable map[int]error) (map[int]error, error) {
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

// answers reads the scripts' answers: the alerts of the first crossings
// with, in from, the index of each one's event; late events and clamped
// refunds (counted and logged); the events a script refused; and the
// orders that go into their windows' evidence.
func (e *Engine) answers(p *plan, evs []*event.Event) (alerts []alert.Alert, from []int, unprocessable map[int]error, evidence *evidence) {
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
			r, ev := ref.rule, evs[ref.event]
			var res lua.Counted
			switch c.kind {
			case fixedOrders:
				res = c.count.Results[j]
			case fixedRefunds:
				res = lua.Counted{Current: c.refund.Results[j].Remaining, Clamped: c.refund.Results[j].Clamped, Err: c.refund.Results[j].Err}
			case sliding:
				res = c.slide.Results[j]
			case distinct:
				res = c.distinct.Results[j]
			}
			switch {
			case res.Err != nil:
				if unprocessable[ref.event] == nil {
					if unprocessable == nil {
						unprocessable = map[int]error{}
					}
					unprocessable[ref.event] = fmt.Errorf("rules: eval %s for rule %s: %w: %w", c.kind.script(), r.Name, event.ErrUnprocessable, res.Err)
				}
			case res.First:
				alerts = append(alerts, e.crossed(r, ev, res.Current))
				from = append(from, ref.event)
				evidence = evidence.add(e.keys, r, ev, res.Current, len(alerts)-1)
			case res.Late:
				e.late.WithLabelValues(r.Name).Inc()
			case res.Clamped:
				e.clamped.WithLabelValues(r.Name).Inc()
				e.log.Warn("refund larger than the window's amount; clamped at 0", "rule", r.Name,
					"topic", ev.Source.Topic, "partition", ev.Source.Partition, "offset", ev.Source.Offset)
			default:
				evidence = evidence.add(e.keys, r, ev, res.Current, -1)
			}
		}
	}
	return alerts, from, unprocessable, evidence
}

// crossed counts a first crossing and makes its alert.
func (e *Engine) crossed(r *active, ev *event.Event, current int64) alert.Alert {
	values, _ := appendGroupValues(nil, &r.Rule, ev)
	g := e.keys.Group(values)
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

// kind is what a script call does, and so which script runs it.
type kind uint8

const (
	fixedOrders  kind = iota // incr_and_check
	fixedRefunds             // sales_decr
	sliding                  // slide_and_check: orders and refunds
	distinct                 // distinct_and_check
)

func kindOf(r *Rule) kind {
	switch {
	case r.Metric == alert.Distinct:
		return distinct
	case r.WindowType == alert.Sliding:
		return sliding
	}
	return fixedOrders
}

func (k kind) script() string {
	return [...]string{lua.IncrAndCheckName, lua.SalesDecrName, lua.SlideAndCheckName, lua.DistinctAndCheckName}[k]
}

// plan is the script calls of a batch of events, as they are gathered.
type plan struct {
	keys  lua.Keys
	calls []*call
	// open is the call each partition, bucket and script family adds to
	// now; windows finds a window's place in a call.
	open    map[bucketOf]*call
	windows map[windowOf]windowIn
	// The windows and changes of all calls, in the order they were
	// planned, until finish hands each call its own: a slice for all of
	// them rather than a growing slice each, which cost 6 allocations an
	// order.
	pendingWindows []pendingWindow
	pending        []pendingChange
	// free is where new calls come from, a chunk at a time, of chunk
	// calls (the last).
	free  []call
	chunk int
	// event is the changes of the event being planned; tooMany those of
	// its changes no call could take (addEvent).
	event   []planned
	tooMany []ref
}

type pendingWindow struct {
	call *call
	w    lua.Window
	name lua.WindowName
}

type pendingChange struct {
	call *call
	ch   lua.Change
	ref  ref
}

// call is one script call with, for each of its changes, the rule and
// event it stands for. Of count, refund, slide and distinct, the one its
// kind names is used.
type call struct {
	kind     kind
	count    lua.Count
	refund   lua.Refund
	slide    lua.Slide
	distinct lua.Distinct
	refs     []ref
	// windowList and changeList are the used one's Windows and Changes.
	windowList *[]lua.Window
	changeList *[]lua.Change
	// windows and changes are how many the call has.
	windows, changes int
}

type ref struct {
	rule  *active
	event int
}

// bucketOf names the calls a change can go to: those of its partition,
// bucket and family (the kind, but a fixed rule's orders and refunds are
// one family, taking turns).
type bucketOf struct {
	source, tag string
	family      kind
}

// windowOf names a window: its rule and group.
type windowOf struct {
	rule  *active
	group lua.Group
}

// windowIn is where a window is in a call.
type windowIn struct {
	call  *call
	index int
}

// plan turns the events into script calls: for each partition, bucket of
// groups and family of script, one call (for fixed rules, one for each run
// of orders or refunds), so that a window sees its events in their
// partition's order.
func (e *Engine) plan(rs []active, evs []*event.Event) *plan {
	hint := min(len(evs)*len(rs), 4096)
	p := &plan{keys: e.keys, open: make(map[bucketOf]*call, min(hint, 2*lua.Buckets)), windows: make(map[windowOf]windowIn, hint),
		pendingWindows: make([]pendingWindow, 0, hint), pending: make([]pendingChange, 0, hint)}
	var (
		topic  string
		part   = -1
		src    string
		values []string
	)
	for i, ev := range evs {
		if ev.Source.Topic != topic || ev.Source.Partition != part {
			topic, part = ev.Source.Topic, ev.Source.Partition
			src = lua.Source(topic, part)
		}
		refund := ev.Type == event.Refund
		id := lua.IDOf(ev.EventID)
		at := int64(-1) // the event's time, once a rule needs it
		for k := range rs {
			r := &rs[k]
			if !r.Enabled || (refund && r.Metric != alert.Amount) {
				continue
			}
			var ok bool
			if values, ok = appendGroupValues(values[:0], &r.Rule, ev); !ok || !r.Matches(ev) {
				continue
			}
			ch := lua.Change{Offset: ev.Source.Offset, ID: id, Amount: ev.Amount}
			if r.Metric == alert.Count {
				ch.Amount = 1
			}
			k := r.kind
			switch {
			case k == fixedOrders && refund:
				k = fixedRefunds
			case k == sliding && refund:
				ch.Amount = -ev.Amount
			case k == distinct:
				v, ok := ev.Field(r.Field)
				if !ok {
					continue
				}
				ch.Value = lua.ValueOf(v)
			}
			if k == sliding || k == distinct {
				if at < 0 {
					at = e.eventTime(ev)
				}
				ch.At = at
			}
			p.event = append(p.event, planned{k, r, p.keys.Group(values), ch})
		}
		p.addEvent(src, i)
	}
	p.finish()
	return p
}

// planned is one change of the event being planned, before it goes into
// a call.
type planned struct {
	kind  kind
	rule  *active
	group lua.Group
	ch    lua.Change
}

// addEvent adds the changes of event, planned in p.event, to their calls.
// A call takes all of the event's changes to its bucket or none: the bucket
// remembers the last offset a call applied, so a call that took part of an
// event would make the rest look applied. The event's changes past what one
// call can take are refused.
func (p *plan) addEvent(src string, event int) {
	for j, pl := range p.event {
		need := 0
		tag := pl.group.Tag()
		for _, other := range p.event[:j] {
			if other.kind == pl.kind && other.group.Tag() == tag {
				need = -1 // not the event's first change to this call
				break
			}
		}
		for _, other := range p.event[j:] {
			if need >= 0 && other.kind == pl.kind && other.group.Tag() == tag {
				need++
			}
		}
		if need > lua.MaxWindows {
			need = lua.MaxWindows
		}
		if !p.add(src, pl.kind, pl.rule, pl.group, pl.ch, event, need) {
			p.tooMany = append(p.tooMany, ref{rule: pl.rule, event: event})
		}
	}
	p.event = p.event[:0]
}

// eventTime is the time the sliding and distinct windows count an event
// at, in milliseconds since 1970: its occurred_at, else its Kafka record's
// time, else now; never more than MaxFuture ahead of now.
func (e *Engine) eventTime(ev *event.Event) int64 {
	t := ev.OccurredAt
	if t.IsZero() {
		t = ev.Source.Time
	}
	now := e.cfg.Now()
	if t.IsZero() {
		t = now
	} else if t.After(now.Add(MaxFuture)) {
		e.future.Inc()
		t = now
	}
	return max(t.UnixMilli(), 0)
}

// add adds one change to the call of its partition, bucket and family,
// opening a call when there is none, when the run of a fixed rule's orders
// or refunds changes, or when the call is full. need is, at an event's
// first change to its bucket and script, how many changes the event has
// there (at most lua.MaxWindows): a call without room for all of them ends
// before the event; it is -1 for the event's later changes there. add
// reports false, adding nothing, for a change past what the event's call
// can take.
func (p *plan) add(src string, k kind, r *active, g lua.Group, ch lua.Change, event, need int) bool {
	family := k
	if k == fixedRefunds {
		family = fixedOrders
	}
	b := bucketOf{src, g.Tag(), family}
	c := p.open[b]
	in, known := p.windows[windowOf{r, g}]
	known = known && c != nil && in.call == c
	full := c == nil || c.kind != k || c.changes == lua.MaxChanges || (!known && c.windows == lua.MaxWindows)
	if need > 0 {
		full = full || c.changes+need > lua.MaxChanges || c.windows+need > lua.MaxWindows
	} else if full && need < 0 {
		return false // the event's call is full: a new one would skip this change
	}
	if full {
		c, known = p.newCall(src, k), false
		switch k {
		case fixedOrders:
			c.count.Offsets = p.keys.Offsets(g)
		case fixedRefunds:
			c.refund.Offsets = p.keys.Offsets(g)
		case sliding:
			c.slide.Offsets = p.keys.Offsets(g)
		case distinct:
			c.distinct.Offsets = p.keys.Offsets(g)
		}
		p.open[b] = c
		p.calls = append(p.calls, c)
	}
	if !known {
		in = windowIn{c, c.windows}
		p.windows[windowOf{r, g}] = in
		c.windows++
		w := lua.Window{Length: r.Window, Threshold: r.Threshold, Sliding: r.WindowType == alert.Sliding, Lateness: r.Lateness}
		name := lua.WindowName{Group: g, Rule: r.state, Fixed: k == fixedOrders || k == fixedRefunds, Distinct: k == distinct}
		p.pendingWindows = append(p.pendingWindows, pendingWindow{c, w, name})
	}
	ch.Window = in.index
	c.changes++
	p.pending = append(p.pending, pendingChange{c, ch, ref{rule: r, event: event}})
	return true
}

// newCall returns an empty call of kind k.
func (p *plan) newCall(src string, k kind) *call {
	if len(p.free) == 0 {
		p.chunk = min(max(2*p.chunk, 4), 64)
		p.free = make([]call, p.chunk)
	}
	c := &p.free[0]
	p.free = p.free[1:]
	c.kind = k
	switch k {
	case fixedOrders:
		c.count.Source, c.windowList, c.changeList = src, &c.count.Windows, &c.count.Changes
	case fixedRefunds:
		c.refund.Source, c.windowList, c.changeList = src, &c.refund.Windows, &c.refund.Changes
	case sliding:
		c.slide.Source, c.windowList, c.changeList = src, &c.slide.Windows, &c.slide.Changes
	case distinct:
		c.distinct.Source, c.windowList, c.changeList = src, &c.distinct.Windows, &c.distinct.Changes
	}
	return c
}

// finish hands each call its windows, named, and changes, in the order
// they were planned, from one slice for all calls.
func (p *plan) finish() {
	windows := make([]lua.Window, len(p.pendingWindows))
	changes := make([]lua.Change, len(p.pending))
	refs := make([]ref, len(p.pending))
	nw, nc := 0, 0
	for _, c := range p.calls {
		*c.windowList = windows[nw : nw : nw+c.windows]
		*c.changeList = changes[nc : nc : nc+c.changes]
		c.refs = refs[nc : nc : nc+c.changes]
		nw, nc = nw+c.windows, nc+c.changes
	}
	named := make([]*lua.Window, len(p.pendingWindows))
	names := make([]lua.WindowName, len(p.pendingWindows))
	for i, w := range p.pendingWindows {
		list := append(*w.call.windowList, w.w)
		*w.call.windowList = list
		named[i], names[i] = &list[len(list)-1], w.name
	}
	p.keys.NameWindows(named, names)
	for _, ch := range p.pending {
		*ch.call.changeList = append(*ch.call.changeList, ch.ch)
		ch.call.refs = append(ch.call.refs, ch.ref)
	}
	p.pendingWindows, p.pending = nil, nil
}

// Bounds of an alert's text, in bytes before JSON escaping (which at
// worst multiplies them by 6, \u0001 for a control byte): the alert
// travels through a Kafka topic and into Slack, where a 10 KB address
// helps nobody, and however its event and rule are written it stays far
// below the alerts topic's message limit (alert.MaxMessageBytes). Its ID
// and EventID are not cut, since they name the crossing: event.Decode
// bounds event ids (event.MaxIDBytes), config.ParseRules rule names, and
// package lua the keys.
const (
	// maxDisplayValue bounds each group value, and maxGroupValues all of
	// them together (a rule with many group_by fields gets less of each).
	maxDisplayValue = 1024
	maxGroupValues  = 16 * maxDisplayValue
	// maxAlertText bounds order_id and the description.
	maxAlertText = 1024
	// maxNameText bounds a field name (each of group_by, and field) and
	// the channel; maxGroupNames all of group_by together.
	maxNameText   = 256
	maxGroupNames = 16 * maxNameText
	maxCurrency   = 16
)

// displayValues returns the group values an alert shows, each cut on a
// rune boundary to maxDisplayValue bytes, or less when there are so many
// that together they would exceed maxGroupValues.
func displayValues(values []string) []string {
	return clipAll(values, maxDisplayValue, maxGroupValues)
}

// clipAll returns a copy of ss with each string clipped to each bytes, or
// to an equal share of total when that is less.
func clipAll(ss []string, each, total int) []string {
	if len(ss) == 0 {
		return slices.Clone(ss)
	}
	n := min(each, total/len(ss))
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clipText(s, n)
	}
	return out
}

// clipText cuts s to at most n bytes on a rune boundary, then marks the
// cut with "…" (3 bytes more).
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// appendGroupValues appends the rule's group_by values of the event to
// values; false when the event lacks any of them.
func appendGroupValues(values []string, r *Rule, ev *event.Event) ([]string, bool) {
	for _, f := range r.GroupBy {
		v, ok := ev.Field(f)
		if !ok {
			return values, false
		}
		values = append(values, v)
	}
	return values, true
}

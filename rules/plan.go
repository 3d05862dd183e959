package rules

import (
	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

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
	// tally is what the batch did to each rule, by its index in the set.
	tally []tally
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
		pendingWindows: make([]pendingWindow, 0, hint), pending: make([]pendingChange, 0, hint), tally: make([]tally, len(rs))}
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
		// Taken for every event, whatever its rules: an event from the
		// future is counted even where only fixed windows (processing
		// time) are in force, since it says a producer's clock is off.
		at := e.eventTime(ev)
		for k := range rs {
			r, t := &rs[k], &p.tally[k]
			if !r.Enabled {
				continue
			}
			var ok bool
			if values, ok = r.sees(ev, refund, values[:0], t); !ok {
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
					t.skipped[skipField]++
					continue
				}
				ch.Value = lua.ValueOf(v)
			}
			if k == sliding || k == distinct {
				ch.At = at
			}
			p.event = append(p.event, planned{k, r, p.keys.Group(values), ch})
		}
		p.addEvent(src, i)
	}
	p.finish()
	return p
}

// sees reports whether the rule takes the event, of its type, with its
// group_by fields and meeting its where:, appending its group values to
// values. It tallies the evaluation, and the reason when it does not.
func (r *active) sees(ev *event.Event, refund bool, values []string, t *tally) ([]string, bool) {
	t.evaluated++
	if refund && r.Metric != alert.Amount {
		t.skipped[skipEventType]++
		return values, false
	}
	values, ok := appendGroupValues(values, &r.Rule, ev)
	if !ok {
		t.skipped[skipGroupBy]++
		return values, false
	}
	if !r.Matches(ev) {
		t.skipped[skipWhere]++
		return values, false
	}
	return values, true
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
// time, else now; never more than MaxFuture ahead of now (a time further
// ahead is counted in fraudwatch_events_future_total).
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

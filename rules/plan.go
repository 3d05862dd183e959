package rules

import (
	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// kindOf is the one place a rule maps to a counting script: the kind of
// its calls for an order, or for a refund. A fixed rule's orders and
// refunds are two kinds of one family, its orders' kind: they take turns
// on the same windows.
func kindOf(r *Rule, refund bool) lua.Kind {
	switch {
	case r.Metric == alert.Distinct:
		return lua.Distinct
	case r.WindowType == alert.Sliding:
		return lua.Slide
	case refund:
		return lua.Refund
	}
	return lua.Count
}

// change is the event's change to the rule's window, and the kind of its
// call; false when the event lacks a distinct rule's field.
func (r *active) change(ev *event.Event, refund bool, id lua.EventID, at int64) (lua.Kind, lua.Change, bool) {
	k := kindOf(&r.Rule, refund)
	ch := lua.Change{Offset: ev.Source.Offset, ID: id, Amount: ev.Amount, At: at}
	switch {
	case r.Metric == alert.Count:
		ch.Amount = 1
	case k == lua.Slide && refund:
		ch.Amount = -ev.Amount // sales_decr takes a refund as it is
	case k == lua.Distinct:
		v, ok := ev.Field(r.Field)
		if !ok {
			return k, ch, false
		}
		ch.Value = lua.ValueOf(v)
	}
	return k, ch, true
}

// plan is the script calls of a batch of events, as they are gathered.
type plan struct {
	keys  lua.Keys
	calls []*call
	// open is the calls each source of the batch adds to now, by family
	// and bucket, the first opened of them this batch's: arrays, not a
	// map, and a call's windows found in the call (find), for the map
	// lookups a change took about a tenth of fraudwatch's CPU an event
	// (docs/performance.md, fraudwatch's own share).
	open   []*openCalls
	opened int
	// offsets is each bucket's offsets key (Keys.Offsets), named once for
	// the engine's plans: the key names no event's data.
	offsets [lua.Buckets]string
	// The windows and changes of all calls, in the order they were
	// planned, until finish hands each call its own: a slice for all of
	// them rather than a growing slice each, which cost 6 allocations an
	// order.
	pendingWindows []pendingWindow
	pending        []pendingChange
	// values is the batch's group values, each change's its own slice of
	// it: the windows keep theirs for the crossing.
	values []string
	// made is the calls newCall hands out, the first used of them to this
	// batch; all is what finish cuts the calls' windows and changes from;
	// batch is the calls' lua.Batch. All are kept from batch to batch
	// (plans.go).
	made  []*call
	used  int
	all   buffers
	batch *lua.Batch
	// event is the changes of the event being planned; tooMany those of
	// its changes no call could take (addEvent).
	event   []planned
	tooMany []ref
	// tally is what the batch did to each rule, by its index in the set.
	tally []tally
	// evidence is the batch's evidence calls, once answers starts them.
	evidence evidence
}

// openCalls are the calls the changes of one source go to now: by family
// (kindOf), then by bucket (lua.Group.Bucket).
type openCalls struct {
	src    string
	family [][lua.Buckets]*call
}

// at is where the open call of a family and bucket is kept.
func (o *openCalls) at(family lua.Kind, bucket int) **call {
	for int(family) >= len(o.family) {
		o.family = append(o.family, [lua.Buckets]*call{})
	}
	return &o.family[family][bucket]
}

// pendingWindow is a window of a call as planned: its rule and name, and
// its index in the call.
type pendingWindow struct {
	call   *call
	rule   *active
	name   lua.WindowName
	values []string
	index  int
}

type pendingChange struct {
	call *call
	ch   lua.Change
	ref  ref
}

// call is one script call with, for each of its changes, the rule and
// event it stands for, and for each of its windows what the plan computed
// of it: its group and the group's values, which the crossing and the
// evidence read rather than derive again.
type call struct {
	lua.Call
	refs  []ref
	names []lua.WindowName
	// values are each window's group values, as the events spelled them.
	values [][]string
	// windows and changes are how many the call has.
	windows, changes int
	// slots find the call's windows by their group's hash (lua.Group.Sum),
	// each 1 + the window's place in the plan's pendingWindows, 0 where
	// empty, probed in turn from the hash: at most lua.MaxWindows windows
	// in twice as many slots. A walk over the call's windows, which with
	// 16 buckets hold up to 64 and mostly miss, took 4-5 % of
	// fraudwatch's CPU (docs/performance.md, fraudwatch's own share).
	slots [windowSlots]int32
}

const windowSlots = 2 * lua.MaxWindows

// window is what the plan knows of the window of a call's change j.
func (c *call) window(j int) (w *lua.Window, name *lua.WindowName, values []string) {
	i := c.Changes[j].Window
	return &c.Windows[i], &c.names[i], c.values[i]
}

type ref struct {
	rule  *active
	event int
}

// windowOf names a window: its rule and group.
type windowOf struct {
	rule  *active
	group lua.Group
}

// plan turns the events into script calls: for each partition, bucket of
// groups and family of script, one call (for fixed rules, one for each run
// of orders or refunds), so that a window sees its events in their
// partition's order.
func (e *Engine) plan(rs []active, evs []*event.Event) *plan {
	p := e.plans.get(e.keys, min(len(evs)*len(rs), 4096), len(rs))
	var (
		topic  string
		part   = -1
		open   *openCalls
		values = p.values
	)
	for i, ev := range evs {
		if ev.Source.Topic != topic || ev.Source.Partition != part {
			topic, part = ev.Source.Topic, ev.Source.Partition
			open = p.openOf(lua.Source(topic, part))
		}
		refund := ev.Type == event.Refund
		id := lua.IDOf(ev.EventID)
		// Taken for every event, whatever its rules: an event from the
		// future is counted even where only fixed windows (processing
		// time) are in force, since it says a producer's clock is off.
		at := e.eventTime(ev)
		entry := "" // its evidence entry, made once for its fixed windows that keep evidence
		for k := range rs {
			r, t := &rs[k], &p.tally[k]
			if !r.Enabled {
				continue
			}
			start := len(values)
			var ok bool
			if values, ok = r.sees(ev, refund, values, t); !ok {
				values = cut(values, start)
				continue
			}
			k, ch, ok := r.change(ev, refund, id, at)
			if !ok {
				t.skipped[skipField]++
				values = cut(values, start)
				continue
			}
			if k == lua.Count && r.Evidence > 0 {
				if entry == "" {
					entry = encodeCounterEntry(ev)
				}
				ch.Entry = entry
			}
			own := values[start:len(values):len(values)]
			p.event = append(p.event, planned{k, r, p.keys.Group(own), own, ch})
		}
		p.addEvent(open, i)
	}
	p.values = values
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
	kind   lua.Kind
	rule   *active
	group  lua.Group
	values []string // in plan's buffer of the batch's values
	ch     lua.Change
}

// addEvent adds the changes of event, planned in p.event, to their calls.
// A call takes all of the event's changes to its bucket or none: the bucket
// remembers the last offset a call applied, so a call that took part of an
// event would make the rest look applied. The event's changes past what one
// call can take are refused.
func (p *plan) addEvent(open *openCalls, event int) {
	// By index: a planned change is too large to copy for each look.
	for j := range p.event {
		pl := &p.event[j]
		need := 0
		bucket := pl.group.Bucket()
		for k := range j {
			if other := &p.event[k]; other.kind == pl.kind && other.group.Bucket() == bucket {
				need = -1 // not the event's first change to this call
				break
			}
		}
		for k := j; need >= 0 && k < len(p.event); k++ {
			if other := &p.event[k]; other.kind == pl.kind && other.group.Bucket() == bucket {
				need++
			}
		}
		if need > lua.MaxWindows {
			need = lua.MaxWindows
		}
		if !p.add(open, pl, event, need) {
			p.tooMany = append(p.tooMany, ref{rule: pl.rule, event: event})
		}
	}
	p.event = p.event[:0]
}

// add adds one change to the call of its partition, bucket and family,
// opening a call when there is none, when the run of a fixed rule's orders
// or refunds changes, or when the call is full (lua.MaxWindows windows, or
// its kind's MaxChanges changes). need is, at an event's
// first change to its bucket and script, how many changes the event has
// there (at most lua.MaxWindows): a call without room for all of them ends
// before the event; it is -1 for the event's later changes there. add
// reports false, adding nothing, for a change past what the event's call
// can take.
func (p *plan) add(open *openCalls, pl *planned, event, need int) bool {
	k, r, g := pl.kind, pl.rule, pl.group
	slot := open.at(r.kind, g.Bucket())
	c, index, empty := *slot, -1, 0
	if c != nil && c.Kind == k {
		index, empty = p.find(c, r, g)
	}
	known := index >= 0
	most := k.MaxChanges() // the kind's, to keep its call near 1 ms of Redis time
	full := c == nil || c.Kind != k || c.changes == most || (!known && c.windows == lua.MaxWindows)
	if need > 0 {
		full = full || c.changes+need > most || c.windows+need > lua.MaxWindows
	} else if full && need < 0 {
		return false // the event's call is full: a new one would skip this change
	}
	if full {
		c, known, empty = p.newCall(), false, int(g.Sum()%windowSlots)
		c.Kind, c.Source, c.Offsets = k, open.src, p.offsetsOf(g)
		*slot = c
		p.calls = append(p.calls, c)
	}
	if !known {
		index = c.windows
		c.windows++
		name := lua.WindowName{Group: g, Rule: r.state, Fixed: k.Counter(), Distinct: k.Values()}
		p.pendingWindows = append(p.pendingWindows, pendingWindow{c, r, name, pl.values, index})
		c.slots[empty] = int32(len(p.pendingWindows))
	}
	ch := pl.ch
	ch.Window = index
	c.changes++
	p.pending = append(p.pending, pendingChange{c, ch, ref{rule: r, event: event}})
	return true
}

// find is the index in c of the window of rule r and group g, or -1 and
// the empty slot where that window goes. A call holds at most
// lua.MaxWindows windows in twice as many slots, so one is always empty.
func (p *plan) find(c *call, r *active, g lua.Group) (index, empty int) {
	for s := g.Sum(); ; s++ {
		at := c.slots[s%windowSlots]
		if at == 0 {
			return -1, int(s % windowSlots)
		}
		if w := &p.pendingWindows[at-1]; w.rule == r && w.name.Group == g {
			return w.index, 0
		}
	}
}

// openOf is the open calls of src, which the batch starts when it has
// none: a batch is mostly one partition's, so this finds it at once.
func (p *plan) openOf(src string) *openCalls {
	for _, o := range p.open[:p.opened] {
		if o.src == src {
			return o
		}
	}
	if p.opened == len(p.open) {
		p.open = append(p.open, &openCalls{})
	}
	o := p.open[p.opened]
	p.opened++
	o.src = src
	return o
}

// offsetsOf is the offsets key of g's bucket.
func (p *plan) offsetsOf(g lua.Group) string {
	key := &p.offsets[g.Bucket()]
	if *key == "" {
		*key = p.keys.Offsets(g)
	}
	return *key
}

// finish hands each call its windows, named, and changes, in the order
// they were planned, from one slice for all calls.
func (p *plan) finish() {
	p.all.cut(len(p.pendingWindows), len(p.pending))
	windows, names, values, changes, refs := p.all.windows, p.all.names, p.all.values, p.all.changes, p.all.refs
	nw, nc := 0, 0
	for _, c := range p.calls {
		c.Windows, c.names, c.values = windows[nw:nw:nw+c.windows], names[nw:nw:nw+c.windows], values[nw:nw:nw+c.windows]
		c.Changes = changes[nc : nc : nc+c.changes]
		c.refs = refs[nc : nc : nc+c.changes]
		nw, nc = nw+c.windows, nc+c.changes
	}
	for i := range p.pendingWindows {
		w := &p.pendingWindows[i]
		c, r := w.call, w.rule
		c.Windows = append(c.Windows, lua.Window{Length: r.Window, Threshold: r.Threshold, Sliding: r.WindowType == alert.Sliding, Lateness: r.Lateness,
			Keep: keepOf(r, w.name.Fixed), From: r.evidenceFrom()})
		c.names, c.values = append(c.names, w.name), append(c.values, w.values)
	}
	p.keys.NameWindows(windows, names)
	for i := range p.pending {
		ch := &p.pending[i]
		ch.call.Changes = append(ch.call.Changes, ch.ch)
		ch.call.refs = append(ch.call.refs, ch.ref)
	}
}

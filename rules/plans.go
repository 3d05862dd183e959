package rules

import (
	"sync"

	"github.com/fraudwatch/fraudwatch/lua"
)

// plans keeps the plans of batches done, emptied, for the batches to come:
// a plan's maps and slices, and its script calls' arguments, made afresh
// for every batch took about a third of fraudwatch's CPU an event, half in
// the garbage collector (docs/performance.md, fraudwatch's own share).
// Partitions are handled concurrently, a plan each; a sync.Pool lets the
// collector take the plans back when batches stop coming.
type plans struct{ pool sync.Pool }

// get returns an empty plan for a batch of about hint changes and rules
// rules.
func (ps *plans) get(keys lua.Keys, hint, rules int) *plan {
	p, _ := ps.pool.Get().(*plan)
	if p == nil {
		p = &plan{pendingWindows: make([]pendingWindow, 0, hint), pending: make([]pendingChange, 0, hint), values: make([]string, 0, hint)}
	}
	if p.keys != keys {
		p.offsets = [lua.Buckets]string{} // named with other keys
	}
	p.keys = keys
	p.tally = reuse(p.tally, rules)
	return p
}

// put empties a plan that nothing reads any more (its batch's alerts and
// evidence hold copies, or strings, of what they took from it) and keeps
// it. Emptied, it holds nothing of its batch: neither the events' strings
// nor the rules.
func (ps *plans) put(p *plan) {
	for _, c := range p.made[:p.used] {
		*c = call{}
	}
	p.used = 0
	p.calls = empty(p.calls)
	for _, o := range p.open[:p.opened] {
		o.src = ""
		for f := range o.family {
			clear(o.family[f][:])
		}
	}
	p.opened = 0
	p.pendingWindows, p.pending = empty(p.pendingWindows), empty(p.pending)
	p.event, p.tooMany, p.values = empty(p.event[:cap(p.event)]), empty(p.tooMany), empty(p.values)
	p.tally = empty(p.tally)
	p.all.empty()
	p.evidence.empty()
	if p.batch != nil {
		p.batch.Reset()
	}
	ps.pool.Put(p)
}

// newCall returns an empty call: one of the plan's, made by an earlier
// batch, or a new one.
func (p *plan) newCall() *call {
	if p.used == len(p.made) {
		p.made = append(p.made, &call{})
	}
	c := p.made[p.used]
	p.used++
	return c
}

// buffers are the slices finish cuts every call's windows and changes
// from, kept from batch to batch.
type buffers struct {
	windows []lua.Window
	names   []lua.WindowName
	values  [][]string
	changes []lua.Change
	refs    []ref
}

// cut returns the buffers with room for windows and changes.
func (b *buffers) cut(windows, changes int) {
	b.windows, b.names, b.values = reuse(b.windows, windows), reuse(b.names, windows), reuse(b.values, windows)
	b.changes, b.refs = reuse(b.changes, changes), reuse(b.refs, changes)
}

// empty drops what the buffers hold of a batch.
func (b *buffers) empty() {
	b.windows, b.names, b.values = empty(b.windows), empty(b.names), empty(b.values)
	b.changes, b.refs = empty(b.changes), empty(b.refs)
}

// reuse returns s with length n, zeroed: s's own array when it has room,
// which put left zeroed.
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// empty returns s emptied, its elements zeroed so that it holds nothing
// of what they pointed to. Past its length it holds nothing already: the
// plan's slices only grow in a batch, but for p.event, which put clears
// whole, and values, whose truncations cut clears.
func empty[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// cut truncates s to n, zeroing what it drops.
func cut[T any](s []T, n int) []T {
	clear(s[n:])
	return s[:n]
}

package rules

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// DefaultEvidence is how many orders an alert lists when its rule does not
// say (evidence).
const DefaultEvidence = 10

// MaxEvidence bounds a rule's evidence.
const MaxEvidence = lua.MaxEvidence

// evidenceFrom is the value from which a window keeps evidence. A count or
// distinct window's value grows by at most one an order, so the orders
// counted at threshold - Evidence + 1 and above are the last Evidence up
// to the crossing: the orders the alert's sentence speaks of, all of them
// when the threshold is within Evidence. An amount has no such bound: it
// keeps from half its threshold. Windows further from their threshold keep
// none, and neither do windows past it (their crossing is behind them).
func (r *Rule) evidenceFrom() int64 {
	if r.Metric == alert.Amount {
		return max((r.Threshold+1)/2, 1)
	}
	return max(r.Threshold-int64(r.Evidence)+1, 1)
}

// evidence is a batch's evidence_add calls, one per hash tag (as many as
// its bounds need), and what each entry that is a crossing answers. Its
// plan keeps it, emptied, for the next batch (empty): its maps, calls and
// slices made afresh took a tenth of planning's time in (b)'s profile.
type evidence struct {
	calls []*lua.Evidence
	made  []*lua.Evidence        // the calls batches before made, for newCall
	open  map[string]int         // the call each hash tag adds to now
	in    map[windowOf]windowRef // where a window is in the calls
	lists [][]listOf             // per call, per entry marked List
	// reads are the crossings of fixed windows whose counting call wrote
	// their evidence, and keys their counters, read once the calls ran.
	reads []listOf
	keys  []string
}

// read asks for the evidence a fixed window's counting call wrote, for the
// crossing of alert alertIndex.
func (x *evidence) read(p *plan, r *active, alertIndex int, counter string) *evidence {
	if x == nil {
		if p.evidence.open == nil {
			p.evidence.open, p.evidence.in = map[string]int{}, map[windowOf]windowRef{}
		}
		x = &p.evidence
	}
	x.reads = append(x.reads, listOf{alertIndex, r})
	x.keys = append(x.keys, counter)
	return x
}

// newCall starts a call: one a batch before made, emptied, or a new one.
func (x *evidence) newCall() *lua.Evidence {
	n := len(x.calls)
	if n == len(x.made) {
		x.made = append(x.made, &lua.Evidence{})
	}
	x.calls = append(x.calls, x.made[n])
	if n < cap(x.lists) {
		x.lists = x.lists[:n+1] // an emptied list, its array kept
	} else {
		x.lists = append(x.lists, nil)
	}
	return x.made[n]
}

// empty drops what the evidence holds of its batch, keeping its maps and
// arrays. A call's Lists, which its alerts' evidence was read from, are
// dropped, not reused.
func (x *evidence) empty() {
	for _, c := range x.calls {
		c.Windows, c.Entries, c.Lists = empty(c.Windows), empty(c.Entries), nil
	}
	for i := range x.lists {
		x.lists[i] = empty(x.lists[i])
	}
	x.calls, x.lists = empty(x.calls), x.lists[:0]
	x.reads, x.keys = empty(x.reads), empty(x.keys)
	clear(x.open)
	clear(x.in)
}

type windowRef struct{ call, index int }

// listOf is what one crossing's list is for: its alert and rule.
type listOf struct {
	alert int
	rule  *active
}

// add makes an order's entry in its window's evidence when the window's
// value is near the rule's threshold and below it, or the order crossed
// it; alertIndex is then the index of its alert, else -1. window is the
// window's key and g its group, as the plan made them. A nil *evidence
// starts with the plan's (p.evidence).
func (x *evidence) add(p *plan, r *active, ev *event.Event, current int64, alertIndex int, window string, g lua.Group) *evidence {
	// A fixed count or amount window's counting call keeps its evidence
	// itself (incr_and_check): read, not added.
	if r.Evidence <= 0 || r.kind.Counter() || ev.Type == event.Refund ||
		(alertIndex < 0 && (current < r.evidenceFrom() || current >= r.Threshold)) {
		return x
	}
	if x == nil {
		if p.evidence.open == nil {
			p.evidence.open, p.evidence.in = map[string]int{}, map[windowOf]windowRef{}
		}
		x = &p.evidence
	}
	c, ok := x.open[g.Tag()]
	if !ok || len(x.calls[c].Entries) == lua.MaxChanges {
		c = len(x.calls)
		x.open[g.Tag()] = c
		x.newCall()
	}
	call := x.calls[c]
	w, known := x.in[windowOf{r, g}]
	if !known || w.call != c {
		if len(call.Windows) == lua.MaxWindows {
			c = len(x.calls)
			x.open[g.Tag()] = c
			call = x.newCall()
		}
		w = windowRef{c, len(call.Windows)}
		x.in[windowOf{r, g}] = w
		call.Windows = append(call.Windows, lua.EvidenceWindow{Key: p.keys.Evidence(g, r.state), Window: window,
			Keep: r.Evidence, TTL: max(r.Window+r.Lateness, time.Second), Slides: r.WindowType == alert.Sliding})
	}
	var value string
	if r.Metric == alert.Distinct {
		value, _ = ev.Field(r.Field)
	}
	call.Entries = append(call.Entries, lua.EvidenceEntry{Window: w.index, Text: encodeEvidence(ev, current, value), List: alertIndex >= 0})
	if alertIndex >= 0 {
		x.lists[c] = append(x.lists[c], listOf{alertIndex, r})
	}
	return x
}

// addEvidence runs the batch's evidence calls and gives each crossing's
// alert its list. A call the script refuses costs its alerts their
// evidence, not their delivery; Redis failing fails the batch, which is
// retried.
func (e *Engine) addEvidence(ctx context.Context, x *evidence, alerts []alert.Alert) error {
	if x == nil {
		return nil
	}
	if len(x.keys) > 0 {
		lists, err := e.counters.CounterEvidence(ctx, x.keys)
		if err != nil {
			return fmt.Errorf("rules: read the evidence of %d crossings: %w", len(x.keys), err)
		}
		for j, list := range lists {
			of := x.reads[j]
			a := &alerts[of.alert]
			a.Evidence = evidenceOf(ownFirst(list, a.EventID), a, of.rule)
		}
	}
	err := e.counters.AddEvidence(ctx, x.calls)
	if err != nil && !errors.Is(err, lua.ErrInvalidArguments) && !errors.Is(err, lua.ErrUnexpectedReply) {
		return fmt.Errorf("rules: eval %s: %w", lua.EvidenceAddName, err)
	}
	if err != nil {
		e.log.Warn("evidence refused; alerts go without it", "err", err)
	}
	for c, call := range x.calls {
		if len(call.Lists) != len(x.lists[c]) {
			continue
		}
		for j, list := range call.Lists {
			of := x.lists[c][j]
			a := &alerts[of.alert]
			a.Evidence = evidenceOf(list, a, of.rule)
		}
	}
	return nil
}

// evidenceOf reads a crossing's list, its own entry first: each order once
// (a redelivered batch writes its entries again), none that another
// replica counted after the crossing (between its count and its entry),
// none a sliding window no longer counts; a fixed window's by the value
// each order took its window to, highest first.
func evidenceOf(list []string, a *alert.Alert, r *active) []alert.Evidence {
	var entries []entry
	seen := map[string]bool{}
	for k, text := range list {
		e, ok := decodeEvidence(text)
		switch {
		case !ok || seen[e.EventID]:
		case k == 0:
			entries = append(entries, e) // the crossing order
		case e.current >= a.Current:
		case r.WindowType == alert.Sliding && !e.At.After(a.At.Add(-r.Window)):
		default:
			entries = append(entries, e)
		}
		if ok {
			seen[e.EventID] = true
		}
	}
	if r.WindowType != alert.Sliding && !r.kind.Counter() && len(entries) > 1 {
		// A fixed distinct window's value only grows with its orders,
		// whatever order replicas racing on it wrote them in. A counter's
		// entries come sorted by the count each took its window to
		// (lua.Scripts.CounterEvidence), which their values (0) do not say.
		slices.SortStableFunc(entries[1:], func(a, b entry) int { return cmp.Compare(b.current, a.current) })
	}
	out := make([]alert.Evidence, 0, min(len(entries), r.Evidence))
	for _, e := range entries[:min(len(entries), r.Evidence)] {
		out = append(out, e.Evidence)
	}
	return out
}

// ownFirst is a counter's entries, by count, highest first, from the
// crossing's own on (the highest, but where another replica counted orders
// after it, or a refund took the window below its threshold and orders
// since were kept), or all when it is not there.
func ownFirst(list []string, eventID string) []string {
	for k, text := range list {
		if e, ok := decodeEvidence(text); ok && e.EventID == eventID {
			return list[k:]
		}
	}
	return list
}

// entry is an order of a window's evidence, with the window's value after
// it.
type entry struct {
	alert.Evidence
	current int64
}

// Bounds of an evidence entry's strings: within lua.MaxEvidenceText
// together, with the numbers and separators.
const (
	maxEvidenceOrder = 128
	maxEvidenceValue = 128
)

// sep separates an entry's fields; strings that hold it, or the separator
// of entries, get a space instead.
const sep = "\x1f"

var separators = strings.NewReplacer(sep, " ", lua.EvidenceSep, " ")

// keepOf is how many entries a fixed window of r keeps in its hash
// (lua.Window.Keep): none for other windows, whose evidence evidence_add
// writes.
func keepOf(r *active, fixed bool) int {
	if !fixed {
		return 0
	}
	return r.Evidence
}

// encodeEvidence writes an order's entry in a sliding or distinct window's
// list (evidence_add), short, for Redis holds one an order near a
// threshold: its time (Unix milliseconds), amount and the window's value
// after it in base 36, its event id (left out, one field fewer, when it is
// the order id), order id and value.
func encodeEvidence(ev *event.Event, current int64, value string) string {
	// Written into one buffer, on the stack when it fits, and made a
	// string once: joined with +, an entry took five allocations.
	var buf [192]byte
	return string(appendEntry(buf[:0], ev, current, value, true))
}

// encodeCounterEntry writes an order's entry in a fixed count or amount
// window's hash (incr_and_check), whose field names the count the order
// took the window to: its time, amount, event id (left out when it is the
// order id) and order id, without encodeEvidence's value after it and
// value (a counter has none), three bytes an entry fewer.
func encodeCounterEntry(ev *event.Event) string {
	var buf [192]byte
	return string(appendEntry(buf[:0], ev, 0, "", false))
}

// appendEntry appends an order's entry to b: encodeEvidence's form when
// listed, else encodeCounterEntry's.
func appendEntry(b []byte, ev *event.Event, current int64, value string, listed bool) []byte {
	at := ev.OccurredAt
	if at.IsZero() {
		at = ev.Source.Time
	}
	clean := func(s string, n int) string { return separators.Replace(clipText(s, n)) }
	id, order := clean(ev.EventID, event.MaxIDBytes), clean(ev.OrderID, maxEvidenceOrder)
	b = strconv.AppendInt(b, at.UnixMilli(), 36)
	b = strconv.AppendInt(append(b, sep...), ev.Amount, 36)
	if listed {
		b = strconv.AppendInt(append(b, sep...), current, 36)
	}
	b = append(b, sep...)
	if id != order {
		b = append(append(b, id...), sep...)
	}
	b = append(b, order...)
	if listed {
		b = append(append(b, sep...), clean(value, maxEvidenceValue)...)
	}
	return b
}

// decodeEvidence reads an entry of either form: encodeEvidence's (5 or 6
// fields) or encodeCounterEntry's (3 or 4), whose value after it is 0 and
// value "".
func decodeEvidence(text string) (entry, bool) {
	f := strings.SplitN(text, sep, 6)
	switch len(f) {
	case 3: // a counter's, the event id the order id
		f = []string{f[0], f[1], "0", f[2], f[2], ""}
	case 4: // a counter's
		f = []string{f[0], f[1], "0", f[2], f[3], ""}
	case 5: // the event id is the order id
		f = []string{f[0], f[1], f[2], f[3], f[3], f[4]}
	case 6:
	default:
		return entry{}, false
	}
	at, err1 := strconv.ParseInt(f[0], 36, 64)
	amount, err2 := strconv.ParseInt(f[1], 36, 64)
	current, err3 := strconv.ParseInt(f[2], 36, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return entry{}, false
	}
	var t time.Time
	if at > 0 {
		t = time.UnixMilli(at).UTC()
	}
	return entry{alert.Evidence{At: t, Amount: amount, EventID: f[3], OrderID: f[4], Value: f[5]}, current}, true
}

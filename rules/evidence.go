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
// its bounds need), and what each entry that is a crossing answers.
type evidence struct {
	calls []*lua.Evidence
	open  map[string]int         // the call each hash tag adds to now
	in    map[windowOf]windowRef // where a window is in the calls
	lists [][]listOf             // per call, per entry marked List
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
// starts one.
func (x *evidence) add(keys lua.Keys, r *active, ev *event.Event, current int64, alertIndex int, window string, g lua.Group) *evidence {
	if r.Evidence <= 0 || ev.Type == event.Refund ||
		(alertIndex < 0 && (current < r.evidenceFrom() || current >= r.Threshold)) {
		return x
	}
	if x == nil {
		x = &evidence{open: map[string]int{}, in: map[windowOf]windowRef{}}
	}
	c, ok := x.open[g.Tag()]
	if !ok || len(x.calls[c].Entries) == lua.MaxChanges {
		c, ok = len(x.calls), false
		x.open[g.Tag()] = c
		x.calls = append(x.calls, &lua.Evidence{})
		x.lists = append(x.lists, nil)
	}
	call := x.calls[c]
	w, known := x.in[windowOf{r, g}]
	if !known || w.call != c {
		if len(call.Windows) == lua.MaxWindows {
			c = len(x.calls)
			x.open[g.Tag()] = c
			call = &lua.Evidence{}
			x.calls = append(x.calls, call)
			x.lists = append(x.lists, nil)
		}
		w = windowRef{c, len(call.Windows)}
		x.in[windowOf{r, g}] = w
		// A fixed window's counter holds its evidence after its count: it
		// is named as both keys (evidence_add); other windows are hashes,
		// and keep theirs under a key of its own.
		key := window
		if !r.kind.Counter() {
			key = keys.Evidence(g, r.state)
		}
		call.Windows = append(call.Windows, lua.EvidenceWindow{Key: key, Window: window,
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
// none a sliding window no longer counts; a fixed window's in the order
// they counted in.
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
	if r.WindowType != alert.Sliding && len(entries) > 1 {
		// A fixed window's value only grows with its orders (a refund
		// aside), whatever order replicas racing on it wrote them in.
		slices.SortStableFunc(entries[1:], func(a, b entry) int { return cmp.Compare(b.current, a.current) })
	}
	out := make([]alert.Evidence, 0, min(len(entries), r.Evidence))
	for _, e := range entries[:min(len(entries), r.Evidence)] {
		out = append(out, e.Evidence)
	}
	return out
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

// encodeEvidence writes an order's entry, short, for Redis holds one an
// order near a threshold: its time (Unix milliseconds), amount and the
// window's value after it in base 36, its event id (left out, one field
// fewer, when it is the order id), order id and value.
func encodeEvidence(ev *event.Event, current int64, value string) string {
	at := ev.OccurredAt
	if at.IsZero() {
		at = ev.Source.Time
	}
	clean := func(s string, n int) string { return separators.Replace(clipText(s, n)) }
	id, order := clean(ev.EventID, event.MaxIDBytes), clean(ev.OrderID, maxEvidenceOrder)
	if id == order {
		id = ""
	} else {
		id += sep
	}
	return strconv.FormatInt(at.UnixMilli(), 36) + sep + strconv.FormatInt(ev.Amount, 36) + sep + strconv.FormatInt(current, 36) + sep +
		id + order + sep + clean(value, maxEvidenceValue)
}

func decodeEvidence(text string) (entry, bool) {
	f := strings.SplitN(text, sep, 6)
	if len(f) == 5 { // the event id is the order id
		f = []string{f[0], f[1], f[2], f[3], f[3], f[4]}
	}
	if len(f) != 6 {
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

package rules

import (
	"cmp"
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

// evidenceOf reads a crossing's list, its own entry first (an entry that
// does not decode, whoever wrote it, is left out): each order once
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

// evidenceText appends an order's entry as the counting script is sent
// it to the plan's texts: its time, amount, an empty field where the
// script puts the window's value after the order (which only the script
// knows), event id, order id and the value of field (none: ""), when the
// event has it (lua/evidence.lua).
func (p *plan) evidenceText(ev *event.Event, field string) span {
	at := ev.OccurredAt
	if at.IsZero() {
		at = ev.Source.Time
	}
	var value string
	if field != "" {
		value, _ = ev.Field(field)
	}
	clean := func(s string, n int) string { return separators.Replace(clipText(s, n)) }
	from := len(p.texts)
	b := strconv.AppendInt(p.texts, at.UnixMilli(), 10)
	b = append(b, sep...)
	b = strconv.AppendInt(b, ev.Amount, 10)
	b = append(append(b, sep...), sep...)
	b = append(b, clean(ev.EventID, event.MaxIDBytes)...)
	b = append(append(b, sep...), clean(ev.OrderID, maxEvidenceOrder)...)
	b = append(append(b, sep...), clean(value, maxEvidenceValue)...)
	p.texts = b
	return span{int32(from), int32(len(b))}
}

func decodeEvidence(text string) (entry, bool) {
	f := strings.SplitN(text, sep, 6)
	if len(f) != 6 {
		return entry{}, false
	}
	at, err1 := strconv.ParseInt(f[0], 10, 64)
	amount, err2 := strconv.ParseInt(f[1], 10, 64)
	current, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return entry{}, false
	}
	var t time.Time
	if at > 0 {
		t = time.UnixMilli(at).UTC()
	}
	return entry{alert.Evidence{At: t, Amount: amount, EventID: f[3], OrderID: f[4], Value: f[5]}, current}, true
}

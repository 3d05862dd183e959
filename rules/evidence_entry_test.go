package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// An evidence entry is short (Redis holds one an order near a threshold)
// and gives back all an alert shows of its order.
func TestEvidenceEntriesAreShortAndWhole(t *testing.T) {
	at := time.Date(2026, 12, 6, 14, 0, 0, 123e6, time.UTC)
	tests := []struct {
		name    string
		ev      event.Event
		current int64
		value   string
		want    alert.Evidence
		most    int // bytes
	}{
		// (b)'s: 44 bytes in decimal with the event id.
		{"an order of the bench", event.Event{EventID: "ev-123456", OrderID: "ord-123456", Amount: 150_000, OccurredAt: at}, 7, "",
			alert.Evidence{EventID: "ev-123456", OrderID: "ord-123456", Amount: 150_000, At: at}, 37},
		{"its event id the order id", event.Event{EventID: "ord-123456", OrderID: "ord-123456", Amount: 150_000, OccurredAt: at}, 7, "",
			alert.Evidence{EventID: "ord-123456", OrderID: "ord-123456", Amount: 150_000, At: at}, 27},
		{"a distinct value", event.Event{EventID: "e1", OrderID: "o1", Amount: 1, OccurredAt: at}, 3, "card-9",
			alert.Evidence{EventID: "e1", OrderID: "o1", Amount: 1, At: at, Value: "card-9"}, 25},
		{"the record's time", event.Event{EventID: "e1", OrderID: "o1", Amount: 1, Source: event.Source{Time: at}}, 3, "",
			alert.Evidence{EventID: "e1", OrderID: "o1", Amount: 1, At: at}, 19},
		{"separators in its strings", event.Event{EventID: "e\x1f1", OrderID: "o\x1e1", Amount: 1, OccurredAt: at}, 3, "v\x1f",
			alert.Evidence{EventID: "e 1", OrderID: "o 1", Amount: 1, At: at, Value: "v "}, 25},
		{"an empty event id", event.Event{OrderID: "o1", Amount: 1, OccurredAt: at}, 3, "",
			alert.Evidence{OrderID: "o1", Amount: 1, At: at}, 19},
		{"no time", event.Event{EventID: "e1", OrderID: "o1", Amount: 1}, 3, "",
			alert.Evidence{EventID: "e1", OrderID: "o1", Amount: 1}, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := encodeEvidence(&tt.ev, tt.current, tt.value)
			if len(text) > tt.most {
				t.Errorf("entry %q: %d bytes, want at most %d", text, len(text), tt.most)
			}
			got, ok := decodeEvidence(text)
			if !ok || got.Evidence != tt.want || got.current != tt.current {
				t.Errorf("entry %q reads as %+v, %v; want %+v, current %d", text, got, ok, tt.want, tt.current)
			}
		})
	}
	for _, text := range []string{"", "1\x1f2", "!\x1f2\x1f3", "!\x1f2\x1f3\x1fe\x1fo\x1fv", strings.Repeat("\x1f", 6)} {
		if e, ok := decodeEvidence(text); ok {
			t.Errorf("%q reads as %+v", text, e)
		}
	}
}

// A fixed window's entry (incr_and_check keeps it in a field named by the
// count it took the window to) leaves out the list's value after it and
// value: three bytes fewer, and it reads back whole. An entry of the form
// before, which windows open at an upgrade hold, still reads.
func TestCounterEntriesAreShorterAndWhole(t *testing.T) {
	at := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	for _, ev := range []event.Event{
		{EventID: "ev-123456", OrderID: "ord-123456", Amount: 150_000, OccurredAt: at},
		{EventID: "ord-1", OrderID: "ord-1", Amount: 7, OccurredAt: at},
		{EventID: "e\x1f1", OrderID: "o\x1e1", Amount: 1, OccurredAt: at},
		{OrderID: "o1", Amount: 1},
	} {
		text, before := encodeCounterEntry(&ev), encodeEvidence(&ev, 0, "")
		if len(text) != len(before)-3 {
			t.Errorf("entry %q: %d bytes, want 3 fewer than %q's", text, len(text), before)
		}
		for _, form := range []string{text, before} {
			got, ok := decodeEvidence(form)
			want, _ := decodeEvidence(before)
			if !ok || got != want || got.OrderID != strings.ReplaceAll(ev.OrderID, "\x1e", " ") {
				t.Errorf("entry %q reads as %+v, %v; want %+v", form, got, ok, want)
			}
		}
	}
}

// A fixed count or amount window's entries come by the count each took its
// window to, highest first (lua.Scripts.CounterEvidence). The alert lists
// them from its own crossing down: entries another replica counted after
// the crossing, before the engine read the window, are higher and left
// out; when the crossing's own entry is not there (trimmed, or written by
// another), every entry is kept.
func TestACountersEntriesListFromTheCrossing(t *testing.T) {
	at := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	entryOf := func(id string) string {
		return encodeCounterEntry(&event.Event{EventID: "e" + id, OrderID: "o" + id, Amount: 1, OccurredAt: at})
	}
	r := &active{Rule: Rule{Name: "r", Metric: alert.Count, Threshold: 3, Evidence: 10}, kind: lua.Count}
	for _, tc := range []struct {
		name  string
		list  []string // by count, highest first
		event string   // the crossing's event id
		want  []string // the listed orders
	}{
		{"its own the highest", []string{entryOf("3"), entryOf("2"), entryOf("1")}, "e3", []string{"o3", "o2", "o1"}},
		{"two counted after it", []string{entryOf("5"), entryOf("4"), entryOf("3"), entryOf("2"), entryOf("1")}, "e3",
			[]string{"o3", "o2", "o1"}},
		{"its own not there", []string{entryOf("2"), entryOf("1")}, "e3", []string{"o2", "o1"}},
		{"nothing kept", nil, "e3", nil},
	} {
		a := &alert.Alert{EventID: tc.event, OrderID: "o" + tc.event[1:], Current: 3}
		var got []string
		for _, e := range evidenceOf(ownFirst(tc.list, tc.event), a, r) {
			got = append(got, e.OrderID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}
}

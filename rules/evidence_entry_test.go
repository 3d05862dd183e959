package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
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
	for _, text := range []string{"", "1\x1f2\x1f3", "!\x1f2\x1f3\x1fe\x1fo\x1fv", strings.Repeat("\x1f", 6)} {
		if e, ok := decodeEvidence(text); ok {
			t.Errorf("%q reads as %+v", text, e)
		}
	}
}

package dispatch_test

import (
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

// A receiver added to a running deployment reads the alerts topic from its
// start in a group of its own, and is sent only what was published since
// it first ran, in any replica (docs/receivers.md): an alert of the
// topic's history is counted and skipped, one published after is sent; a
// second replica started later keeps the first's time, so an alert
// published between the two starts is still sent.
func TestANewReceiverIsNotSentTheTopicsHistory(t *testing.T) {
	n := renamed{&digestNotifier{}, "cases"}
	first := testDispatcher(t, n, dispatch.DispatcherConfig{SkipHistory: true})
	first.knowRule()
	old := first.alert("g-old", "evt-old")
	old.PublishedAt = old.PublishedAt.Add(-time.Hour)
	between := first.alert("g-between", "evt-between")
	time.Sleep(5 * time.Millisecond) // the second replica starts after the alert
	cfg := dispatch.DispatcherConfig{SkipHistory: true, KeyPrefix: first.pfx}
	fresh := first.alert("g-new", "evt-new")
	// The first replica takes the history's alert: it is skipped.
	if n2, err := first.d.HandleMessages(t.Context(), []kafka.Message{first.message(t, old, 1)}); n2 != 1 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n2, err)
	}
	if n.singles != 0 {
		t.Fatalf("%d alerts sent, want none: the alert was published an hour before the receiver ran", n.singles)
	}
	if got := first.metric(t, "fraudwatch_alerts_before_receiver_total", "rule", old.Rule); got != 1 {
		t.Errorf("fraudwatch_alerts_before_receiver_total = %v, want 1", got)
	}
	second := testDispatcher(t, n, cfg)
	second.knowRule()
	msgs := []kafka.Message{second.message(t, between, 2), second.message(t, fresh, 3)}
	if n2, err := second.d.HandleMessages(t.Context(), msgs); n2 != 2 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n2, err)
	}
	if n.singles != 2 {
		t.Errorf("%d alerts sent, want the two published since the receiver first ran", n.singles)
	}
}

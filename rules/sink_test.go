package rules_test

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

func TestEngineShadowRuleReachesSink(t *testing.T) {
	shadow := rule("trial", alert.Count, 1, "customer_id")
	shadow.Mode = alert.ModeShadow
	h := newHarness(t, shadow)
	h.handle(ev(t, event.Order, "order_id", "o1"))
	got := h.sink.got()
	if len(got) != 1 || got[0].Mode != "shadow" || !got[0].Shadow() {
		t.Fatalf("alerts %+v, want one in shadow mode", got)
	}
}

func TestEngineSinkError(t *testing.T) {
	h := newHarness(t, rule("quiet", alert.Count, 5, "customer_id"), rule("loud", alert.Count, 1, "customer_id"))
	boom := errors.New("queue closed")
	h.sink.err = boom
	e := ev(t, event.Order, "order_id", "o1")
	h.place(e)
	if _, err := h.engine.Handle(t.Context(), []*event.Event{e}); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want it to wrap the sink's error", err)
	}
	// The batch is retried: the crossing event is answered "crossed" again
	// and its alert handed off again.
	h.sink.err = nil
	h.handle(e)
	if got := h.crossedBy("loud"); !reflect.DeepEqual(got, []string{"evt-o1", "evt-o1"}) {
		t.Fatalf("alerts handed off on %v, want evt-o1 twice", got)
	}
}

// An alert the alerts topic refuses for its size would be refused on every
// retry: its event is unprocessable (dead-lettered) instead, the batch is
// done, and the other alerts are on the topic.
func TestEngineAlertRefusedForSizeMakesItsEventUnprocessable(t *testing.T) {
	k := kafkatest.New(t)
	name := k.Topic(t, "alerts", 1, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: "2048"})
	topic, err := dispatch.NewTopic(dispatch.TopicConfig{Brokers: k.Brokers, Topic: name})
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: redistest.Prefix(t)},
		[]rules.Rule{rule("one", alert.Count, 1, "customer_id")}, scripts, topic,
		slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Clipped, its order id is still 6 KB of JSON (\u003c a byte).
	big := ev(t, event.Order, "order_id", "PRIVATE-"+strings.Repeat("<", 4000), "event_id", "e-big", "customer_id", "c-big")
	small := ev(t, event.Order, "order_id", "o-small", "customer_id", "c-small")
	big.Source = event.Source{Topic: "orders", Offset: 7}
	small.Source = event.Source{Topic: "orders", Offset: 8}

	unprocessable, err := e.Handle(t.Context(), []*event.Event{big, small})
	if err != nil {
		t.Fatalf("Handle = %v, want the batch done", err)
	}
	if len(unprocessable) != 1 || !errors.Is(unprocessable[0], event.ErrUnprocessable) {
		t.Fatalf("unprocessable = %v, want event 0 marked event.ErrUnprocessable", unprocessable)
	}
	if msg := unprocessable[0].Error(); !strings.Contains(msg, "one") || strings.Contains(msg, "PRIVATE") {
		t.Errorf("error %q: want it to name the rule and not the event (it travels in a header)", msg)
	}
	msgs := k.ReadAll(t, name, 1, 20*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("alerts on the topic = %d, want 1", len(msgs))
	}
	if a, err := alert.Decode(msgs[0].Value); err != nil || a.OrderID != "o-small" {
		t.Fatalf("the alert on the topic is %+v (%v), want o-small's", a, err)
	}
	if out := logs.String(); !strings.Contains(out, `"offset":7`) || strings.Contains(out, "PRIVATE") {
		t.Errorf("log does not name the source, or names the order:\n%s", out)
	}
}

// How Handle takes the sink's refusals: alerts refused for their size make
// their events unprocessable; anything else is a failed batch.
func TestEngineSinkRefusals(t *testing.T) {
	tooLarge := func(idx ...int) error {
		return &alert.TooLargeError{Refused: idx, Err: errors.New("message too large")}
	}
	tests := []struct {
		name              string
		err               error
		wantErr           bool
		wantUnprocessable []int // indexes of events
	}{
		{name: "the first alert refused", err: tooLarge(0), wantUnprocessable: []int{0}},
		{name: "both refused", err: tooLarge(0, 1), wantUnprocessable: []int{0, 2}},
		{name: "a refusal wrapped", err: fmt.Errorf("sink: %w", tooLarge(1)), wantUnprocessable: []int{2}},
		{name: "an index out of range is a failed batch", err: tooLarge(5), wantErr: true},
		{name: "no alert named is a failed batch", err: tooLarge(), wantErr: true},
		{name: "any other error is a failed batch", err: errors.New("broker down"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, rule("one", alert.Count, 1, "customer_id"))
			h.sink.err = tt.err
			// Events 0 and 2 cross (alerts 0 and 1); event 1 is a second
			// order of event 0's group.
			evs := []*event.Event{
				ev(t, event.Order, "order_id", "o1", "customer_id", "a"),
				ev(t, event.Order, "order_id", "o2", "customer_id", "a"),
				ev(t, event.Order, "order_id", "o3", "customer_id", "b"),
			}
			h.place(evs...)
			unprocessable, err := h.engine.Handle(t.Context(), evs)
			if tt.wantErr {
				if err == nil || !errors.Is(err, tt.err) {
					t.Fatalf("Handle = %v, %v; want an error wrapping %v", unprocessable, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for i, err := range unprocessable {
				if !errors.Is(err, event.ErrUnprocessable) {
					t.Errorf("event %d: %v, want event.ErrUnprocessable", i, err)
				}
				got = append(got, i)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantUnprocessable) {
				t.Fatalf("unprocessable events %v, want %v", got, tt.wantUnprocessable)
			}
		})
	}
}

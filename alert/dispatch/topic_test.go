package dispatch_test

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
)

func TestTopicRoundTrip(t *testing.T) {
	k := kafkatest.New(t)
	name := k.Topic(t, "alerts", 2)
	topic, err := dispatch.NewTopic(dispatch.TopicConfig{Brokers: k.Brokers, Topic: name})
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	a := sampleAlert()
	a.ID, a.RecordKey = a.Rule+"/"+a.EventID, "fw:{r:g}:alert:1"
	a.At = a.At.UTC().Truncate(time.Millisecond)
	if err := topic.Publish(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	msgs := k.ReadAll(t, name, 1, 20*time.Second)
	if string(msgs[0].Key) != a.CooldownKey {
		t.Errorf("key = %q, want the cooldown key: one group's alerts on one partition", msgs[0].Key)
	}
	got, err := alert.Decode(msgs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if !got.At.Equal(a.At) {
		t.Errorf("At = %v, want %v", got.At, a.At)
	}
	got.At = a.At
	if !reflect.DeepEqual(got, a) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, a)
	}
	if err := topic.Close(); err != nil {
		t.Fatal(err)
	}
	if err := topic.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
}

// The names of an alert's fields on the topic are what docs/alerts.md
// section gives: other consumers of the topic read them.
func TestTopicFieldNames(t *testing.T) {
	a := sampleAlert()
	a.ID, a.Channel, a.Field, a.Group, a.WindowType = "r/e", "#fraud", "ip", "g", alert.Sliding
	a.RecordKey, a.SilenceKey, a.RuleSilence = "k1", "k2", "k3"
	a.Evidence = []alert.Evidence{{OrderID: "o", EventID: "e", Amount: 1, At: a.At, Value: "v"}}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	want := []string{"at", "channel", "cooldown_key", "cooldown_ns", "currency", "current", "description", "event_id",
		"evidence", "field", "group", "group_by", "group_values", "id", "metric", "mode", "order_id", "record_key",
		"rule", "rule_silence_key", "severity", "silence_key", "threshold", "window_ns", "window_type"}
	if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, want) {
		t.Errorf("fields %q,\nwant %q", got, want)
	}
	var evidence []map[string]json.RawMessage
	if err := json.Unmarshal(fields["evidence"], &evidence); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(evidence[0])), []string{"amount", "at", "event_id", "order_id", "value"}; !slices.Equal(got, want) {
		t.Errorf("evidence fields %q, want %q", got, want)
	}
}

// An alert the alerts topic (or the writer) refuses for its size is
// reported as such, by its index, once the others are written: retrying it
// would hold its partition for ever. Alerts that fit alone but not
// together in one batch are all written.
func TestPublishReportsAlertsTooLargeForTheTopic(t *testing.T) {
	const topicMax = 4096 // max.message.bytes of the topic
	sized := func(id string, description int) alert.Alert {
		a := sampleAlert()
		id = "evt-private-" + id
		a.ID, a.EventID, a.RecordKey = a.Rule+"/"+id, id, "fw:{r:g}:alert:"+id
		a.Description = strings.Repeat("d", description)
		return a
	}
	tests := []struct {
		name   string
		alerts []alert.Alert
		// wantRefused lists the indexes refused; nil: no error.
		wantRefused []int
	}{
		{name: "all fit", alerts: []alert.Alert{sized("a", 10), sized("b", 10)}},
		{name: "together larger than the topic takes, each fits",
			alerts: []alert.Alert{sized("a", 1500), sized("b", 1500), sized("c", 1500)}},
		{name: "one too large for the topic", alerts: []alert.Alert{sized("a", 10), sized("big", 8000), sized("c", 10)},
			wantRefused: []int{1}},
		{name: "two too large, one larger than the writer takes",
			alerts:      []alert.Alert{sized("big", 8000), sized("a", 10), sized("huge", alert.MaxMessageBytes+1)},
			wantRefused: []int{0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := kafkatest.New(t)
			name := k.Topic(t, "alerts", 1, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(topicMax)})
			topic, err := dispatch.NewTopic(dispatch.TopicConfig{Brokers: k.Brokers, Topic: name})
			if err != nil {
				t.Fatal(err)
			}
			defer topic.Close()
			err = topic.Publish(t.Context(), tt.alerts...)
			tl, isTooLarge := errors.AsType[*alert.TooLargeError](err)
			switch {
			case tt.wantRefused == nil && err != nil:
				t.Fatalf("Publish = %v, want nil", err)
			case tt.wantRefused != nil && !isTooLarge:
				t.Fatalf("Publish = %v, want a *alert.TooLargeError", err)
			case tt.wantRefused != nil && !slices.Equal(tl.Refused, tt.wantRefused):
				t.Fatalf("refused = %v, want %v", tl.Refused, tt.wantRefused)
			case tt.wantRefused != nil && strings.Contains(err.Error(), "private"):
				// It travels in logs and dead-letter headers.
				t.Errorf("Publish = %v: it names an event", err)
			}
			var want []string
			for i, a := range tt.alerts {
				if !slices.Contains(tt.wantRefused, i) {
					want = append(want, a.ID)
				}
			}
			var got []string
			for _, m := range k.ReadAll(t, name, len(want), 20*time.Second) {
				a, err := alert.Decode(m.Value)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, a.ID)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("on the topic: %v, want %v", got, want)
			}
		})
	}
}

package alert_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
)

func TestTopicRoundTrip(t *testing.T) {
	k := kafkatest.New(t)
	name := k.Topic(t, "alerts", 2)
	topic, err := alert.NewTopic(alert.TopicConfig{Brokers: k.Brokers, Topic: name})
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

func TestDecodeRejectsWhatItCannotDeliver(t *testing.T) {
	for _, in := range []string{
		``, `not json`, `[]`, `{}`,
		`{"rule":"r","cooldown_key":"c","record_key":"k"}`, // no id
		`{"id":"r/e","cooldown_key":"c","record_key":"k"}`, // no rule
		`{"id":"r/e","rule":"r","record_key":"k"}`,         // no cooldown key
		`{"id":"r/e","rule":"r","cooldown_key":"c"}`,       // no record key
		`{"id":"r/e","rule":"r","cooldown_key":"c","record_key":"k","current":"many"}`,
	} {
		if _, err := alert.Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) accepted it", in)
		}
	}
}

package dispatch

import (
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/lua"
)

// The dispatcher's defaults are the figures docs/alerts.md's Alerts and Floods
// sections give.
func TestDispatcherDefaults(t *testing.T) {
	var c DispatcherConfig
	c.setDefaults()
	want := DispatcherConfig{
		MaxAttempts:      5,
		MinBackoff:       500 * time.Millisecond,
		MaxBackoff:       30 * time.Second,
		MaxRetryAfter:    5 * time.Minute,
		AttemptTimeout:   15 * time.Second,
		InFlightGrace:    5 * time.Second,
		KeyPrefix:        "fw",
		Buckets:          lua.Buckets,
		ParkedRetry:      30 * time.Second,
		MaxParked:        1000,
		ChannelBudget:    lua.Budget{Rate: 1, Burst: 3},
		OverallBudget:    lua.Budget{Rate: 5, Burst: 15},
		DigestSize:       10,
		MaxWaiting:       20000,
		WaitingDrain:     250 * time.Millisecond,
		MaxOpen:          10000,
		UnknownRuleGrace: time.Minute,
	}
	if c != want {
		t.Errorf("defaults\n%+v,\nwant\n%+v", c, want)
	}
}

// A crossing handed to the alerts topic is acknowledged by every in-sync
// replica before the event's offset may be committed (docs/design.md, Delivery
// guarantees), and one group's alerts keep to one partition.
func TestTopicWaitsForAllReplicas(t *testing.T) {
	topic, err := NewTopic(TopicConfig{Brokers: []string{"127.0.0.1:9092"}, Topic: "alerts"})
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	if topic.w.RequiredAcks != kafka.RequireAll {
		t.Errorf("RequiredAcks = %v, want all in-sync replicas", topic.w.RequiredAcks)
	}
	if _, ok := topic.w.Balancer.(*kafka.Murmur2Balancer); !ok {
		t.Errorf("Balancer = %T, want murmur2 by key", topic.w.Balancer)
	}
}

package app

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/config"
)

// The two groups every replica runs, as README's Configuration and
// Delivery guarantees describe them.
func TestGroupConfigs(t *testing.T) {
	for _, start := range []string{"earliest", "latest"} {
		t.Run(start, func(t *testing.T) {
			c := config.Default()
			c.Kafka.Brokers = []string{"127.0.0.1:9092"}
			c.Kafka.GroupID = "fw"
			c.Kafka.StartOffset = start
			c.ShutdownTimeout = 40 * time.Second
			events, alerts, err := groupConfigs(&c)
			if err != nil {
				t.Fatal(err)
			}
			if events.StartEarliest != (start == "earliest") {
				t.Errorf("events group starts earliest: %v, want it as start_offset says", events.StartEarliest)
			}
			// A new alerts group must not skip alerts already handed off.
			if !alerts.StartEarliest {
				t.Error("the alerts group does not start at the earliest offset")
			}
			if alerts.GroupID != "fw.alerts" || !slices.Equal(alerts.Topics, []string{c.Kafka.AlertsTopic}) {
				t.Errorf("alerts group %s on %v, want fw.alerts on the alerts topic", alerts.GroupID, alerts.Topics)
			}
			// Three quarters of the shutdown for the drain.
			if events.DrainTimeout != 30*time.Second || alerts.DrainTimeout != 30*time.Second {
				t.Errorf("drain timeouts %v and %v, want 30s of a 40s shutdown_timeout", events.DrainTimeout, alerts.DrainTimeout)
			}
			if !slices.Equal(events.RequiredTopics, []string{c.Kafka.AlertsTopic}) {
				t.Errorf("the events group waits for %v, want the alerts topic", events.RequiredTopics)
			}
		})
	}
}

// go-redis's own retries are off: a resent script whose reply was lost
// would apply twice (README, Delivery guarantees). A ClusterClient retries
// nothing unless told to, so the single client is the one to check.
func TestRedisClientDoesNotRetry(t *testing.T) {
	rdb, err := newRedis(config.Default().Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	c, ok := rdb.(*redis.Client)
	if !ok {
		t.Fatalf("client %T, want a single-node client", rdb)
	}
	// -1 is go-redis's "none", which it keeps as 0; its default is 3.
	if got := c.Options().MaxRetries; got != 0 {
		t.Errorf("MaxRetries = %d, want none", got)
	}
}

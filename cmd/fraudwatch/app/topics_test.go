package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/lua"
)

// topicsKafka is a kafka section naming five topics unique to the test.
func topicsKafka(t *testing.T, brokers []string) config.Kafka {
	return config.Kafka{Brokers: brokers, ClientID: "fraudwatch-test",
		OrdersTopic: kafkatest.Group(t, "orders"), RefundsTopic: kafkatest.Group(t, "refunds"),
		DeadLetterTopic: kafkatest.Group(t, "dlq"), AlertsTopic: kafkatest.Group(t, "alerts"),
		OutcomesTopic: kafkatest.Group(t, "outcomes")}
}

func createTopics(t *testing.T, k config.Kafka, c TopicsConfig) (string, error) {
	t.Helper()
	return createTopicsWithin(t, k, c, 30*time.Second)
}

// freshClient is a client with a transport of its own: kafka-go answers
// Metadata from its transport's cache, which a shared one may hold from
// before the topics were created.
func freshClient(t *testing.T, brokers []string) *kafka.Client {
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
}

// partitionsOf returns each existing topic's partitions; a missing topic
// is absent.
func partitionsOf(t *testing.T, brokers []string, names ...string) map[string]int {
	t.Helper()
	client := freshClient(t, brokers)
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: names})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, tp := range md.Topics {
		if tp.Error == nil {
			got[tp.Name] = len(tp.Partitions)
		}
	}
	return got
}

// settingsOf returns the named settings of a topic as the broker has them.
func settingsOf(t *testing.T, brokers []string, topic string, names ...string) map[string]string {
	t.Helper()
	client := freshClient(t, brokers)
	resp, err := client.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: names}}})
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].Error != nil {
		t.Fatalf("describe configs of %s: %v %+v", topic, err, resp)
	}
	got := map[string]string{}
	for _, e := range resp.Resources[0].ConfigEntries {
		got[e.ConfigName] = e.ConfigValue
	}
	return got
}

// Created with the settings docs/operations.md gives, then left alone, then refused
// when asked for more partitions than a topic has.
func TestTopicsCreatedThenExistThenRefused(t *testing.T) {
	k := kafkatest.New(t)
	kc := topicsKafka(t, k.Brokers)
	all := []string{kc.OrdersTopic, kc.RefundsTopic, kc.DeadLetterTopic, kc.AlertsTopic, kc.OutcomesTopic}

	out, err := createTopics(t, kc, TopicsConfig{ReplicationFactor: 1, DryRun: true})
	if err != nil || strings.Count(out, ": would create, 6 partitions, replication factor 1") != 5 {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if got := partitionsOf(t, k.Brokers, all...); len(got) != 0 {
		t.Fatalf("the dry run created %v", got)
	}

	out, err = createTopics(t, kc, TopicsConfig{ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	for _, want := range []string{
		kc.OrdersTopic + " (orders_topic): created, 6 partitions, replication factor 1, cleanup.policy=delete\n",
		kc.RefundsTopic + " (refunds_topic): created, 6 partitions",
		kc.DeadLetterTopic + " (dead_letter_topic): created, 6 partitions, replication factor 1, retention.ms=604800000, cleanup.policy=delete\n",
		kc.AlertsTopic + " (alerts_topic): created, 6 partitions, replication factor 1, retention.ms=604800000, cleanup.policy=delete\n",
		kc.OutcomesTopic + " (outcomes_topic): created, 6 partitions, replication factor 1, retention.ms=15552000000, cleanup.policy=delete\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range all {
		if n := partitionsOf(t, k.Brokers, name)[name]; n != 6 {
			t.Errorf("%s has %d partitions, want 6", name, n)
		}
		want := map[string]string{"cleanup.policy": "delete"}
		if name == kc.DeadLetterTopic || name == kc.AlertsTopic {
			want["retention.ms"] = "604800000"
		}
		if name == kc.OutcomesTopic {
			want["retention.ms"] = "15552000000"
		}
		got := settingsOf(t, k.Brokers, name, "cleanup.policy", "retention.ms")
		for key, v := range want {
			if got[key] != v {
				t.Errorf("%s: %s = %q, want %q", name, key, got[key], v)
			}
		}
	}

	// Fewer partitions asked for: every topic has enough, and stays as it is.
	out, err = createTopics(t, kc, TopicsConfig{Partitions: 2, ReplicationFactor: 1})
	if err != nil || strings.Count(out, ": exists, 6 partitions; left as it is\n") != 5 || strings.Contains(out, "created") {
		t.Fatalf("second run: %v\n%s", err, out)
	}

	out, err = createTopics(t, kc, TopicsConfig{Partitions: 8, ReplicationFactor: 1})
	if !errors.Is(err, ErrTopicRefused) {
		t.Fatalf("more partitions asked for: err %v, want ErrTopicRefused\n%s", err, out)
	}
	want := kc.AlertsTopic + " (alerts_topic): refused: it has 6 partitions, fewer than the 8 asked for; " +
		"fraudwatch does not add partitions, since that moves keys between partitions"
	if !strings.Contains(out, want) || strings.Count(out, "refused") != 5 {
		t.Errorf("output lacks %q for each topic:\n%s", want, out)
	}
	for name, n := range partitionsOf(t, k.Brokers, all...) {
		if n != 6 {
			t.Errorf("after the refusal %s has %d partitions, want 6", name, n)
		}
	}
}

// A refunds topic that is the orders topic is created once, and a topic
// missing beside a refused one is still created.
func TestTopicsOrdersAndRefundsInOneTopic(t *testing.T) {
	k := kafkatest.New(t)
	kc := topicsKafka(t, k.Brokers)
	kc.RefundsTopic = kc.OrdersTopic
	if err := k.CreateTopic(context.Background(), kc.AlertsTopic, 1); err != nil {
		t.Fatal(err)
	}
	out, err := createTopics(t, kc, TopicsConfig{Partitions: 2, ReplicationFactor: 1})
	if !errors.Is(err, ErrTopicRefused) || !strings.Contains(err.Error(), kc.AlertsTopic) {
		t.Fatalf("err %v, want the alerts topic refused\n%s", err, out)
	}
	if lines := strings.Count(out, "\n"); lines != 4 || strings.Contains(out, "refunds_topic") {
		t.Errorf("want 4 lines, none for refunds_topic:\n%s", out)
	}
	got := partitionsOf(t, k.Brokers, kc.OrdersTopic, kc.DeadLetterTopic, kc.AlertsTopic)
	if got[kc.OrdersTopic] != 2 || got[kc.DeadLetterTopic] != 2 || got[kc.AlertsTopic] != 1 {
		t.Errorf("partitions %v, want orders and dead letters created with 2, alerts left with 1", got)
	}
}

// A replication factor above the cluster's brokers is refused before
// anything is created.
func TestTopicsReplicationNeedsTheBrokers(t *testing.T) {
	k := kafkatest.New(t)
	kc := topicsKafka(t, k.Brokers)
	md, err := freshClient(t, k.Brokers).Metadata(context.Background(), &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(md.Brokers)
	out, err := createTopics(t, kc, TopicsConfig{ReplicationFactor: n + 1})
	want := fmt.Sprintf("replication factor %d needs at least %d brokers, and the cluster has %d: give --replication-factor %d at most", n+1, n+1, n, n)
	if err == nil || err.Error() != want || out != "" {
		t.Fatalf("err %v, want %q; output %q", err, want, out)
	}
	if got := partitionsOf(t, k.Brokers, kc.OrdersTopic, kc.AlertsTopic); len(got) != 0 {
		t.Errorf("created %v", got)
	}
}

// With three replicas, acks=all means two copies at least: every topic
// gets min.insync.replicas=2; with fewer, the broker's default stays.
func TestTopicsMinInsyncReplicasFromThree(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	brokers := fake.ListenAddrs()
	for _, rf := range []int{3, 2} {
		kc := topicsKafka(t, brokers)
		kc.OrdersTopic += fmt.Sprint(rf)
		if out, err := createTopics(t, kc, TopicsConfig{Partitions: 1, ReplicationFactor: rf}); err != nil {
			t.Fatalf("replication factor %d: %v\n%s", rf, err, out)
		}
		for _, name := range []string{kc.OrdersTopic, kc.RefundsTopic, kc.DeadLetterTopic, kc.AlertsTopic} {
			got := settingsOf(t, brokers, name, "min.insync.replicas")["min.insync.replicas"]
			if (rf >= 3) != (got == "2") {
				t.Errorf("replication factor %d: %s has min.insync.replicas %q", rf, name, got)
			}
		}
	}
}

// The alerts and dead-letter topics keep messages as long as delivery
// records live: lua.Config's default Retention.
func TestTopicsRetentionIsTheDeliveryRecords(t *testing.T) {
	s, err := lua.New(lua.Config{}, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Retention() != alertsRetention {
		t.Errorf("alerts topic retention %v, delivery records %v", alertsRetention, s.Retention())
	}
}

func TestTopicsConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  TopicsConfig
		want string
	}{
		{TopicsConfig{Partitions: 0, ReplicationFactor: 1, Out: &bytes.Buffer{}}, "--partitions must be 1 to 10000, not 0"},
		{TopicsConfig{Partitions: -1, ReplicationFactor: 1, Out: &bytes.Buffer{}}, "--partitions must be 1 to 10000, not -1"},
		{TopicsConfig{Partitions: 10001, ReplicationFactor: 1, Out: &bytes.Buffer{}}, "--partitions must be 1 to 10000, not 10001"},
		{TopicsConfig{Partitions: 1, ReplicationFactor: 0, Out: &bytes.Buffer{}}, "--replication-factor must be at least 1, not 0"},
		{TopicsConfig{Partitions: 1, ReplicationFactor: 1}, "topics: Out is required"},
		{TopicsConfig{Partitions: 10000, ReplicationFactor: 1, Out: &bytes.Buffer{}}, ""},
	} {
		err := c.cfg.Validate()
		if got := fmt.Sprint(err); (err == nil) != (c.want == "") || err != nil && got != c.want {
			t.Errorf("Validate(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}

// An existing topic whose settings break a promise is refused, naming the
// setting and what it breaks, and left as it is; safe settings pass.
func TestTopicsRefuseSettingsThatBreakPromises(t *testing.T) {
	k := kafkatest.New(t)
	cases := []struct {
		name     string
		topic    func(config.Kafka) string
		settings map[string]string
		want     string // "" when the topic passes
	}{
		{"alerts compacted", func(k config.Kafka) string { return k.AlertsTopic },
			map[string]string{"cleanup.policy": "compact"}, "cleanup.policy=compact keeps only each key's latest message and so drops alerts not yet posted; set cleanup.policy=delete"},
		{"alerts kept a minute", func(k config.Kafka) string { return k.AlertsTopic },
			map[string]string{"retention.ms": "60000"}, "retention.ms=60000 (1m0s) deletes alerts not yet posted a Slack outage holds back longer than that; set retention.ms=604800000 (168h0m0s) or more"},
		{"alerts compacted and deleted", func(k config.Kafka) string { return k.AlertsTopic },
			map[string]string{"cleanup.policy": "compact,delete"}, "cleanup.policy=compact,delete keeps only each key's latest message"},
		{"orders compacted", func(k config.Kafka) string { return k.OrdersTopic },
			map[string]string{"cleanup.policy": "compact"}, "drops events not yet counted"},
		{"dead letters compacted", func(k config.Kafka) string { return k.DeadLetterTopic },
			map[string]string{"cleanup.policy": "compact"}, "drops dead letters"},
		{"alerts kept for ever", func(k config.Kafka) string { return k.AlertsTopic },
			map[string]string{"retention.ms": "-1"}, ""},
		{"alerts kept 8 days", func(k config.Kafka) string { return k.AlertsTopic },
			map[string]string{"retention.ms": "691200000"}, ""},
		{"orders kept a minute", func(k config.Kafka) string { return k.OrdersTopic },
			map[string]string{"retention.ms": "60000"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc := topicsKafka(t, k.Brokers)
			name := tc.topic(kc)
			var entries []kafka.ConfigEntry
			for key, v := range tc.settings {
				entries = append(entries, kafka.ConfigEntry{ConfigName: key, ConfigValue: v})
			}
			if err := k.CreateTopic(t.Context(), name, 6, entries...); err != nil {
				t.Fatal(err)
			}
			out, err := createTopics(t, kc, TopicsConfig{ReplicationFactor: 1})
			if tc.want == "" {
				if err != nil || strings.Contains(out, "refused") {
					t.Fatalf("err %v, want none\n%s", err, out)
				}
				return
			}
			line := name + " (" + map[string]string{kc.AlertsTopic: "alerts_topic", kc.OrdersTopic: "orders_topic",
				kc.DeadLetterTopic: "dead_letter_topic"}[name] + "): refused: "
			if !errors.Is(err, ErrTopicRefused) || !strings.Contains(out, line) || !strings.Contains(out, tc.want) {
				t.Fatalf("err %v, want ErrTopicRefused and %q, %q in\n%s", err, line, tc.want, out)
			}
			// The other topics are created all the same; this one is left
			// as it is.
			if got := strings.Count(out, ": created,"); got != 4 {
				t.Errorf("created %d topics, want the 4 others:\n%s", got, out)
			}
			for key, v := range tc.settings {
				if got := settingsOf(t, k.Brokers, name, key)[key]; got != v {
					t.Errorf("%s = %q after the refusal, want it left at %q", key, got, v)
				}
			}
		})
	}
}

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/lua"
)

// Defaults of `fraudwatch topics` (docs/operations.md, Topics).
const (
	// DefaultPartitions lets 6 replicas share the work (docs/performance.md, Sizing).
	DefaultPartitions = 6
	// DefaultReplicationFactor survives a broker's loss on a 3-broker
	// cluster; a single local broker needs 1.
	DefaultReplicationFactor = 3
	maxPartitions            = 10000 // a guard against a typo
)

// alertsRetention is how long the alerts and dead-letter topics keep
// messages: the lifetime of delivery records. The dispatcher skips alerts
// older than it, so longer keeps nothing useful; shorter could delete
// alerts a long Slack outage held back.
const alertsRetention = lua.DefaultRetention

// ErrTopicRefused is returned when a topic exists with fewer partitions
// than asked for.
var ErrTopicRefused = errors.New("topics refused")

// TopicsConfig says how CreateTopics makes the configured topics.
type TopicsConfig struct {
	Partitions        int  // of each topic it creates (default 6)
	ReplicationFactor int  // of each topic it creates (default 3)
	DryRun            bool // say what would be done, create nothing
	Out               io.Writer
	// Poll is how often it looks whether created topics have leaders.
	Poll time.Duration
}

func (c *TopicsConfig) setDefaults() {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Poll == 0 {
		c.Poll = 100 * time.Millisecond
	}
}

// Validate reports settings that cannot work.
func (c TopicsConfig) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > maxPartitions:
		return fmt.Errorf("--partitions must be 1 to %d, not %d", maxPartitions, c.Partitions)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > 32767:
		return fmt.Errorf("--replication-factor must be at least 1, not %d", c.ReplicationFactor)
	case c.Out == nil:
		return errors.New("topics: Out is required")
	}
	return nil
}

// outcomesRetention is the outcomes topic's retention as topics creates
// it.
const outcomesRetention = 180 * 24 * time.Hour

// wantedTopic is one topic of the configuration and its settings.
type wantedTopic struct {
	name, key string // key: the configuration key naming it
	settings  []kafka.ConfigEntry
	// holds says what its messages are, for the reasons of a refusal;
	// minRetention is the shortest retention that keeps its promises (0:
	// any).
	holds        string
	minRetention time.Duration
}

// wantedTopics lists the configured topics, the refunds topic once when it
// is the orders topic, with the settings docs/operations.md's Topics
// section explains.
func wantedTopics(k config.Kafka, replication int) []wantedTopic {
	retention := strconv.FormatInt(alertsRetention.Milliseconds(), 10)
	ts := []wantedTopic{
		{name: k.OrdersTopic, key: "orders_topic", holds: "events not yet counted"},
		{name: k.RefundsTopic, key: "refunds_topic", holds: "events not yet counted"},
		{name: k.DeadLetterTopic, key: "dead_letter_topic", holds: "dead letters",
			settings: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: retention}}},
		{name: k.AlertsTopic, key: "alerts_topic", holds: "alerts not yet posted", minRetention: alertsRetention,
			settings: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: retention}}},
		// Kept as long as outcomes are worth scoring a backtest with
		// (backtest --outcomes-from-topic): chargebacks come within 120
		// days.
		{name: k.OutcomesTopic, key: "outcomes_topic", holds: "outcomes not yet recorded",
			settings: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(outcomesRetention.Milliseconds(), 10)}}},
	}
	if k.RefundsTopic == k.OrdersTopic {
		ts = append(ts[:1], ts[2:]...)
	}
	for i := range ts {
		// Every topic is keyed by something that repeats (a customer, a
		// cooldown key): compaction would drop all but a key's last message.
		ts[i].settings = append(ts[i].settings, kafka.ConfigEntry{ConfigName: "cleanup.policy", ConfigValue: "delete"})
		if replication >= 3 {
			// acks=all then means two copies at least, not just the leader's.
			ts[i].settings = append(ts[i].settings, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: "2"})
		}
	}
	return ts
}

// CreateTopics creates the configured topics that do not exist yet, with
// c's partitions and replication factor. It prints one line a topic:
//
//   - created;
//   - exists: it has at least the partitions asked for, and is left as is;
//   - refused: it has fewer. No partitions are added, since that would move
//     keys between partitions.
//
// A refusal returns ErrTopicRefused, after the other topics are created.
func CreateTopics(ctx context.Context, k config.Kafka, c TopicsConfig) error {
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return err
	}
	transport, err := KafkaTransport(k)
	if err != nil {
		return err
	}
	// Its metadata routes CreateTopics and DescribeConfigs; a TTL as short
	// as Poll would time out its metadata requests on a slow broker.
	transport.MetadataTTL = metadataTimeout
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: metadataTimeout, Transport: transport}
	wanted := wantedTopics(k, c.ReplicationFactor)
	names := make([]string, len(wanted))
	for i, w := range wanted {
		names[i] = w.name
	}
	md, err := readMetadata(ctx, k, names)
	if err != nil {
		return fmt.Errorf("read the topics' metadata from %s: %w", strings.Join(k.Brokers, ","), err)
	}
	have := make(map[string]int, len(md.Topics))
	for _, t := range md.Topics {
		switch {
		case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
		case t.Error != nil:
			return fmt.Errorf("metadata of topic %s: %w", t.Name, t.Error)
		default:
			have[t.Name] = len(t.Partitions)
		}
	}
	var create []wantedTopic
	for _, w := range wanted {
		if _, ok := have[w.name]; !ok {
			create = append(create, w)
		}
	}
	if len(create) > 0 && len(md.Brokers) < c.ReplicationFactor {
		return fmt.Errorf("replication factor %d needs at least %d brokers, and the cluster has %d: "+
			"give --replication-factor %d at most", c.ReplicationFactor, c.ReplicationFactor, len(md.Brokers), len(md.Brokers))
	}
	// Before creating: the topics created are fraudwatch's own, with safe
	// settings.
	unsafe, err := unsafeSettings(ctx, client, wanted, func(name string) bool { _, ok := have[name]; return ok })
	if err != nil {
		return err
	}
	if len(create) > 0 && !c.DryRun {
		if err := createAndWait(ctx, k, client, create, c, have); err != nil {
			return err
		}
	}
	return report(c, wanted, have, unsafe)
}

// createAndWait creates the topics and waits until their partitions have
// leaders, so that a run started next finds them ready. A topic someone
// else created meanwhile is taken as existing, with its partitions in have.
func createAndWait(ctx context.Context, k config.Kafka, client *kafka.Client, create []wantedTopic, c TopicsConfig, have map[string]int) error {
	req := &kafka.CreateTopicsRequest{}
	for _, w := range create {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: w.name, NumPartitions: c.Partitions,
			ReplicationFactor: c.ReplicationFactor, ConfigEntries: w.settings})
	}
	resp, err := client.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, w := range create {
		if err := resp.Errors[w.name]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", w.name, err)
		}
	}
	for {
		ready, err := topicsReady(ctx, k, create, have, resp.Errors)
		if err == nil && ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("created topics have no leaders yet: %w", errors.Join(ctx.Err(), err))
		case <-time.After(c.Poll):
		}
	}
}

// topicsReady reports whether every created topic has a leader for each
// partition; for one that already existed (a concurrent creation), it
// records its partitions in have.
func topicsReady(ctx context.Context, k config.Kafka, create []wantedTopic, have map[string]int, errs map[string]error) (bool, error) {
	names := make([]string, len(create))
	for i, w := range create {
		names[i] = w.name
	}
	md, err := readMetadata(ctx, k, names)
	if err != nil {
		return false, err
	}
	for _, t := range md.Topics {
		if t.Error != nil || len(t.Partitions) == 0 {
			return false, t.Error
		}
		for _, p := range t.Partitions {
			if p.Error != nil || p.Leader.ID < 0 {
				return false, p.Error
			}
		}
		if errors.Is(errs[t.Name], kafka.TopicAlreadyExists) {
			have[t.Name] = len(t.Partitions)
		}
	}
	return true, nil
}

// metadataTimeout bounds a metadata read. kafka-go's transport times its
// metadata requests out after its MetadataTTL: a TTL as short as the
// readiness poll failed the command on any broker slower than that to
// answer (a loaded machine, a broker in another region).
const metadataTimeout = 10 * time.Second

// readMetadata reads the named topics' metadata from the brokers now.
// kafka-go's Client.Metadata answers from its transport's cache, which is
// refreshed only every MetadataTTL; a transport of its own, closed after,
// makes its first answer a request sent now, so that each readiness poll
// sees leaders as soon as they are elected.
func readMetadata(ctx context.Context, k config.Kafka, names []string) (*kafka.MetadataResponse, error) {
	transport, err := KafkaTransport(k)
	if err != nil {
		return nil, err
	}
	transport.MetadataTTL = metadataTimeout
	transport.MetadataTopics = names // not every topic of the cluster
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: metadataTimeout, Transport: transport}
	return client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
}

// report prints one line a topic (not in have: created, or to be created
// in a dry run) and returns ErrTopicRefused if a topic has fewer
// partitions than asked for, or settings that break a promise (unsafe).
func report(c TopicsConfig, wanted []wantedTopic, have map[string]int, unsafe map[string][]string) error {
	var refused []string
	for _, w := range wanted {
		n, exists := have[w.name]
		if !exists {
			verb := "created"
			if c.DryRun {
				verb = "would create"
			}
			fmt.Fprintf(c.Out, "%s (%s): %s, %d partitions, replication factor %d, %s\n",
				w.name, w.key, verb, c.Partitions, c.ReplicationFactor, settingsText(w.settings))
			continue
		}
		var why []string
		if n < c.Partitions {
			why = append(why, fmt.Sprintf("it has %d partitions, fewer than the %d asked for; "+
				"fraudwatch does not add partitions, since that moves keys between partitions "+
				"(give --partitions %d to accept it, or add them yourself)", n, c.Partitions, n))
		}
		why = append(why, unsafe[w.name]...)
		if len(why) == 0 {
			fmt.Fprintf(c.Out, "%s (%s): exists, %d partitions; left as it is\n", w.name, w.key, n)
			continue
		}
		refused = append(refused, w.name)
		fmt.Fprintf(c.Out, "%s (%s): refused: %s\n", w.name, w.key, strings.Join(why, "; "))
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: %s (see above; fraudwatch changes no setting of a topic that exists)", ErrTopicRefused, strings.Join(refused, ", "))
	}
	return nil
}

func settingsText(s []kafka.ConfigEntry) string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = e.ConfigName + "=" + e.ConfigValue
	}
	return strings.Join(parts, ", ")
}

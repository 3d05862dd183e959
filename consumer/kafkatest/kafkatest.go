// Package kafkatest gives tests a Kafka cluster: the brokers named by
// FRAUDWATCH_TEST_KAFKA_BROKERS when set (a real Apache Kafka), otherwise
// an in-process fake (franz-go's kfake) per test.
//
// Tests that share a real broker must not collide: Topic and Group return
// names unique to the test.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// EnvBrokers names the environment variable holding real test brokers.
const EnvBrokers = "FRAUDWATCH_TEST_KAFKA_BROKERS"

// Cluster is a Kafka cluster for one test.
type Cluster struct {
	Brokers []string
	// Real is true for a real broker, false for the in-process fake.
	Real bool
	fake *kfake.Cluster
}

var announce sync.Once

// New returns the cluster for t; an in-process one is closed when t ends.
func New(t testing.TB) *Cluster {
	t.Helper()
	if env := os.Getenv(EnvBrokers); env != "" {
		announce.Do(func() { fmt.Fprintf(os.Stderr, "kafkatest: using the real broker(s) at %s\n", env) })
		return &Cluster{Brokers: strings.Split(env, ","), Real: true}
	}
	announce.Do(func() {
		fmt.Fprintf(os.Stderr, "kafkatest: %s not set; using the in-process kfake broker\n", EnvBrokers)
	})
	return NewFake(t)
}

// NewFake returns an in-process cluster for t whatever the environment
// says, closed when t ends: for a test that steers the broker (kfake's
// control functions), which a real one cannot be.
func NewFake(t testing.TB) *Cluster {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("kafkatest: start kfake: %v", err)
	}
	t.Cleanup(fake.Close)
	return &Cluster{Brokers: fake.ListenAddrs(), fake: fake}
}

// Fake returns the in-process cluster, nil for a real one.
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// Topic creates a topic with a name unique to the test, starting with
// base, and returns the name. configs set topic-level settings such as
// max.message.bytes.
func (c *Cluster) Topic(t testing.TB, base string, partitions int, configs ...kafka.ConfigEntry) string {
	t.Helper()
	name := base + "." + suffix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.CreateTopic(ctx, name, partitions, configs...); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return name
}

// CreateTopic creates a topic named exactly name, with the given
// topic-level settings, and waits until its partitions have leaders.
func (c *Cluster) CreateTopic(ctx context.Context, name string, partitions int, configs ...kafka.ConfigEntry) error {
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: name, NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs,
	}}})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	if err := resp.Errors[name]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	for {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{name}})
		if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil && len(md.Topics[0].Partitions) == partitions {
			ready := true
			for _, p := range md.Topics[0].Partitions {
				ready = ready && p.Error == nil && p.Leader.ID >= 0
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s never became ready: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Group returns a consumer group id unique to the test.
func Group(t testing.TB, base string) string { return base + "." + suffix(t) }

// Produce writes messages to the given partition-less topic (messages may
// set Partition via Key hashing; use ProduceTo for explicit partitions).
func (c *Cluster) Produce(t testing.TB, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(c.Brokers...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("kafkatest: produce to %s: %v", topic, err)
	}
}

// ProduceTo writes messages to one partition of topic, in order.
func (c *Cluster) ProduceTo(t testing.TB, topic string, partition int, values ...[]byte) {
	t.Helper()
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Value: v}
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(c.Brokers...),
		Topic:        topic,
		Balancer:     fixed(partition),
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("kafkatest: produce to %s/%d: %v", topic, partition, err)
	}
}

type fixed int

func (p fixed) Balance(_ kafka.Message, partitions ...int) int { return int(p) }

// ReadAll reads every message of every partition of topic, waiting until
// there are at least want of them (or failing the test after timeout).
func (c *Cluster) ReadAll(t testing.TB, topic string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: 10 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("kafkatest: metadata of %s: %v", topic, err)
	}
	var (
		mu  sync.Mutex
		out []kafka.Message
		wg  sync.WaitGroup
	)
	for _, p := range md.Topics[0].Partitions {
		wg.Go(func() {
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers: c.Brokers, Topic: topic, Partition: p.ID, MaxWait: 100 * time.Millisecond,
			})
			defer r.Close()
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				out = append(out, m)
				enough := len(out) >= want
				mu.Unlock()
				if enough {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if len(out) < want {
		t.Fatalf("kafkatest: read %d messages from %s, want at least %d", len(out), topic, want)
	}
	return out
}

func suffix(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 100 {
		name = name[:100]
	}
	return name + "-" + hex.EncodeToString(b[:])
}

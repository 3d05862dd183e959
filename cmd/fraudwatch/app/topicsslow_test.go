package app

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
)

// topicsPoll is the readiness poll these tests give CreateTopics (its
// default).
const topicsPoll = 100 * time.Millisecond

// A broker slower than the readiness poll to answer metadata (a loaded
// machine, a broker in another region), and one whose new partitions get
// their leaders only after a few looks: the topics are created and
// reported either way. The second holds that each look asks the broker,
// not kafka-go's cache, refreshed at random within its TTL (10 s here): it
// has 30 s for ten leaderless looks, where ten refreshes of that cache
// would take 50 s on average (under 30 s about once in 70 runs), and ten
// looks of a few round trips each leave room for a loaded machine (5 s for
// five looks did not, in CI beside other work).
func TestTopicsCreatedOnASlowBroker(t *testing.T) {
	for _, tc := range []struct {
		name   string
		steer  func(t *testing.T, fake *kfake.Cluster, brokers []string, names []string)
		within time.Duration
	}{
		{"every metadata answer three polls late", func(_ *testing.T, fake *kfake.Cluster, _, _ []string) {
			fake.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				// Asleep without holding up the cluster's other requests.
				fake.SleepControl(func() { time.Sleep(3 * topicsPoll) })
				return nil, nil, false
			})
		}, 30 * time.Second},
		{"leaders after ten looks", leadersLate, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kafkatest.NewFake(t) // steered: never a real broker
			kc := topicsKafka(t, k.Brokers)
			names := []string{kc.OrdersTopic, kc.RefundsTopic, kc.DeadLetterTopic, kc.AlertsTopic, kc.OutcomesTopic}
			tc.steer(t, k.Fake(), k.Brokers, names)
			out, err := createTopicsWithin(t, kc, TopicsConfig{ReplicationFactor: 1, Poll: topicsPoll}, tc.within)
			if err != nil || strings.Count(out, ": created, 6 partitions") != 5 {
				t.Fatalf("err %v, want the 5 topics created:\n%s", err, out)
			}
			for name, n := range partitionsOf(t, k.Brokers, names...) {
				if n != 6 {
					t.Errorf("%s has %d partitions, want 6", name, n)
				}
			}
		})
	}
}

// leadersLate makes the fake answer the first ten Metadata requests
// after a CreateTopics with the named topics' partitions leaderless (as a
// real cluster does while it elects leaders), then as it is.
func leadersLate(t *testing.T, fake *kfake.Cluster, brokers []string, names []string) {
	md, err := freshClient(t, brokers).Metadata(t.Context(), &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var created atomic.Bool
	fake.ControlKey(int16(kmsg.CreateTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		created.Store(true)
		return nil, nil, false
	})
	var leaderless atomic.Int32
	leaderless.Store(10)
	fake.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if !created.Load() || leaderless.Add(-1) < 0 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.ControllerID = int32(md.Controller.ID)
		for _, b := range md.Brokers {
			rb := kmsg.NewMetadataResponseBroker()
			rb.NodeID, rb.Host, rb.Port = int32(b.ID), b.Host, int32(b.Port)
			resp.Brokers = append(resp.Brokers, rb)
		}
		for _, name := range names {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			for p := range int32(6) {
				rp := kmsg.NewMetadataResponseTopicPartition()
				rp.Partition, rp.Leader, rp.ErrorCode = p, -1, int16(kafka.LeaderNotAvailable)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
}

func createTopicsWithin(t *testing.T, k config.Kafka, c TopicsConfig, d time.Duration) (string, error) {
	t.Helper()
	var out strings.Builder
	c.Out = &out
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := CreateTopics(ctx, k, c)
	return out.String(), err
}

package consumer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// waitForTopics returns once the consumed and required topics exist,
// checking with backoff meanwhile. fraudwatch never creates topics (its
// metadata requests do not ask for auto-creation): a typo in a topic name
// must surface, not quietly create an empty topic that nobody writes to.
func (c *Group) waitForTopics(ctx context.Context) error {
	topics := append(append([]string(nil), c.cfg.Topics...), c.cfg.RequiredTopics...)
	var backoff time.Duration
	var logged time.Time
	for {
		md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		var missing []string
		if err == nil {
			for _, t := range md.Topics {
				if t.Error != nil || len(t.Partitions) == 0 {
					missing = append(missing, t.Name)
				}
			}
			if len(missing) == 0 {
				return nil
			}
		}
		status := "kafka brokers not answering"
		if err == nil {
			status = "waiting for missing topics: " + strings.Join(missing, ", ")
		}
		c.setStatus(status)
		if time.Since(logged) >= time.Minute { // not every few seconds for ever
			logged = time.Now()
			if err != nil {
				c.log.Error("kafka metadata request failed; retrying", "err", err)
			} else {
				c.log.Error("topics missing: create them (fraudwatch does not); waiting", "topics", strings.Join(missing, ","))
			}
		}
		backoff = topicsBackoff(backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// topicsBackoff is the wait before the next look for missing topics, after
// a wait of last (0 at first): growing from half a second, so that topics
// created at start-up are seen soon, to at most 10 s, so that one created
// later is seen soon too.
func topicsBackoff(last time.Duration) time.Duration {
	if last == 0 {
		return 500 * time.Millisecond
	}
	return min(2*last, 10*time.Second)
}

// resolveOffset turns kafka.FirstOffset/LastOffset into an absolute offset.
func (c *Group) resolveOffset(ctx context.Context, topic string, partition int, rel int64) (int64, error) {
	req := kafka.LastOffsetOf(partition)
	if rel == kafka.FirstOffset {
		req = kafka.FirstOffsetOf(partition)
	}
	// Read committed, the last offset is the last stable one: a new group
	// starting there does not skip an open transaction's records.
	resp, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics:         map[string][]kafka.OffsetRequest{topic: {req}},
		IsolationLevel: kafka.ReadCommitted,
	})
	if err != nil {
		return 0, fmt.Errorf("consumer: list offsets: %w", err)
	}
	for _, po := range resp.Topics[topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return 0, fmt.Errorf("consumer: list offsets: %w", po.Error)
		}
		if rel == kafka.FirstOffset {
			return po.FirstOffset, nil
		}
		return po.LastOffset, nil
	}
	return 0, fmt.Errorf("consumer: list offsets: no answer for %s/%d", topic, partition)
}

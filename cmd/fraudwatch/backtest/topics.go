package backtest

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
	"github.com/fraudwatch/fraudwatch/event"
)

// fetchBytes bounds one fetch: many events a round trip.
const fetchBytes = 8 << 20

// FromTopics reads what the configured orders and refunds topics hold from
// since before now to their ends as they are at the start, partition by
// partition. It joins no group and commits nothing: the consumers' offsets
// and the topics are left as they are. Each event's time, when it carries
// no occurred_at, is its record's. A value larger than k.MaxEventBytes is
// oversized, as it is to the consumer.
func FromTopics(ctx context.Context, k config.Kafka, transport kafka.RoundTripper, since time.Duration, now time.Time) (*Events, error) {
	c := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: transport, Timeout: 30 * time.Second}
	r := newReader(k.MaxEventBytes, k.RetryWindow)
	for _, t := range []struct {
		topic string
		typ   event.Type
	}{{k.OrdersTopic, event.Order}, {k.RefundsTopic, event.Refund}} {
		add := func(m kafka.Message) { r.add(m.Value, t.typ, m.Offset, m.Time) }
		if err := readTopic(ctx, c, t.topic, now.Add(-since), r.partition, add); err != nil {
			return nil, err
		}
	}
	return r.done(), nil
}

// OutcomesFromTopic adds to outs the records the outcomes topic
// (kafka.outcomes_topic) holds, all of them, to its ends as they are at the
// start, partition by partition, as FromTopics reads: no group, no commit.
func OutcomesFromTopic(ctx context.Context, k config.Kafka, transport kafka.RoundTripper, outs *Outcomes) error {
	c := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: transport, Timeout: 30 * time.Second}
	return readTopic(ctx, c, k.OutcomesTopic, time.Time{}, func() {}, func(m kafka.Message) { outs.Add(m.Value) })
}

// readTopic hands add what topic holds from from (zero: its start) to its
// end, calling partition before each partition's records.
func readTopic(ctx context.Context, c *kafka.Client, topic string, from time.Time, partition func(), add func(kafka.Message)) error {
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("backtest: metadata of %s: %w", topic, err)
	}
	if len(md.Topics) != 1 {
		return fmt.Errorf("backtest: topic %s not found", topic)
	}
	if err := md.Topics[0].Error; err != nil {
		return fmt.Errorf("backtest: topic %s: %w", topic, err)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		first := kafka.FirstOffsetOf(p.ID)
		if !from.IsZero() {
			first = kafka.TimeOffsetOf(p.ID, from)
		}
		reqs = append(reqs, first, kafka.LastOffsetOf(p.ID))
	}
	// Read committed, a partition ends at its last stable offset: an open
	// transaction's records are not replayed.
	offs, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs},
		IsolationLevel: kafka.ReadCommitted})
	if err != nil {
		return fmt.Errorf("backtest: offsets of %s: %w", topic, err)
	}
	for _, po := range offs.Topics[topic] {
		if po.Error != nil {
			return fmt.Errorf("backtest: offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		// The first offset at or after from (the partition's first
		// without one); none (-1) when every record is older.
		start, end := int64(-1), po.LastOffset
		if from.IsZero() {
			start = po.FirstOffset
		}
		for o := range po.Offsets {
			start = o
		}
		if start < 0 {
			start = end
		}
		partition()
		if err := readPartition(ctx, c, topic, po.Partition, start, end, from, add); err != nil {
			return err
		}
	}
	return nil
}

// readPartition hands add the committed records of one partition from
// start to end (read committed, as run reads them: no record of an
// aborted transaction).
func readPartition(ctx context.Context, c *kafka.Client, topic string, partition int, start, end int64, from time.Time, add func(kafka.Message)) error {
	transport := c.Transport
	if transport == nil {
		transport = kafka.DefaultTransport
	}
	for off := start; off < end; {
		f, err := consumer.FetchCommitted(ctx, transport, c.Addr, consumer.FetchRequest{
			Topic: topic, Partition: partition, Offset: off, MaxBytes: fetchBytes, MaxWait: 500 * time.Millisecond})
		if err != nil {
			return fmt.Errorf("backtest: read %s/%d at %d: %w", topic, partition, off, err)
		}
		for _, m := range f.Messages {
			if m.Offset >= end {
				break
			}
			if !m.Time.Before(from) { // a broker may answer with its batch's first offset
				add(m)
			}
		}
		if f.Next <= off {
			break // nothing more below end is committed
		}
		off = f.Next
	}
	return nil
}

package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/event"
)

// Dead-letter headers (README, Events).
const (
	HeaderError           = "fraudwatch-error"
	HeaderSourceTopic     = "fraudwatch-source-topic"
	HeaderSourcePartition = "fraudwatch-source-partition"
	HeaderSourceOffset    = "fraudwatch-source-offset"
	// HeaderValueDropped is set, to the original value's size in bytes, on
	// a dead letter written without its value because the dead-letter
	// writer or topic would not take it whole.
	HeaderValueDropped = "fraudwatch-value-dropped"
)

// deadLetterHeaderRoom is what the dead-letter writer allows beyond the
// largest fetched message, for the headers deadLetter adds.
const deadLetterHeaderRoom = 64 << 10

// deadLetter writes the original key, value and headers to the dead-letter
// topic, adding why and where from.
func (c *Consumer) deadLetter(ctx context.Context, msg kafka.Message, why *event.InvalidError) error {
	headers := make([]kafka.Header, 0, len(msg.Headers)+4)
	headers = append(headers, msg.Headers...)
	headers = append(headers,
		kafka.Header{Key: HeaderError, Value: []byte(why.Error())},
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	)
	err := c.dlq.WriteMessages(ctx, kafka.Message{Key: msg.Key, Value: msg.Value, Headers: headers})
	if err == nil {
		return nil
	}
	if !tooLarge(err) {
		return fmt.Errorf("consumer: write dead letter: %w", err)
	}
	// Too large for the writer or for the dead-letter topic: no retry can
	// help, and an invalid event must never stop the partition. The key,
	// headers and source still let an operator find the original.
	headers = append(headers, kafka.Header{Key: HeaderValueDropped, Value: []byte(strconv.Itoa(len(msg.Value)))})
	if err := c.dlq.WriteMessages(ctx, kafka.Message{Key: msg.Key, Headers: headers}); err != nil {
		return fmt.Errorf("consumer: write dead letter without its value: %w", err)
	}
	c.log.Warn("dead letter too large for the dead-letter topic; written without its value",
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
		"dead_letter_topic", c.cfg.DeadLetterTopic, "value_bytes", len(msg.Value), "err", err)
	return nil
}

// tooLarge reports whether a write failed because a message is too large:
// refused by the writer (kafka.MessageTooLargeError, which unwraps to
// kafka.MessageSizeTooLarge) or by the broker (inside kafka.WriteErrors,
// which does not unwrap).
func tooLarge(err error) bool {
	permanent := func(err error) bool {
		// RecordListTooLarge: the batch exceeds the topic's segment size.
		return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge)
	}
	if permanent(err) {
		return true
	}
	if we, ok := errors.AsType[kafka.WriteErrors](err); ok {
		for _, e := range we {
			if e != nil && permanent(e) {
				return true
			}
		}
	}
	return false
}

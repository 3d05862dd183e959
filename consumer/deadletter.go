package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/event"
)

// Dead-letter headers (docs/events.md).
const (
	HeaderError           = "fraudwatch-error"
	HeaderSourceTopic     = "fraudwatch-source-topic"
	HeaderSourcePartition = "fraudwatch-source-partition"
	HeaderSourceOffset    = "fraudwatch-source-offset"
	// HeaderValueDropped is set, to the original value's size in bytes, on
	// a dead letter written without its value because the dead-letter
	// writer or topic would not take it whole.
	HeaderValueDropped = "fraudwatch-value-dropped"
	// HeaderKeyDropped and HeaderHeadersDropped are set, to the original
	// key's size and the original headers' (keys and values) in bytes, on
	// a dead letter that even without its value was too large: it is
	// written with fraudwatch's own headers only.
	HeaderKeyDropped     = "fraudwatch-key-dropped"
	HeaderHeadersDropped = "fraudwatch-headers-dropped"
)

// deadLetterHeaderRoom is what the dead-letter writer allows beyond the
// largest fetched message, for the headers deadLetter adds.
const deadLetterHeaderRoom = 64 << 10

// maxErrorHeader bounds fraudwatch-error on a dead letter stripped to its
// own headers: the reason and field are short, but an unprocessable
// event's detail is an error text that could grow.
const maxErrorHeader = 1024

// deadLetter writes the original key, value and headers to the dead-letter
// topic, adding why and where from. If the topic (or the writer) refuses
// that as too large, it writes again smaller, putting each dropped part's
// size in a header: first without the value, then also without the key and
// the original headers. No retry could make it fit, and an invalid event
// must never stop its partition.
func (c *Consumer) deadLetter(ctx context.Context, msg kafka.Message, why *event.InvalidError) error {
	return c.DeadLetter(ctx, msg, why.Error())
}

// DeadLetter writes msg to the dead-letter topic as deadLetter does, with
// why as its fraudwatch-error header: why must name a reason and a field,
// never a value. The alerts group's dispatcher sends the alerts it cannot
// trust here too.
func (c *Consumer) DeadLetter(ctx context.Context, msg kafka.Message, why string) error {
	own := []kafka.Header{
		{Key: HeaderError, Value: []byte(why)},
		{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	}
	headers := make([]kafka.Header, 0, len(msg.Headers)+len(own)+1)
	headers = append(headers, msg.Headers...)
	headers = append(headers, own...)
	err := c.dlq.WriteMessages(ctx, kafka.Message{Key: msg.Key, Value: msg.Value, Headers: headers})
	if err == nil {
		return nil
	}
	if !TooLarge(err) {
		return fmt.Errorf("consumer: write dead letter: %w", err)
	}
	// The key, headers and source still let an operator find the original.
	valueDropped := kafka.Header{Key: HeaderValueDropped, Value: []byte(strconv.Itoa(len(msg.Value)))}
	headers = append(headers, valueDropped)
	err = c.dlq.WriteMessages(ctx, kafka.Message{Key: msg.Key, Headers: headers})
	if err == nil {
		c.log.Warn("dead letter too large for the dead-letter topic; written without its value",
			"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
			"dead_letter_topic", c.cfg.DeadLetterTopic, "value_bytes", len(msg.Value))
		return nil
	}
	if !TooLarge(err) {
		return fmt.Errorf("consumer: write dead letter without its value: %w", err)
	}
	// A huge key or huge headers: what is left is fraudwatch's own
	// headers, small and bounded, and the source still finds the original
	// (while the topic keeps it).
	own[0].Value = clipHeader(own[0].Value, maxErrorHeader)
	headerBytes := 0
	for _, h := range msg.Headers {
		headerBytes += len(h.Key) + len(h.Value)
	}
	own = append(own, valueDropped,
		kafka.Header{Key: HeaderKeyDropped, Value: []byte(strconv.Itoa(len(msg.Key)))},
		kafka.Header{Key: HeaderHeadersDropped, Value: []byte(strconv.Itoa(headerBytes))},
	)
	if err := c.dlq.WriteMessages(ctx, kafka.Message{Headers: own}); err != nil {
		return fmt.Errorf("consumer: write dead letter without its value, key and headers: %w", err)
	}
	c.log.Warn("dead letter too large for the dead-letter topic; written without its value, key and headers",
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
		"dead_letter_topic", c.cfg.DeadLetterTopic, "value_bytes", len(msg.Value),
		"key_bytes", len(msg.Key), "header_bytes", headerBytes)
	return nil
}

// clipHeader cuts b to at most n bytes, on a rune boundary when b is
// UTF-8, marking the cut with "…".
func clipHeader(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return append(slices.Clip(b[:cut]), "…"...)
}

// TooLarge reports whether a write to Kafka failed because a message is
// too large: refused by the writer (kafka.MessageTooLargeError, which
// unwraps to kafka.MessageSizeTooLarge) or by the broker (inside
// kafka.WriteErrors, which does not unwrap). The dead-letter writer and
// the alerts topic's (alert/dispatch) both ask it.
func TooLarge(err error) bool {
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

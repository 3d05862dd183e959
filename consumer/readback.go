package consumer

import (
	"context"
	"log/slog"

	"github.com/segmentio/kafka-go"
)

// partitionMemory is a MessageHandler that remembers some of each
// partition's latest messages (the events consumer: their event ids, to
// catch a producer's retries). So that it remembers the same after a
// restart or a rebalance, each assignment of a partition reads back the
// messages just before its start offset and hands them to recall, to be
// remembered, never handled: none of their offsets is marked or committed.
type partitionMemory interface {
	MessageHandler
	// readBack is how many messages before its start offset a partition
	// reads back (0: none).
	readBack() int
	// assigned starts a partition's memory afresh, before its messages
	// read back; released drops it when the partition's loop ends.
	assigned(topic string, partition int)
	released(topic string, partition int)
	// recall takes messages read back, of one partition, in order.
	recall(msgs []kafka.Message)
}

// readBackFrom is where a partition assigned at start reads from: n
// messages earlier, or its first available offset if that is later. When
// the first offset cannot be resolved it reads from n earlier anyway:
// kafka-go skips to the first offset from below it.
func (g *generation) readBackFrom(ctx context.Context, log *slog.Logger, topic string, partition int, start int64, n int) int64 {
	if n <= 0 || start <= 0 {
		return start
	}
	from := max(0, start-int64(n))
	first, err := g.resolveOffset(ctx, topic, partition, kafka.FirstOffset)
	if err != nil {
		log.Warn("resolving the first offset to read back from failed", "offset", from, "err", err)
		return from
	}
	// Past start when retention deleted records not yet handled: nothing
	// to read back, and the reader skips ahead from start as ever.
	return min(start, max(from, first))
}

// recall hands mem the messages of batch before start, the ones read
// back, and returns the rest.
func recall(mem partitionMemory, batch []kafka.Message, start int64) []kafka.Message {
	if mem == nil || len(batch) == 0 || batch[0].Offset >= start {
		return batch
	}
	k := 1
	for k < len(batch) && batch[k].Offset < start {
		k++
	}
	mem.recall(batch[:k])
	return batch[k:]
}

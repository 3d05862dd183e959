package consumer

import (
	"context"
	"sync"

	"github.com/segmentio/kafka-go"
)

// memories holds the Retries of each partition the consumer's loops hold.
// A loop owns its partition's; the map is shared by the loops.
type memories struct {
	window int
	mu     sync.Mutex
	held   map[topicPartition]*Retries
}

func newMemories(window int) *memories {
	return &memories{window: window, held: map[topicPartition]*Retries{}}
}

// of is the memory of msgs' partition; nil when there is none (the check
// is off).
func (m *memories) of(msgs []kafka.Message) *Retries {
	if m.window == 0 || len(msgs) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[topicPartition{msgs[0].Topic, msgs[0].Partition}]
}

func (m *memories) start(topic string, partition int) {
	if m.window == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[topicPartition{topic, partition}] = NewRetries(m.window)
}

func (m *memories) drop(topic string, partition int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, topicPartition{topic, partition})
}

// eventsHandler is the Consumer as its Group's handler: it handles
// batches, and remembers each partition's event ids, those before its
// start offset included, to catch a producer's retries.
type eventsHandler struct{ c *Consumer }

func (h eventsHandler) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	return h.c.handleMessages(ctx, msgs)
}

func (h eventsHandler) stageTimes() *stageHistogram { return h.c.m.stages }

func (h eventsHandler) readBack() int { return h.c.cfg.RetryWindow }

func (h eventsHandler) assigned(topic string, partition int) { h.c.retries.start(topic, partition) }

func (h eventsHandler) released(topic string, partition int) { h.c.retries.drop(topic, partition) }

// recall takes the event ids of messages read back, as a batch of them
// handled would: invalid ones are skipped, as they are then.
func (h eventsHandler) recall(msgs []kafka.Message) {
	mem := h.c.retries.of(msgs)
	if mem == nil {
		return
	}
	batch := h.c.batch(msgs)
	for i, msg := range msgs {
		if ev, why := h.c.decode(batch, i, msg); why == nil {
			mem.Seen(ev.EventID, msg.Offset)
		}
	}
	mem.Commit()
}

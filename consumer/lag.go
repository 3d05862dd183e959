package consumer

import (
	"context"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// updateLag sets the lag of every held partition from its high-water
// mark, asked for all of them in one ListOffsets request.
func (g *generation) updateLag(ctx context.Context) {
	req := g.held.request()
	if req == nil {
		return
	}
	resp, err := g.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		// The fetches fail too and say so; the next tick tries again.
		if ctx.Err() == nil {
			g.log.Debug("listing high-water marks for lag failed", "group", g.cfg.GroupID, "err", err)
		}
		return
	}
	g.held.refresh(resp)
}

type topicPartition struct {
	topic     string
	partition int
}

// held tracks, per partition a generation's loops hold, the next offset
// to process, and owns those partitions' lag series. One mutex covers the
// positions and the gauge, so that a refresh racing a loop's exit cannot
// bring back the series of a partition no longer held.
type held struct {
	mu   sync.Mutex
	lag  *prometheus.GaugeVec
	next map[topicPartition]int64
}

func newHeld(lag *prometheus.GaugeVec) *held {
	return &held{lag: lag, next: map[topicPartition]int64{}}
}

// assign starts tracking a partition at its start offset, before its first
// message.
func (h *held) assign(topic string, partition int, next int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next[topicPartition{topic, partition}] = next
}

// advance records a handled message and the high-water mark its fetch saw.
func (h *held) advance(topic string, partition int, next, highWaterMark int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := topicPartition{topic, partition}
	if _, ok := h.next[k]; !ok {
		return
	}
	h.next[k] = next
	h.lag.WithLabelValues(topic, strconv.Itoa(partition)).Set(float64(max(0, highWaterMark-next)))
}

// release stops tracking a partition and deletes its lag series.
func (h *held) release(topic string, partition int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.next, topicPartition{topic, partition})
	h.lag.DeleteLabelValues(topic, strconv.Itoa(partition))
}

// request asks for the high-water mark of every held partition (nil when
// none is held).
func (h *held) request() map[string][]kafka.OffsetRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.next) == 0 {
		return nil
	}
	req := map[string][]kafka.OffsetRequest{}
	for k := range h.next {
		req[k.topic] = append(req[k.topic], kafka.LastOffsetOf(k.partition))
	}
	return req
}

// refresh sets the lag of the partitions still held from resp.
func (h *held) refresh(resp *kafka.ListOffsetsResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for topic, parts := range resp.Topics {
		for _, po := range parts {
			next, ok := h.next[topicPartition{topic, po.Partition}]
			if !ok || po.Error != nil || po.LastOffset < 0 {
				continue
			}
			h.lag.WithLabelValues(topic, strconv.Itoa(po.Partition)).Set(float64(max(0, po.LastOffset-next)))
		}
	}
}

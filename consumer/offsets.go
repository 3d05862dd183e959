package consumer

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// newCommitHistogram is fraudwatch_consumer_commit_seconds.
func newCommitHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fraudwatch_consumer_commit_seconds",
		Help:    "Round trip of one commit of the group's offsets (every commit_interval, apart from the messages' handling).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
	})
}

// offsets tracks, per partition, the next offset to commit.
type offsets struct {
	mu   sync.Mutex
	next map[string]map[int]int64
	done map[string]map[int]int64
}

func newOffsets() *offsets {
	return &offsets{next: map[string]map[int]int64{}, done: map[string]map[int]int64{}}
}

func (o *offsets) mark(topic string, partition int, next int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.next[topic] == nil {
		o.next[topic] = map[int]int64{}
	}
	o.next[topic][partition] = next
}

// pending returns the offsets not yet committed.
func (o *offsets) pending() map[string]map[int]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out map[string]map[int]int64
	for topic, parts := range o.next {
		for p, off := range parts {
			if d, ok := o.done[topic][p]; ok && d == off {
				continue
			}
			if out == nil {
				out = map[string]map[int]int64{}
			}
			if out[topic] == nil {
				out[topic] = map[int]int64{}
			}
			out[topic][p] = off
		}
	}
	return out
}

func (o *offsets) committed(c map[string]map[int]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, parts := range c {
		if o.done[topic] == nil {
			o.done[topic] = map[int]int64{}
		}
		for p, off := range parts {
			o.done[topic][p] = off
		}
	}
}

package consumer

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stalls is fraudwatch_consumer_stalled_seconds: per partition a member
// holds, how long ago the oldest message not yet settled was first handed
// over to the handler, computed when it is scraped; 0 while nothing is in
// hand. Whatever holds the message counts: a call that retries inside
// itself (a Retry-After), a wait, failed calls retried, a batch handled
// one message a call. A partition that flows reads a few milliseconds at
// most; one held grows until it moves on, for an alert rule to watch.
// Several groups in one process share it; their topics differ.
type stalls struct {
	desc *prometheus.Desc
	mu   sync.Mutex // the map; each clock is read and set without it
	held map[topicPartition]*stallClock
}

// stallClock is when the batch a partition's loop has in hand was first
// handed over, in Unix nanoseconds; 0 when it has none. Its loop alone sets
// it, twice a batch.
type stallClock struct{ since atomic.Int64 }

// handed records that a batch is handed over for the first time.
func (c *stallClock) handed(at time.Time) { c.since.Store(at.UnixNano()) }

// settled records that the batch in hand is all handled.
func (c *stallClock) settled() { c.since.Store(0) }

func newStalls() *stalls {
	return &stalls{
		desc: prometheus.NewDesc("fraudwatch_consumer_stalled_seconds",
			"How long ago the oldest message not yet handled of a partition this member holds was first handed over to the handler, whatever holds it (0 while nothing is in hand).",
			[]string{"topic", "partition"}, nil),
		held: map[topicPartition]*stallClock{},
	}
}

func (s *stalls) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *stalls) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixNano()
	for k, c := range s.held {
		v := 0.0
		if since := c.since.Load(); since != 0 {
			v = max(0, time.Duration(now-since).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, v, k.topic, strconv.Itoa(k.partition))
	}
}

// hold starts a partition's series, at 0, and returns its clock.
func (s *stalls) hold(topic string, partition int) *stallClock {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &stallClock{}
	s.held[topicPartition{topic, partition}] = c
	return c
}

// release ends a partition's series, unless a later hold of the partition
// took it over.
func (s *stalls) release(topic string, partition int, c *stallClock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := topicPartition{topic, partition}
	if s.held[k] == c {
		delete(s.held, k)
	}
}

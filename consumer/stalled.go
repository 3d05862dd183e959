package consumer

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stalls is fraudwatch_consumer_stalled_seconds: per partition a member
// holds, how long its next message has failed to be handled, computed when
// it is scraped. A partition that flows reads 0; one whose head keeps
// failing (Redis down, Slack down, an alert of a rule not in force yet)
// grows until it moves on, for an alert rule to watch. Several groups in
// one process share it; their topics differ.
type stalls struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	// since holds, per held partition, when its head message first failed
	// (zero while it flows).
	since map[topicPartition]time.Time
}

func newStalls() *stalls {
	return &stalls{
		desc: prometheus.NewDesc("fraudwatch_consumer_stalled_seconds",
			"How long the next message of a partition this member holds has been failing and retried (0 while it flows).",
			[]string{"topic", "partition"}, nil),
		since: map[topicPartition]time.Time{},
	}
}

func (s *stalls) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *stalls) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, since := range s.since {
		v := 0.0
		if !since.IsZero() {
			v = time.Since(since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, v, k.topic, strconv.Itoa(k.partition))
	}
}

// hold starts a partition's series, at 0.
func (s *stalls) hold(topic string, partition int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since[topicPartition{topic, partition}] = time.Time{}
}

// failing records that an attempt at the partition's head, begun at
// started, failed; the first failure of a head starts the clock.
func (s *stalls) failing(topic string, partition int, started time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := topicPartition{topic, partition}
	if since, ok := s.since[k]; ok && since.IsZero() {
		s.since[k] = started
	}
}

// flowing records that the partition moved on.
func (s *stalls) flowing(topic string, partition int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := topicPartition{topic, partition}
	if _, ok := s.since[k]; ok {
		s.since[k] = time.Time{}
	}
}

// release ends a partition's series.
func (s *stalls) release(topic string, partition int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.since, topicPartition{topic, partition})
}

package consumer

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// A stage is a part of an event's way from its record's timestamp to the
// end of its processing; together they make fraudwatch_event_latency_seconds.
// Each event is observed once in every stage (0 for a stage its batch did
// not go through), so that the stages' means add up to the latency's.
type stage int

const (
	// stageBacklog: from the record's timestamp to the fetch that brought
	// it being asked for, when the record came first: it waited in the
	// broker while the partition's loop was busy with earlier records.
	stageBacklog stage = iota
	// stageFetch: from the later of the record's timestamp and the
	// fetch's request to the fetch's answer: the producer's linger, the
	// broker's append and the round trip.
	stageFetch
	// stageQueue: from the fetch's answer to the batch being handed to
	// the handler: the batch before it being handled, and the linger.
	stageQueue
	stageDecode
	// stageHandle is the Handler's own time (in fraudwatch, the rules in
	// Go), less what it said went to Redis and the alerts topic.
	stageHandle
	stageRedis
	stageAlerts
	stageDeadLetters
	stages
)

var stageNames = [stages]string{"backlog", "fetch", "queue", "decode", "handle", "redis", "alerts", "dead_letters"}

// A handler that has stageTimes times the stages of its messages: its
// group observes those up to each message's hand-over in the histogram it
// returns.
type stageTimed interface {
	stageTimes() *stageHistogram
}

// stagesOf is h's stage histogram, nil when h times no stages.
func stagesOf(h MessageHandler) *stageHistogram {
	if st, ok := h.(stageTimed); ok {
		return st.stageTimes()
	}
	return nil
}

// Part is a part of a Handler's work that what runs below the Handler (a
// Redis client's hook, the alerts topic's writer) times itself, and adds
// to the batch's Timer: the consumer sees only the Handler's whole time.
type Part int

const (
	// Redis is the batch's round trips to Redis: its scripts' pipelines.
	Redis Part = iota
	// Alerts is the hand-off of the batch's alerts to the alerts topic.
	Alerts
	parts
)

// Timer gathers the time the parts of one batch's handling took, and how
// many times each was gone through (a Redis round trip, a hand-off). The
// consumer puts one in the context it hands the Handler; TimerOf finds it.
type Timer struct {
	spent [parts]atomic.Int64
	times [parts]atomic.Int64
}

type timerKey struct{}

// TimerOf is the Timer of the batch handled in ctx; nil, whose Add does
// nothing, when ctx is no batch's.
func TimerOf(ctx context.Context) *Timer {
	t, _ := ctx.Value(timerKey{}).(*Timer)
	return t
}

// Add adds d, one pass through p (a round trip to Redis, say), to p's
// time. Calls that overlap add up.
func (t *Timer) Add(p Part, d time.Duration) {
	if t != nil && p >= 0 && p < parts {
		t.spent[p].Add(int64(d))
		t.times[p].Add(1)
	}
}

func (t *Timer) of(p Part) time.Duration { return time.Duration(t.spent[p].Load()) }

// stageBounds are the buckets of fraudwatch_event_stage_seconds, from a
// tenth of a millisecond (a decode's share) to half a minute (a backlog);
// stageLimits are the same as durations, which a bucket is found by.
var (
	stageBounds = [...]float64{.0001, .00025, .0005, .001, .002, .005, .01, .02, .03, .04, .05, .075, .1, .15, .2, .3, .4, .5, .75, 1, 2, 5, 10, 30}
	stageLimits = func() []time.Duration {
		out := make([]time.Duration, len(stageBounds))
		for i, b := range stageBounds {
			out[i] = time.Duration(b * float64(time.Second))
		}
		return out
	}()
)

// stageBucket is the bucket of d: the first whose bound it does not pass
// (most are among the first few: a linear scan).
func stageBucket(d time.Duration) int {
	for i, l := range stageLimits {
		if d <= l {
			return i
		}
	}
	return len(stageLimits)
}

// stageHistogram is fraudwatch_event_stage_seconds: a histogram per stage
// whose observations carry a weight, the events that spent the time, so
// that a batch's stage costs one observation rather than one an event.
type stageHistogram struct {
	desc   *prometheus.Desc
	counts [stages][]atomic.Uint64 // per bucket, the last past every bound
	sums   [stages]atomic.Int64    // nanoseconds
}

func newStageHistogram() *stageHistogram {
	h := &stageHistogram{desc: prometheus.NewDesc("fraudwatch_event_stage_seconds",
		"Time events spent in each stage of their way from their record's timestamp to the end of their processing, an observation an event and stage.",
		[]string{"stage"}, nil)}
	for s := range h.counts {
		h.counts[s] = make([]atomic.Uint64, len(stageBounds)+1)
	}
	return h
}

// observe counts n events that spent d in stage s; a negative d (a
// producer's clock ahead of ours) counts as 0.
func (h *stageHistogram) observe(s stage, d time.Duration, n int) {
	if n <= 0 {
		return
	}
	d = max(d, 0)
	h.counts[s][stageBucket(d)].Add(uint64(n))
	h.sums[s].Add(int64(d) * int64(n))
}

// tally gathers one stage's observations of a batch's messages, to be
// added to the histogram at once.
type tally struct {
	counts [len(stageBounds) + 1]uint32
	sum    time.Duration
}

func (t *tally) add(d time.Duration) {
	d = max(d, 0)
	t.counts[stageBucket(d)]++
	t.sum += d
}

func (h *stageHistogram) merge(s stage, t *tally) {
	for i, c := range t.counts {
		if c > 0 {
			h.counts[s][i].Add(uint64(c))
		}
	}
	h.sums[s].Add(int64(t.sum))
}

func (h *stageHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *stageHistogram) Collect(ch chan<- prometheus.Metric) {
	for s := range stages {
		buckets := make(map[float64]uint64, len(stageBounds))
		var total uint64
		for i, b := range stageBounds {
			total += h.counts[s][i].Load()
			buckets[b] = total
		}
		total += h.counts[s][len(stageBounds)].Load()
		sum := time.Duration(h.sums[s].Load()).Seconds()
		ch <- prometheus.MustNewConstHistogram(h.desc, total, sum, buckets, stageNames[s])
	}
}

// span is a run of a batch's messages that one fetch brought: when it was
// asked for and when it answered.
type span struct {
	n               int
	asked, answered time.Time
}

// handed observes the stages of a batch's messages up to its hand-over,
// at handed: spans say which fetch brought each, the last spans the last
// messages (a batch whose first messages were read back has fewer
// messages than its spans cover).
func (h *stageHistogram) handed(msgs []kafka.Message, spans []span, handed time.Time) {
	var backlog, fetch tally
	end := len(msgs)
	for k := len(spans) - 1; k >= 0 && end > 0; k-- {
		sp := spans[k]
		first := max(end-sp.n, 0)
		h.observe(stageQueue, handed.Sub(sp.answered), end-first)
		for i := first; i < end; i++ {
			at := msgs[i].Time
			if at.Before(sp.asked) {
				backlog.add(sp.asked.Sub(at))
				at = sp.asked
			} else {
				backlog.counts[0]++ // asked for before it came
			}
			fetch.add(sp.answered.Sub(at))
		}
		end = first
	}
	h.merge(stageBacklog, &backlog)
	h.merge(stageFetch, &fetch)
}

// handled observes the stages of a batch of n messages handled: decoded,
// handled and done are when its decoding, its Handler and its dead
// letters ended; timer is what the Handler said of its parts.
func (m *metrics) handled(n int, start, decoded, handled, done time.Time, timer *Timer) {
	h := m.stages
	redis, alerts := timer.of(Redis), timer.of(Alerts)
	h.observe(stageDecode, decoded.Sub(start), n)
	h.observe(stageHandle, handled.Sub(decoded)-redis-alerts, n)
	h.observe(stageRedis, redis, n)
	h.observe(stageAlerts, alerts, n)
	h.observe(stageDeadLetters, done.Sub(handled), n)
	m.roundTrips.Add(float64(timer.times[Redis].Load()))
}

package consumer

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/event"
)

// histograms reads the histograms named name from reg, by the value of
// their label (one series without labels: "").
func histograms(t *testing.T, reg *prometheus.Registry, name, label string) map[string]*dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					v = l.GetValue()
				}
			}
			out[v] = m.GetHistogram()
		}
	}
	return out
}

// Each event is observed once in every stage of
// fraudwatch_event_stage_seconds; the Handler's parts are what it said of
// them, its own time is the rest, and the stages add up to the events'
// latency. Commits are timed.
func TestStagesAddUpToTheLatency(t *testing.T) {
	e := newEnv(t, 1)
	// The handler's own work is about own; the rest of its time it says
	// went to Redis, but for alerts, which it says went to the alerts topic.
	const own, alerts = 5 * time.Millisecond, 2 * time.Millisecond
	var redis atomic.Int64 // what it said of Redis, times the events of each batch
	h := HandlerFunc(func(ctx context.Context, evs []*event.Event) (map[int]error, error) {
		entered := time.Now()
		time.Sleep(own + alerts + 20*time.Millisecond)
		spent := time.Since(entered) - own - alerts
		TimerOf(ctx).Add(Redis, spent)
		TimerOf(ctx).Add(Alerts, alerts)
		redis.Add(int64(spent) * int64(len(evs)))
		return nil, nil
	})
	r := start(t, e.config(), h)
	const n = 3
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1), order("e2", "c", 1))
	e.cluster.ProduceTo(t, e.orders, 0, order("e3", "c", 1))
	waitFor(t, 20*time.Second, "three events' latency", func() bool {
		l := histograms(t, r.reg, "fraudwatch_event_latency_seconds", "")[""]
		return l != nil && l.GetSampleCount() == n
	})
	waitFor(t, 5*time.Second, "a commit timed", func() bool {
		c := histograms(t, r.reg, "fraudwatch_consumer_commit_seconds", "")[""]
		return c != nil && c.GetSampleCount() > 0
	})
	latency := histograms(t, r.reg, "fraudwatch_event_latency_seconds", "")[""].GetSampleSum()
	stages := histograms(t, r.reg, "fraudwatch_event_stage_seconds", "stage")
	var sum float64
	for _, name := range stageNames {
		s := stages[name]
		if s.GetSampleCount() != n {
			t.Errorf("stage %s: %d observations, want one an event (%d)", name, s.GetSampleCount(), n)
		}
		sum += s.GetSampleSum()
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6 }
	if got, want := stages["redis"].GetSampleSum(), time.Duration(redis.Load()).Seconds(); !near(got, want) {
		t.Errorf("redis stage: %v s in all, want %v (what the handler said, for each event of its batch)", got, want)
	}
	if got := stages["alerts"].GetSampleSum(); !near(got, n*alerts.Seconds()) {
		t.Errorf("alerts stage: %v s in all, want %v", got, n*alerts.Seconds())
	}
	// Between the handler's return and the consumer's clock, microseconds.
	if got, least := stages["handle"].GetSampleSum(), n*own.Seconds(); got < least || got > least+n*0.002 {
		t.Errorf("handle stage: %v s in all, want the handler's time less its parts: %v and a little", got, least)
	}
	// The stages run from the record's timestamp to the end of the
	// processing, as the latency does; a few microseconds an event pass
	// between the hand-over and the handling's start.
	if math.Abs(sum-latency) > n*0.001 {
		t.Errorf("the stages add up to %v s, the latency to %v s", sum, latency)
	}
	// One round trip a batch, as the handler said.
	batches := histograms(t, r.reg, "fraudwatch_event_processing_seconds", "")[""].GetSampleCount()
	if got := testutil.ToFloat64(r.c.m.roundTrips); got != float64(batches) {
		t.Errorf("%v Redis round trips counted for %d batches, want one each", got, batches)
	}
	if TimerOf(context.Background()) != nil {
		t.Error("a context of no batch has a timer")
	}
	TimerOf(context.Background()).Add(Redis, time.Second) // nil's Add does nothing
}

// A record that came before its fetch was asked for waited in the backlog
// until then; the fetch's time runs from the later of the two to its
// answer, the queue from the answer to the hand-over. A batch whose first
// messages were read back observes only the rest.
func TestHandedSplitsTheWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	h := newStageHistogram()
	msgs := []kafka.Message{{Time: ms(-100)}, {Time: ms(-3)}, {Time: ms(20)}, {Time: ms(25)}}
	spans := []span{{n: 2, asked: ms(0), answered: ms(10)}, {n: 2, asked: ms(10), answered: ms(30)}}
	h.handed(msgs[1:], spans, ms(50)) // msgs[0] was read back
	for s, want := range map[stage]time.Duration{
		stageBacklog: 3 * time.Millisecond,              // msgs[1], from -3 to 0
		stageFetch:   (10 + 10 + 5) * time.Millisecond,  // from 0, 20 and 25 to 10, 30 and 30
		stageQueue:   (40 + 20 + 20) * time.Millisecond, // from 10, 30 and 30 to 50
	} {
		if got := time.Duration(h.sums[s].Load()); got != want {
			t.Errorf("%s: %v in all, want %v", stageNames[s], got, want)
		}
		var count uint64
		for i := range h.counts[s] {
			count += h.counts[s][i].Load()
		}
		if count != 3 {
			t.Errorf("%s: %d observations, want 3", stageNames[s], count)
		}
	}
}

// A bucket's bound is its largest value, as Prometheus's le says.
func TestStageBucket(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {100 * time.Microsecond, 0}, {100*time.Microsecond + 1, 1},
		{20 * time.Millisecond, 7}, {30 * time.Second, len(stageBounds) - 1}, {time.Hour, len(stageBounds)},
	} {
		if got := stageBucket(tt.d); got != tt.want {
			t.Errorf("stageBucket(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

package app

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// stageSeries reads fraudwatch_event_stage_seconds of a replica, by stage.
func (r *replica) stageSeries(t *testing.T) map[string]*dto.Histogram {
	t.Helper()
	mfs, err := r.app.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetName() != "fraudwatch_event_stage_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					out[l.GetValue()] = m.GetHistogram()
				}
			}
		}
	}
	return out
}

// The engine's Redis round trips and its alerts' hand-off, which run
// below the consumer, show in their stages: the Redis client's hook and
// the alerts topic's wrapper time them for the batch.
func TestStagesSeeRedisAndTheAlertsTopic(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	r := p.start()
	waitFor(t, 30*time.Second, "ready", func() bool { return r.ready(t) })
	const orders = 3 // the third crosses the threshold
	for i := range orders {
		p.orders(0, ev{id: fmt.Sprint("e", i), customer: "c-1", amount: 100})
	}
	waitFor(t, 30*time.Second, "every order's stages", func() bool {
		return r.stageSeries(t)["dead_letters"].GetSampleCount() == orders
	})
	waitFor(t, 10*time.Second, "the alert", func() bool { return len(p.notes.list()) == 1 })
	stages := r.stageSeries(t)
	for _, name := range []string{"backlog", "fetch", "queue", "decode", "handle", "redis", "alerts", "dead_letters"} {
		if got := stages[name].GetSampleCount(); got != orders {
			t.Errorf("stage %s: %d observations, want %d", name, got, orders)
		}
	}
	if stages["redis"].GetSampleSum() <= 0 {
		t.Error("the redis stage saw no time: the counting scripts' round trips were not timed")
	}
	if r.metric("fraudwatch_event_redis_round_trips_total") < 1 {
		t.Error("no Redis round trip counted for the batches")
	}
	if stages["alerts"].GetSampleSum() <= 0 {
		t.Error("the alerts stage saw no time: the crossing's hand-off to the alerts topic was not timed")
	}
}

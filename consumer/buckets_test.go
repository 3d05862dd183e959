package consumer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLatencyBucketsAreFine holds what docs/operations.md promises of the
// latency histograms: between 40 ms and 1 s, where the 50 ms goal and the
// bench's p99s lie, each bucket's bound is at most half again the one
// below it, so that a quantile interpolated inside a bucket is read within
// that much (a p99 between buckets of 200 and 500 ms said little).
func TestLatencyBucketsAreFine(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	m.latency.Observe(0.01)
	m.stages.observe(0, 0, 1)
	for _, name := range []string{"fraudwatch_event_latency_seconds", "fraudwatch_event_stage_seconds"} {
		for label, h := range histograms(t, reg, name, "stage") {
			var below float64
			for _, b := range h.GetBucket() {
				up := b.GetUpperBound()
				if up > .04 && up <= 1 && up > 1.5*below+1e-9 {
					t.Errorf("%s%s: bucket %g follows %g: more than half again", name, label, up, below)
				}
				below = up
			}
			if below < 1 {
				t.Errorf("%s%s: buckets end at %g, below 1 s", name, label, below)
			}
		}
	}
}

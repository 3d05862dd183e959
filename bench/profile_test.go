package main

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name      string
		line      string
		busy, all float64
		err       bool
	}{
		{"a kernel's ten fields", "cpu  100 5 50 800 20 3 2 7 40 1", 160, 980, false},
		{"no guest fields", "cpu 100 5 50 800 20 3 2 7", 160, 980, false},
		{"an older kernel's seven", "cpu 100 5 50 800 20 3 2", 160, 980, false},
		{"one core's line", "cpu0 100 5 50 800 20 3 2 7", 0, 0, true},
		{"too short", "cpu 100 5 50 800", 0, 0, true},
		{"not a number", "cpu 100 x 50 800 20 3 2 7", 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			busy, all, err := statCPU(tc.line)
			if (err != nil) != tc.err || busy != tc.busy || all != tc.all {
				t.Errorf("statCPU(%q) = %v, %v, %v; want %v, %v, error %v", tc.line, busy, all, err, tc.busy, tc.all, tc.err)
			}
		})
	}
}

// quantile interpolates within the bucket the rank falls in, over what
// was observed between two scrapes, as Prometheus's histogram_quantile.
func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	bounds := []float64{0.01, 0.05, 0.1, inf}
	before := histogram{bounds, []float64{10, 10, 10, 10}} // cumulative
	after := histogram{bounds, []float64{60, 100, 110, 110}}
	for _, tc := range []struct {
		q, want float64
	}{
		{0.5, 0.01},   // rank 50 of 100: the first bucket's 50, at its top
		{0.25, 0.005}, // rank 25: half way through the first bucket
		{0.75, 0.035}, // rank 75: 25 of the second bucket's 40
		{0.95, 0.075}, // rank 95: half way through the third
	} {
		if got := quantile(before, after, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	// Past the last finite bound: that bound, as Prometheus answers.
	beyond := histogram{bounds, []float64{10, 10, 10, 110}}
	if got := quantile(before, beyond, 0.5); got != 0.1 {
		t.Errorf("quantile in the +Inf bucket = %v, want 0.1", got)
	}
	if got := quantile(after, after, 0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing observed = %v, want NaN", got)
	}
}

func TestParseMetrics(t *testing.T) {
	page := `# HELP fraudwatch_events_consumed_total Events.
# TYPE fraudwatch_events_consumed_total counter
fraudwatch_events_consumed_total{type="order"} 95
fraudwatch_events_consumed_total{type="refund"} 5
fraudwatch_rules_version{version="a b"} 1
fraudwatch_ready 1
go_gc_duration_seconds{quantile="0.5"} NaN
`
	fams, err := parseFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	got := sums(fams)
	if got["fraudwatch_events_consumed_total"] != 100 || got["fraudwatch_rules_version"] != 1 || got["fraudwatch_ready"] != 1 {
		t.Errorf("parsed %v, want the series summed over their labels", got)
	}
}

// A histogram is summed bucket by bucket over the replicas, +Inf (the
// sample count) included.
func TestScrapeHistogramSumsTheReplicas(t *testing.T) {
	page := func(b1, b2, count int) string {
		return fmt.Sprintf(`# TYPE fraudwatch_event_latency_seconds histogram
fraudwatch_event_latency_seconds_bucket{le="0.01"} %d
fraudwatch_event_latency_seconds_bucket{le="0.1"} %d
fraudwatch_event_latency_seconds_bucket{le="+Inf"} %d
fraudwatch_event_latency_seconds_sum 1
fraudwatch_event_latency_seconds_count %d
`, b1, b2, count, count)
	}
	var reps []*replica
	for _, p := range []string{page(1, 2, 3), page(10, 20, 30)} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, p) }))
		t.Cleanup(srv.Close)
		reps = append(reps, &replica{metrics: srv.URL})
	}
	h, err := scrapeHistogram(t.Context(), reps, "fraudwatch_event_latency_seconds")
	if err != nil {
		t.Fatal(err)
	}
	want := histogram{[]float64{0.01, 0.1, math.Inf(1)}, []float64{11, 22, 33}}
	if !slices.Equal(h.bounds, want.bounds) || !slices.Equal(h.counts, want.counts) {
		t.Errorf("histogram %v, want %v", h, want)
	}
}

// SLOWLOG keeps a call's first 32 arguments, the last then saying how many
// more there were: a call's size is read from both.
func TestArgCount(t *testing.T) {
	short := []string{"evalsha", "abc", "3", "k1", "k2", "k3", "src", "600"}
	long := append([]string{"evalsha", "abc", "17"}, make([]string, 28)...)
	long = append(long, "... (2040 more arguments)")
	for _, tt := range []struct {
		args []string
		want int
	}{{short, 5}, {long, 28 + 2040}} {
		if got := argCount(tt.args); got != tt.want {
			t.Errorf("argCount(%d logged) = %d, want %d", len(tt.args), got, tt.want)
		}
	}
}

// The rest of the machine is what it did less redis-server and
// fraudwatch, never below 0; a run without a reading of the machine says
// nothing of it.
func TestTheRestOfTheMachine(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    result
		want string
	}{
		{"others busy, time stolen", result{machine: machineShare{busy: 1.9, steal: 0.05}, cores: 0.4, redis: redisProfile{core: 0.95}},
			"; the rest of the machine 55 % of a core, 5 % stolen by the hypervisor"},
		{"nothing else", result{machine: machineShare{busy: 1.3}, cores: 0.4, redis: redisProfile{core: 0.95}},
			"; the rest of the machine 0 % of a core, 0 % stolen by the hypervisor"},
		{"not read", result{cores: 0.4, redis: redisProfile{core: 0.95}}, ""},
	} {
		if got := tc.r.rest(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	m0, err := machineNow()
	if err != nil {
		t.Fatal(err)
	}
	if m0.busy <= 0 {
		t.Fatalf("the machine has been busy %v s since it started", m0.busy)
	}
	if got := (machineShare{busy: m0.busy + 3, steal: m0.steal + 1}).per(m0, 2); got != (machineShare{1.5, 0.5}) {
		t.Errorf("per: %+v, want 1.5 cores busy, 0.5 stolen", got)
	}
}

package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// processed's scrape asks a replica for its two counters alone, which
// fraudwatch's handler (promhttp) then writes out alone.
func TestProcessedScrapesTwoCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, name := range []string{"fraudwatch_events_consumed_total", "fraudwatch_events_invalid_total", "fraudwatch_other_total"} {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name})
		c.Add(2)
		reg.MustRegister(c)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	fams, err := scrapeFamilies(t.Context(), srv.URL+processedQuery)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range fams {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"fraudwatch_events_consumed_total", "fraudwatch_events_invalid_total"}; !slices.Equal(names, want) {
		t.Errorf("the scrape read %q, want %q", names, want)
	}
	n, err := processed(t.Context(), []*replica{{metrics: srv.URL}})
	if err != nil || n != 4 {
		t.Errorf("processed = %v, %v; want 4", n, err)
	}
}

// measure scrapes every 50 ms at first and near the end of the run, and
// less often between.
func TestScrapeEvery(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		since  time.Duration // since the replicas were first seen; 0: not yet
		n0, n  float64
		events int
		want   time.Duration
	}{
		{"not seen yet", 0, 0, 0, 1000, 50 * ms},
		{"nothing done since", time.Second, 100, 100, 1000, 50 * ms},
		{"most left", time.Second, 0, 100, 1000, 250 * ms},
		{"a second left", time.Second, 0, 500, 1000, 250 * ms},
		{"400 ms left", time.Second, 0, 714, 1000, 100 * ms},
		{"near the end", time.Second, 0, 990, 1000, 50 * ms},
		{"done", time.Second, 0, 1000, 1000, 50 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first time.Time
			if tt.since > 0 {
				first = time.Now().Add(-tt.since)
			}
			got := scrapeEvery(first, tt.n0, tt.n, tt.events)
			if d := got - tt.want; d < -2*ms || d > 2*ms {
				t.Errorf("scrapeEvery = %v, want %v", got, tt.want)
			}
		})
	}
}

// A run whose events were all processed before the bench first saw any
// (bench-smoke's sizing runs of 5,000 events) times nothing: its rows say
// so instead of 0 events/s and NaN.
func TestTimedFor(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name      string
		last      time.Time
		n0        float64
		events    int
		secs      float64
		wantTimed bool
	}{
		{"timed from its first scrape to its last", at.Add(2 * time.Second), 100, 5000, 2, true},
		{"all done at the first scrape", at.Add(time.Microsecond), 5000, 5000, 1e-6, false},
		{"seen and done at one instant", at, 10, 5000, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secs, timed := timedFor(at, tc.last, tc.n0, tc.events)
			if secs != tc.secs || timed != tc.wantTimed {
				t.Errorf("timedFor = %v, %v; want %v, %v", secs, timed, tc.secs, tc.wantTimed)
			}
		})
	}
}

// A run not timed gets a row that says so, and its note is not made (it
// would divide by its 0 events/s).
func TestRowOfARunNotTimed(t *testing.T) {
	b := &bench{tbl: &table{}}
	b.row("timed", result{eventsPerSec: 1234}, func() string { return "its note" })
	b.row("not timed", result{untimed: "too few to time"}, func() string {
		t.Error("the note of a run not timed was made")
		return ""
	})
	want := [][4]string{{"b", "timed", "1234 events/s", "its note"}, {"b", "not timed", "not timed", "too few to time"}}
	if !slices.Equal(b.tbl.rows, want) {
		t.Errorf("rows = %q, want %q", b.tbl.rows, want)
	}
}

// Each run reads an alerts topic of its own: its group is new and reads
// the topic from its start, so a shared one would have it verify every
// alert the runs before it published.
func TestEachRunHasItsOwnAlertsTopic(t *testing.T) {
	dir := t.TempDir()
	topics := map[string]bool{}
	for _, group := range []string{"bench-fw-a", "bench-fw2-a"} {
		r := &fraudwatchRun{dir: filepath.Join(dir, group), brokers: []string{"127.0.0.1:9092"}, redis: []string{"127.0.0.1:6379"},
			orders: "bench.orders.a", refunds: "bench.refunds.a", group: group, replicas: 1}
		path, err := r.config(0, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), r.alerts()) {
			t.Fatalf("the configuration of group %s does not name its alerts topic %s:\n%s", group, r.alerts(), cfg)
		}
		topics[r.alerts()] = true
	}
	if len(topics) != 2 {
		t.Errorf("two runs share an alerts topic: %v", topics)
	}
}

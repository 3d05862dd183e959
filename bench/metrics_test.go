package main

import (
	"net/http/httptest"
	"slices"
	"testing"

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

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// histogram is a Prometheus histogram as scraped: upper bounds and
// cumulative counts.
type histogram struct {
	bounds []float64
	counts []float64
}

// scrapeHistogram reads one histogram of a /metrics page, summed over the
// replicas (and over its labels, if any).
func scrapeHistogram(ctx context.Context, reps []*replica, name string) (histogram, error) {
	var h histogram
	for _, rep := range reps {
		fams, err := scrapeFamilies(ctx, rep.metrics)
		if err != nil {
			return h, err
		}
		f, ok := fams[name]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			bounds, counts := buckets(m.GetHistogram())
			if h.bounds == nil {
				h.bounds, h.counts = bounds, make([]float64, len(counts))
			}
			if !slices.Equal(bounds, h.bounds) {
				return h, fmt.Errorf("%s: %s: buckets %v, want %v", rep.metrics, name, bounds, h.bounds)
			}
			for b, c := range counts {
				h.counts[b] += c
			}
		}
	}
	return h, nil
}

// buckets are a histogram's upper bounds and cumulative counts, +Inf last
// (the sample count, when the page did not list it).
func buckets(h *dto.Histogram) (bounds, counts []float64) {
	for _, b := range h.GetBucket() {
		bounds, counts = append(bounds, b.GetUpperBound()), append(counts, float64(b.GetCumulativeCount()))
	}
	if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
		bounds, counts = append(bounds, math.Inf(1)), append(counts, float64(h.GetSampleCount()))
	}
	return bounds, counts
}

// quantile estimates the q-quantile of the observations between two
// scrapes, interpolating inside a bucket as Prometheus does.
func quantile(before, after histogram, q float64) float64 {
	n := len(after.counts)
	if n == 0 {
		return math.NaN()
	}
	delta := make([]float64, n)
	for i := range delta {
		delta[i] = after.counts[i]
		if i < len(before.counts) {
			delta[i] -= before.counts[i]
		}
	}
	total := delta[n-1]
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, prev := 0.0, 0.0
	for i, c := range delta {
		if c >= rank {
			upper := after.bounds[i]
			if math.IsInf(upper, 1) {
				return lower
			}
			return lower + (upper-lower)*(rank-prev)/(c-prev)
		}
		lower, prev = after.bounds[i], c
	}
	return lower
}

// scrape reads the counters and gauges of a /metrics page, summed over
// their labels.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	fams, err := scrapeFamilies(ctx, url)
	if err != nil {
		return nil, err
	}
	return sums(fams), nil
}

// scrapeClient asks for pages uncompressed: the bench scrapes a replica
// every 50 ms while it measures it, and gzipping each page took about 4 %
// of fraudwatch's CPU in (b) (its profile, 2026-12-06), over loopback for
// nothing.
var scrapeClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// scrapeFamilies reads a /metrics page in Prometheus's text format.
func scrapeFamilies(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseFamilies(resp.Body)
}

func parseFamilies(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fams, nil
}

// sums is each counter's, gauge's and untyped metric's value summed over
// its labels; NaN samples are left out.
func sums(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Untyped != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			if !math.IsNaN(v) {
				out[name] += v
			}
		}
	}
	return out
}

package main

import (
	"math"
	"testing"
)

// The stage with the largest p99 bounds the latency's; a wait names the
// handling stage that takes the most time an event too.
func TestBound(t *testing.T) {
	tests := []struct {
		name   string
		stages []stageFigure
		want   string
	}{
		{"none", nil, "no stages measured"},
		{"redis", []stageFigure{{"queue", 0.010, 0.004}, {"handle", 0.005, 0.002}, {"redis", 0.030, 0.008}}, "redis"},
		{"a wait", []stageFigure{{"backlog", 0.300, 0.050}, {"fetch", 0.400, 0.100}, {"queue", 0.600, 0.100}, {"handle", 0.020, 0.002}, {"redis", 0.050, 0.006}},
			"queue (waiting for earlier batches to be handled; of the handling, redis takes 75 %)"},
	}
	for _, tt := range tests {
		if got := bound(tt.stages); got != tt.want {
			t.Errorf("%s: bound %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Each stage's p99 and mean come from the observations between two
// scrapes, in the order of an event's way.
func TestStagesBetween(t *testing.T) {
	bounds := []float64{0.01, 0.1, math.Inf(1)}
	before := stageScrape{
		"redis": {h: histogram{bounds: bounds, counts: []float64{10, 10, 10}}, sum: 0.05},
		"queue": {h: histogram{bounds: bounds, counts: []float64{10, 10, 10}}, sum: 0.05},
	}
	after := stageScrape{
		"redis": {h: histogram{bounds: bounds, counts: []float64{10, 110, 110}}, sum: 5.05}, // 100 more, 50 ms each
		"queue": {h: histogram{bounds: bounds, counts: []float64{110, 110, 110}}, sum: 0.55},
	}
	got := stagesBetween(before, after)
	if len(got) != 2 || got[0].name != "queue" || got[1].name != "redis" {
		t.Fatalf("stages %+v, want queue then redis", got)
	}
	if r := got[1]; math.Abs(r.mean-0.05) > 1e-9 || r.p99 <= 0.01 || r.p99 > 0.1 {
		t.Errorf("redis: %+v, want a mean of 50 ms and a p99 in (10 ms, 100 ms]", r)
	}
	if q := got[0]; math.Abs(q.mean-0.005) > 1e-9 || q.p99 > 0.01 {
		t.Errorf("queue: %+v, want a mean of 5 ms and a p99 within 10 ms", q)
	}
}

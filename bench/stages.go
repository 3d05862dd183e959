package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// stageOrder is the order of fraudwatch_event_stage_seconds's stages on an
// event's way (docs/operations.md, Latency by stage); the waiting stages
// come first.
var stageOrder = []string{"backlog", "fetch", "queue", "decode", "handle", "redis", "alerts", "dead_letters"}

// waiting are the stages an event spends waiting for the partition's loop:
// long when handling is slower than the events come.
var waiting = []string{"backlog", "queue"}

// stageScrape is fraudwatch_event_stage_seconds as scraped, by stage,
// summed over the replicas.
type stageScrape map[string]stageSeries

type stageSeries struct {
	h   histogram
	sum float64
}

// scrapeStages reads each stage's histogram from the replicas.
func scrapeStages(ctx context.Context, reps []*replica) (stageScrape, error) {
	out := stageScrape{}
	for _, rep := range reps {
		fams, err := scrapeFamilies(ctx, rep.metrics)
		if err != nil {
			return nil, err
		}
		for _, m := range fams["fraudwatch_event_stage_seconds"].GetMetric() {
			stage := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					stage = l.GetValue()
				}
			}
			bounds, counts := buckets(m.GetHistogram())
			s := out[stage]
			if s.h.bounds == nil {
				s.h = histogram{bounds: bounds, counts: make([]float64, len(counts))}
			}
			if !slices.Equal(bounds, s.h.bounds) {
				return nil, fmt.Errorf("%s: stage %s: buckets %v, want %v", rep.metrics, stage, bounds, s.h.bounds)
			}
			for i, c := range counts {
				s.h.counts[i] += c
			}
			s.sum += m.GetHistogram().GetSampleSum()
			out[stage] = s
		}
	}
	return out, nil
}

// stageFigure is one stage's share of the latency between two scrapes.
type stageFigure struct {
	name      string
	p99, mean float64 // seconds
}

// stagesBetween are the stages' figures between two scrapes, in the order
// of an event's way.
func stagesBetween(before, after stageScrape) []stageFigure {
	names := make([]string, 0, len(after))
	for name := range after {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		ia, ib := slices.Index(stageOrder, a), slices.Index(stageOrder, b)
		if ia < 0 || ib < 0 {
			return strings.Compare(a, b)
		}
		return ia - ib
	})
	var out []stageFigure
	for _, name := range names {
		a, b := after[name], before[name]
		n := count(b.h, a.h)
		if b.h.bounds == nil {
			n = count(histogram{counts: make([]float64, len(a.h.counts))}, a.h)
		}
		f := stageFigure{name: name, p99: quantile(b.h, a.h, 0.99)}
		if n > 0 {
			f.mean = (a.sum - b.sum) / n
		}
		out = append(out, f)
	}
	return out
}

// bound names the stage whose p99 is the largest, which bounds the
// latency's p99; when that is a wait (behind earlier records or batches),
// the handling stage taking the most time an event too, which makes the
// wait.
func bound(stages []stageFigure) string {
	if len(stages) == 0 {
		return "no stages measured"
	}
	top, cause := stages[0], stageFigure{}
	var handling float64
	for _, s := range stages {
		if s.p99 > top.p99 {
			top = s
		}
		if !slices.Contains(waiting, s.name) && s.name != "fetch" {
			handling += s.mean
			if s.mean > cause.mean {
				cause = s
			}
		}
	}
	if !slices.Contains(waiting, top.name) || cause.name == "" || handling <= 0 {
		return top.name
	}
	return fmt.Sprintf("%s (waiting for earlier batches to be handled; of the handling, %s takes %.0f %%)",
		top.name, cause.name, 100*cause.mean/handling)
}

// stagesText lists the stages' p99s (and means), for a row or a trace.
func stagesText(stages []stageFigure, means bool) string {
	parts := make([]string, 0, len(stages))
	for _, s := range stages {
		if means {
			parts = append(parts, fmt.Sprintf("%s %s (mean %s)", s.name, ms(s.p99), ms(s.mean)))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s", s.name, ms(s.p99)))
		}
	}
	return strings.Join(parts, ", ")
}

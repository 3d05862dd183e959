package backtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Sweep is --sweep RULE:SETTING=VALUES: one rule replayed once for each
// value of one of its settings, threshold or window, the rest of the rule
// as it is. VALUES is a list (threshold=2,4,8; window=1m,5m,10m) or a
// range FROM..TO with an optional /STEP (threshold=2..10 is every integer
// from 2 to 10; window=1m..10m/1m; a range of durations needs its step).
type Sweep struct {
	Rule    string
	Setting string
	// Values are the values as a report prints them.
	Values     []string
	thresholds []int64
	windows    []time.Duration
}

// maxSweepValues bounds a sweep: each value is a replay.
const maxSweepValues = 100

// ParseSweep reads a --sweep.
func ParseSweep(spec string) (*Sweep, error) {
	rule, rest, ok := strings.Cut(spec, ":")
	setting, values, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || rule == "" || values == "" {
		return nil, fmt.Errorf("--sweep %q is not RULE:SETTING=VALUES, e.g. burst:threshold=2..10 or burst:window=1m,5m,10m", spec)
	}
	s := &Sweep{Rule: rule, Setting: setting}
	var err error
	switch setting {
	case "threshold":
		s.thresholds, err = sweepValues(values, parseThreshold, func(a, b int64) int64 { return a + b }, 1)
		for _, v := range s.thresholds {
			s.Values = append(s.Values, strconv.FormatInt(v, 10))
		}
	case "window":
		s.windows, err = sweepValues(values, time.ParseDuration, func(a, b time.Duration) time.Duration { return a + b }, 0)
		for _, v := range s.windows {
			s.Values = append(s.Values, durationText(v))
		}
	default:
		return nil, fmt.Errorf("--sweep %q: the setting is threshold or window, not %q", spec, setting)
	}
	if err != nil {
		return nil, fmt.Errorf("--sweep %q: %w", spec, err)
	}
	return s, nil
}

func parseThreshold(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

// sweepValues reads a list or a range of values; step is a range's step
// when it gives none (its zero value: it must give one).
func sweepValues[T int64 | time.Duration](text string, parse func(string) (T, error), add func(T, T) T, step T) ([]T, error) {
	from, to, isRange := strings.Cut(text, "..")
	if !isRange {
		var out []T
		for f := range strings.SplitSeq(text, ",") {
			v, err := parse(strings.TrimSpace(f))
			if err != nil {
				return nil, fmt.Errorf("a value %q: %w", f, err)
			}
			out = append(out, v)
		}
		return checkCount(out)
	}
	to, stepText, hasStep := strings.Cut(to, "/")
	lo, err1 := parse(from)
	hi, err2 := parse(to)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("a range %q: %w", text, err)
	}
	if hasStep {
		var err error
		if step, err = parse(stepText); err != nil {
			return nil, fmt.Errorf("a step %q: %w", stepText, err)
		}
	}
	switch {
	case step <= 0:
		return nil, fmt.Errorf("a range %q needs a positive step: FROM..TO/STEP", text)
	case hi < lo:
		return nil, fmt.Errorf("a range %q ends before it starts", text)
	case (hi-lo)/step >= maxSweepValues:
		return nil, fmt.Errorf("a range %q of more than %d values", text, maxSweepValues)
	}
	var out []T
	for v := lo; v <= hi; v = add(v, step) {
		out = append(out, v)
	}
	return checkCount(out)
}

func checkCount[T any](vs []T) ([]T, error) {
	if len(vs) > maxSweepValues {
		return nil, fmt.Errorf("%d values, at most %d", len(vs), maxSweepValues)
	}
	return vs, nil
}

// durationText is d as a rules file would say it: 90s, 5m, 1h30m.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// apply is r with value i of the sweep, or why the rule cannot take it,
// as a rules file's check would say. A cooldown equal to the window (a
// cooldown left out is the window) follows the window.
func (s *Sweep) apply(r rules.Rule, i int) (rules.Rule, error) {
	switch s.Setting {
	case "threshold":
		r.Threshold = s.thresholds[i]
		limit := int64(rules.MaxThreshold)
		if r.Metric == alert.Distinct {
			limit = rules.MaxDistinctThreshold
		}
		if r.Threshold <= 0 || r.Threshold > limit {
			return r, fmt.Errorf("--sweep: %s's threshold must be between 1 and %d, not %d", r.Name, limit, r.Threshold)
		}
	case "window":
		w := s.windows[i]
		if r.Cooldown == r.Window {
			r.Cooldown = w
		}
		r.Window = w
		switch {
		case w < time.Second || w%time.Second != 0:
			return r, fmt.Errorf("--sweep: %s's window must be a whole number of seconds, at least 1s, not %v", r.Name, w)
		case r.Lateness > rules.MaxLateness*w:
			return r, fmt.Errorf("--sweep: %s's window of %v is shorter than its allowed_lateness (%v) allows: at least 1/%d of it",
				r.Name, w, r.Lateness, rules.MaxLateness)
		}
	}
	return r, nil
}

// sets is the sets with the rule alone, value i of the sweep applied: a
// rule's alerts, windows and cooldowns are its own, so its figures do not
// depend on the other rules. A set without the rule has no rules.
func (s *Sweep) sets(sets []RuleSet, i int) ([]RuleSet, error) {
	out := make([]RuleSet, len(sets))
	found := false
	for j, set := range sets {
		out[j] = RuleSet{At: set.At, From: set.From}
		for _, r := range set.Rules {
			if r.Name != s.Rule {
				continue
			}
			swept, err := s.apply(r, i)
			if err != nil {
				return nil, err
			}
			out[j].Rules, found = []rules.Rule{swept}, true
		}
	}
	if !found {
		return nil, fmt.Errorf("--sweep: no rule %q to sweep", s.Rule)
	}
	return out, nil
}

// run replays each value, as many at once as Go has processors, and
// scores the rule at each.
func (s *Sweep) run(ctx context.Context, sets []RuleSet, evs *Events, tr truth, engine Engine, progress func(int)) ([]RuleScore, error) {
	swept := make([][]RuleSet, len(s.Values))
	for i := range s.Values {
		var err error
		if swept[i], err = s.sets(sets, i); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows := make([]RuleScore, len(s.Values))
	errs := make([]error, len(s.Values))
	done := &shareProgress{done: make([]int, len(s.Values)), report: progress}
	limit := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range s.Values {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			rep, err := replay(ctx, swept[i], evs, replayConfig{engine: engine, parallel: 1, score: &scoring{fraud: tr.fraud},
				progress: func(d int) { done.add(i, d) }})
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			rows[i] = tr.score(rep).Rules[0]
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rows, nil
}

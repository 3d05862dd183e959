package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/config"
)

// Qualities gives each rule's alerts judged by their orders' outcomes
// over each period up to now: the outcome store's live figures
// (docs/outcomes.md, Live quality).
type Qualities interface {
	Quality(ctx context.Context, now time.Time, periods ...time.Duration) ([]outcome.RuleQuality, error)
}

// qualityWait bounds the wait for the outcomes sent to be counted.
const qualityWait = 5 * time.Second

// readQuality reads the rules' figures over period, waiting until every
// rule counts the fraud outcomes sent, or ctx ends: the outcomes topic is
// read on its own, and may lag the events. It returns the last figures
// read, and an error only when none could be.
func readQuality(ctx context.Context, q Qualities, period time.Duration, fraudSent int) ([]outcome.RuleQuality, error) {
	var last []outcome.RuleQuality
	var lastErr error
	for {
		got, err := q.Quality(ctx, time.Now(), period)
		if err == nil {
			last, lastErr = got, nil
			if counted(got, fraudSent) {
				return got, nil
			}
		} else if last == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if last == nil && lastErr == nil {
				lastErr = ctx.Err()
			}
			return last, lastErr
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// counted says whether each rule's figures hold fraudSent fraud orders (or
// say that they hold only the newest).
func counted(qs []outcome.RuleQuality, fraudSent int) bool {
	for _, q := range qs {
		if q.FraudOrders < fraudSent && !q.Truncated {
			return false
		}
	}
	return true
}

// qualityBlock is the summary's rule quality: each rule's live figures,
// in the order of the rules.
func qualityBlock(cfg *config.Config, qs []outcome.RuleQuality, err error) string {
	var b strings.Builder
	b.WriteString("\n  rule quality, live from the outcome store: the alerts of this run judged by the outcomes sent\n")
	if err != nil {
		fmt.Fprintf(&b, "  (not available: %v)\n", err)
		return b.String()
	}
	byRule := map[string]outcome.RuleQuality{}
	for _, q := range qs {
		byRule[q.Rule] = q
	}
	width := len("rule")
	for _, r := range cfg.Rules {
		width = max(width, len(r.Name))
	}
	row := func(rule string, cells ...any) {
		fmt.Fprintf(&b, "  %-*s  %6s  %12s  %9s  %19s  %6s  %6s\n", append([]any{width, rule}, cells...)...)
	}
	row("rule", "alerts", "with outcome", "precision", "fraud orders caught", "missed", "recall")
	truncated := false
	for _, r := range cfg.Rules {
		q, ok := byRule[r.Name]
		if !ok {
			row(r.Name, "-", "-", "-", "-", "-", "-")
			continue
		}
		truncated = truncated || q.Truncated
		row(r.Name, fmt.Sprint(q.Alerts), fmt.Sprint(q.WithOutcome), percent(q.Precision),
			fmt.Sprint(q.Caught), fmt.Sprint(q.Missed), percent(ratio(q.Caught, q.FraudOrders)))
	}
	b.WriteString("  precision: fraud alerts / alerts with a fraud or legit outcome (unclear is no verdict);\n" +
		"  caught: fraud orders an alert of the rule listed (live, only the listed ones count; a backtest also\n" +
		"  counts those in the alert's window after the crossing); recall: caught / fraud orders\n")
	if truncated {
		b.WriteString("  (the run held more alerts or fraud orders than one read takes: these are the newest)\n")
	}
	return b.String()
}

// ratio is n/d, nil when d is 0.
func ratio(n, d int) *float64 {
	if d == 0 {
		return nil
	}
	r := float64(n) / float64(d)
	return &r
}

// percent shows a share as a whole percentage, "-" when there is none.
func percent(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", *r*100)
}

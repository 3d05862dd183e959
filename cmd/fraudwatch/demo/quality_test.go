package demo

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
)

// fakeQualities answers from a list, one answer a call, the last one
// again once the list is used up.
type fakeQualities struct {
	mu      sync.Mutex
	answers [][]outcome.RuleQuality
	err     error
	calls   int
	periods []time.Duration
}

func (f *fakeQualities) Quality(_ context.Context, _ time.Time, periods ...time.Duration) ([]outcome.RuleQuality, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.periods = periods
	if f.err != nil {
		return nil, f.err
	}
	return f.answers[min(f.calls, len(f.answers))-1], nil
}

func share(v float64) *float64 { return &v }

func TestQualityBlock(t *testing.T) {
	cfg, _, err := buildConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	figures := []outcome.RuleQuality{
		{Rule: ruleCustomer, Alerts: 9, Fraud: 5, Legit: 2, Unclear: 1, WithOutcome: 7, Precision: share(5.0 / 7), FraudOrders: 40, Caught: 14, Missed: 26},
		{Rule: ruleCard, Alerts: 3, WithOutcome: 0, FraudOrders: 40, Missed: 40},
		{Rule: ruleIP, Alerts: 2, Fraud: 2, WithOutcome: 2, Precision: share(1), FraudOrders: 0},
	}
	tests := []struct {
		name string
		qs   []outcome.RuleQuality
		err  error
		want []string
		not  []string
	}{
		{"figures", figures, nil, []string{
			"rule quality, live from the outcome store",
			"rule                    alerts  with outcome  precision  fraud orders caught  missed  recall\n",
			// precision 5/7, recall 14/40
			"  orders-per-customer-1m       9             7       71 %                   14      26    35 %\n",
			// no alert with an outcome: no precision; none caught
			"  amount-per-card-10m          3             0          -                    0      40     0 %\n",
			// no fraud orders: no recall
			"  orders-per-ip-1m             2             2      100 %                    0       0       -\n",
			// a rule the store has no figures for
			"  orders-per-device-1m         -             -          -                    -       -       -\n",
			"live, only the listed ones count; a backtest also\n  counts those in the alert's window after the crossing",
		}, []string{"newest", "not available"}},
		{"truncated", []outcome.RuleQuality{{Rule: ruleCustomer, Alerts: 1, Truncated: true}}, nil,
			[]string{"these are the newest"}, nil},
		{"error", nil, errors.New("redis: connection refused"), []string{"(not available: redis: connection refused)"}, []string{"precision:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := qualityBlock(&cfg, tt.qs, tt.err)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("block lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("block has %q:\n%s", n, got)
				}
			}
		})
	}
}

// The figures are read once every rule counts the fraud outcomes sent:
// the outcomes topic may lag.
func TestReadQualityWaitsForTheOutcomes(t *testing.T) {
	behind := []outcome.RuleQuality{{Rule: ruleCustomer, FraudOrders: 3}, {Rule: ruleCard, FraudOrders: 5}}
	caughtUp := []outcome.RuleQuality{{Rule: ruleCustomer, FraudOrders: 5, Caught: 2}, {Rule: ruleCard, FraudOrders: 5}}
	f := &fakeQualities{answers: [][]outcome.RuleQuality{behind, behind, caughtUp}}
	got, err := readQuality(t.Context(), f, 90*time.Second, 5)
	if err != nil || len(got) != 2 || got[0].Caught != 2 || f.calls != 3 {
		t.Errorf("read %+v, %v after %d calls; want the third answer", got, err, f.calls)
	}
	if len(f.periods) != 1 || f.periods[0] != 90*time.Second {
		t.Errorf("asked for periods %v, want [1m30s]", f.periods)
	}

	// Never caught up: the last figures, once ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	f = &fakeQualities{answers: [][]outcome.RuleQuality{behind}}
	if got, err := readQuality(ctx, f, time.Minute, 5); err != nil || len(got) != 2 || f.calls < 2 {
		t.Errorf("read %+v, %v after %d calls; want the figures behind", got, err, f.calls)
	}
	// Truncated figures hold only the newest: they are not waited on.
	f = &fakeQualities{answers: [][]outcome.RuleQuality{{{Rule: ruleCustomer, FraudOrders: 3, Truncated: true}}}}
	if _, err := readQuality(t.Context(), f, time.Minute, 5); err != nil || f.calls != 1 {
		t.Errorf("%v after %d calls; want one", err, f.calls)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	f = &fakeQualities{err: errors.New("store down")}
	if _, err := readQuality(ctx, f, time.Minute, 5); err == nil || err.Error() != "store down" {
		t.Errorf("err = %v, want the store's", err)
	}
}

// With Options.Quality, the summary's block shows the live figures.
func TestLiveQuality(t *testing.T) {
	cfg, _, err := buildConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeQualities{answers: [][]outcome.RuleQuality{{{Rule: ruleIP, Alerts: 4, Fraud: 2, WithOutcome: 2, Precision: share(1), FraudOrders: 8, Caught: 8}}}}
	opts := Options{Quality: func(*app.App) Qualities { return f }}
	got := liveQuality(opts, nil, &cfg, time.Minute, produced{fraud: 8})
	if !strings.Contains(got, "  orders-per-ip-1m             4             2      100 %                    8       0   100 %\n") {
		t.Errorf("block:\n%s", got)
	}
	if len(f.periods) != 1 || f.periods[0] < time.Minute {
		t.Errorf("asked for periods %v, want one holding the run", f.periods)
	}
}

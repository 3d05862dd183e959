package outcome

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// Quality is each rule's live quality over each of periods up to now
// (the status page asks 7 and 30 days), from what Redis holds now, not
// from counters: the alerts the rule opened in the period and their
// outcomes, and the orders labelled fraud in the period that an alert of
// the rule listed (Caught) or not (Missed). Live, a rule catches only the
// orders its alerts list: a fraud order in the window of a group it
// alerted on, but not listed, counts as missed (a backtest sees the
// windows: docs/outcomes.md). Rules with neither an alert nor a catch in
// the longest period have no row (QualityOf names rules that must). Rows
// come by rule, then in the order of periods. A read is bounded:
// StoreConfig.MaxRead alerts and fraud orders, the newest; a period that
// held more says Truncated.
func (s *Store) Quality(ctx context.Context, now time.Time, periods ...time.Duration) ([]RuleQuality, error) {
	return s.QualityOf(ctx, now, nil, periods...)
}

// QualityOf is Quality with a row for each of rules too (the rules in
// force), whether or not they alerted.
func (s *Store) QualityOf(ctx context.Context, now time.Time, rules []string, periods ...time.Duration) ([]RuleQuality, error) {
	if len(periods) == 0 {
		return nil, nil
	}
	longest := slices.Max(periods)
	if longest <= 0 {
		return nil, fmt.Errorf("outcome: quality over %v: periods must be positive", longest)
	}
	since := now.Add(-longest)
	alerts, err := s.s.StoredAlertsSince(ctx, s.keys, since, s.cfg.MaxRead+1)
	if err != nil {
		return nil, fmt.Errorf("outcome: read the alerts' outcomes: %w", err)
	}
	fraud, err := s.s.FraudOrdersSince(ctx, s.keys, since, s.cfg.MaxRead+1)
	if err != nil {
		return nil, fmt.Errorf("outcome: read the fraud orders: %w", err)
	}
	// Cut at MaxRead: a period reaching past the oldest read is truncated.
	var alertsFrom, fraudFrom time.Time
	if len(alerts) > s.cfg.MaxRead {
		alerts = alerts[:s.cfg.MaxRead]
		alertsFrom = alerts[len(alerts)-1].OpenedAt
	}
	if len(fraud) > s.cfg.MaxRead {
		fraud = fraud[:s.cfg.MaxRead]
		fraudFrom = fraud[len(fraud)-1].At
	}
	names := map[string]bool{}
	for _, r := range rules {
		names[r] = true
	}
	for _, a := range alerts {
		names[a.Rule] = true
	}
	for _, f := range fraud {
		for _, id := range f.Alerts {
			names[ruleOf(id)] = true
		}
	}
	var out []RuleQuality
	for _, p := range periods {
		from := now.Add(-p)
		truncated := (!alertsFrom.IsZero() && alertsFrom.After(from)) || (!fraudFrom.IsZero() && fraudFrom.After(from))
		out = append(out, qualityIn(alerts, fraud, names, from, now, p, truncated)...)
	}
	slices.SortStableFunc(out, func(a, b RuleQuality) int { return strings.Compare(a.Rule, b.Rule) })
	return out, nil
}

// ruleOf is the rule of an alert id, rule/event_id: rule names hold no
// '/'.
func ruleOf(id string) string {
	rule, _, _ := strings.Cut(id, "/")
	return rule
}

// qualityIn is each rule's quality in (from, to].
func qualityIn(alerts []lua.StoredAlert, fraud []lua.FraudOrder, rules map[string]bool, from, to time.Time, p time.Duration, truncated bool) []RuleQuality {
	in := func(t time.Time) bool { return t.After(from) && !t.After(to) }
	byRule := map[string]*RuleQuality{}
	for r := range rules {
		byRule[r] = &RuleQuality{Rule: r, Period: p, Truncated: truncated}
	}
	for _, a := range alerts {
		if !in(a.OpenedAt) {
			continue
		}
		q := byRule[a.Rule]
		q.Alerts++
		switch a.Outcome {
		case "fraud":
			q.Fraud++
		case "legit":
			q.Legit++
		case "unclear":
			q.Unclear++
		}
	}
	orders := 0
	for _, f := range fraud {
		if !in(f.At) {
			continue
		}
		orders++
		caught := map[string]bool{}
		for _, id := range f.Alerts {
			if r := ruleOf(id); !caught[r] {
				caught[r] = true
				byRule[r].Caught++
			}
		}
	}
	out := make([]RuleQuality, 0, len(byRule))
	for _, q := range byRule {
		q.FraudOrders, q.Missed = orders, orders-q.Caught
		q.WithOutcome = q.Fraud + q.Legit
		if q.WithOutcome > 0 {
			p := float64(q.Fraud) / float64(q.WithOutcome)
			q.Precision = &p
		}
		out = append(out, *q)
	}
	return out
}

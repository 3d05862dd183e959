package rules

import (
	"github.com/prometheus/client_golang/prometheus"
)

// skip is why an event an enabled rule was evaluated against did not go
// into its windows: the reason label of fraudwatch_rule_skipped_total.
// The engine checks them in this order, and counts the first that holds.
type skip uint8

const (
	skipEventType skip = iota // a refund, which count and distinct rules ignore
	skipGroupBy               // the event lacks a group_by field
	skipWhere                 // the event does not meet the rule's where:
	skipField                 // the order lacks a distinct rule's field
	numSkips
)

// SkipReasons are the reason labels of fraudwatch_rule_skipped_total, in
// the order the engine checks them (docs/operations.md).
var SkipReasons = [numSkips]string{"event_type", "missing_group_by", "where", "missing_field"}

// ruleCounters are a rule's series of fraudwatch_rule_evaluations_total
// and fraudwatch_rule_skipped_total, resolved once a rule set so that the
// events pay no label lookup.
type ruleCounters struct {
	evaluated prometheus.Counter
	skipped   [numSkips]prometheus.Counter
}

// tally is what one batch did to one rule; it goes into the rule's
// counters once the batch is done, an atomic add a series rather than one
// an event.
type tally struct {
	evaluated int
	skipped   [numSkips]int
}

// newEvaluationMetrics makes the two counter vectors.
func newEvaluationMetrics() (evaluations, skipped *prometheus.CounterVec) {
	evaluations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_rule_evaluations_total",
		Help: "Events an enabled rule was evaluated against: every order and refund processed while it is in force.",
	}, []string{"rule"})
	skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_rule_skipped_total",
		Help: "Evaluated events a rule did not count, by the first reason found: event_type (a refund, which count and " +
			"distinct rules ignore), missing_group_by, where (its where: not met), missing_field (a distinct rule's field).",
	}, []string{"rule", "reason"})
	return evaluations, skipped
}

// countersOf resolves a rule's series, making them when they are new:
// a rule that stays through a reload keeps its counts.
func (e *Engine) countersOf(name string) ruleCounters {
	c := ruleCounters{evaluated: e.evaluations.WithLabelValues(name)}
	for s := range c.skipped {
		c.skipped[s] = e.skipped.WithLabelValues(name, SkipReasons[s])
	}
	return c
}

// forget deletes the series of the rules of old that rs no longer holds,
// so that removed and renamed rules do not pile up.
func (e *Engine) forget(old []active, rs []Rule) {
	kept := make(map[string]bool, len(rs))
	for i := range rs {
		kept[rs[i].Name] = true
	}
	for i := range old {
		if name := old[i].Name; !kept[name] {
			e.evaluations.DeleteLabelValues(name)
			e.skipped.DeletePartialMatch(prometheus.Labels{"rule": name})
		}
	}
}

// record adds a batch's tallies, by rule of rs, to the rules' counters.
func record(rs []active, ts []tally) {
	for k := range ts {
		t := &ts[k]
		if t.evaluated == 0 {
			continue
		}
		c := &rs[k].counters
		c.evaluated.Add(float64(t.evaluated))
		for s, n := range t.skipped {
			if n > 0 {
				c.skipped[s].Add(float64(n))
			}
		}
	}
}

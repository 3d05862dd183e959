package rules

import (
	"slices"
	"strconv"

	"github.com/fraudwatch/fraudwatch/event"
)

// Matches reports whether the event meets every condition of the rule's
// where: filter (a rule without one sees every event).
func (r *Rule) Matches(ev *event.Event) bool {
	for i := range r.Where {
		if !r.Where[i].matches(ev) {
			return false
		}
	}
	return true
}

func (c *Condition) matches(ev *event.Event) bool {
	v, ok := ev.Field(c.Field)
	if !ok {
		// Absent is "none of NotIn", and nothing else.
		return c.In == nil && !c.ranged()
	}
	if c.In != nil && !slices.Contains(c.In, v) {
		return false
	}
	if slices.Contains(c.NotIn, v) {
		return false
	}
	if !c.ranged() {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if c.Field == "amount" {
		n, err = ev.Amount, nil
	}
	if err != nil {
		return false // not an integer: outside every range
	}
	return (c.GTE == nil || n >= *c.GTE) && (c.GT == nil || n > *c.GT) &&
		(c.LTE == nil || n <= *c.LTE) && (c.LT == nil || n < *c.LT)
}

func (c *Condition) ranged() bool {
	return c.GTE != nil || c.GT != nil || c.LTE != nil || c.LT != nil
}

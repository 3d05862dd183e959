package rules

import (
	"slices"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/event"
)

// Bounds of an alert's text, in bytes before JSON escaping (at worst 6
// times as long: \u0001 for a control byte). The alert travels through a
// Kafka topic into Slack, where a 10 KB address helps nobody; bounded, it
// stays far below the alerts topic's message limit (alert.MaxMessageBytes).
//
// ID and EventID are not cut, since they name the crossing. Others bound
// them: event.Decode the event ids (event.MaxIDBytes), config.ParseRules
// the rule names, package lua the keys.
const (
	// maxDisplayValue bounds each group value, and maxGroupValues all of
	// them together (a rule with many group_by fields gets less of each).
	maxDisplayValue = 1024
	maxGroupValues  = 16 * maxDisplayValue
	// maxAlertText bounds order_id and the description.
	maxAlertText = 1024
	// maxNameText bounds a field name (each of group_by, and field) and
	// the channel; maxGroupNames all of group_by together.
	maxNameText   = 256
	maxGroupNames = 16 * maxNameText
	maxCurrency   = 16
)

// displayValues returns the group values an alert shows, each cut on a
// rune boundary to maxDisplayValue bytes, or less when there are so many
// that together they would exceed maxGroupValues.
func displayValues(values []string) []string {
	return clipAll(values, maxDisplayValue, maxGroupValues)
}

// clipAll returns a copy of ss with each string clipped to each bytes, or
// to an equal share of total when that is less.
func clipAll(ss []string, each, total int) []string {
	if len(ss) == 0 {
		return slices.Clone(ss)
	}
	n := min(each, total/len(ss))
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clipText(s, n)
	}
	return out
}

// clipText cuts s to at most n bytes on a rune boundary, then marks the
// cut with "…" (3 bytes more).
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// appendGroupValues appends the rule's group_by values of the event to
// values; false when the event lacks any of them.
func appendGroupValues(values []string, r *Rule, ev *event.Event) ([]string, bool) {
	for _, f := range r.GroupBy {
		v, ok := ev.Field(f)
		if !ok {
			return values, false
		}
		values = append(values, v)
	}
	return values, true
}

package config

import (
	"fmt"
	"strings"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

// description checks a rule's description: every placeholder it names must
// be one an alert renders (alert.Placeholders), or it would reach Slack as
// it is written.
func (c *ruleChecker) description(d string) string {
	if unknown := alert.UnknownPlaceholders(d); len(unknown) > 0 {
		c.bad("description", "unknown placeholder %s: a description may name %s",
			strings.Join(unknown, ", "), strings.Join(alert.Placeholders, ", "))
	}
	return d
}

// DescriptionWarnings name the rules whose description writes their
// threshold as a number of its own: after a reload changes the threshold,
// such a description contradicts the alert it is part of.
func DescriptionWarnings(file string, rs []rules.Rule) []string {
	var out []string
	for _, r := range rs {
		if lit := alert.LiteralThreshold(r.Description, r.Metric, r.Threshold); lit != "" {
			out = append(out, fmt.Sprintf("%s: rule %q: description: writes its threshold as %q, which a reload of the threshold leaves stale; write {threshold}",
				file, r.Name, lit))
		}
	}
	return out
}

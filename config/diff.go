package config

import (
	"fmt"
	"strings"

	"github.com/fraudwatch/fraudwatch/rules"
)

// DiffText says, for people, what replacing the rules of oldFile with
// those of newFile does (fraudwatch check --diff): a count line, then one
// line a rule added (+), removed (-) or changed (~), with the fields that
// change and whether its windows start afresh.
func DiffText(oldFile, newFile string, old, new []rules.Rule) string {
	changes := rules.Diff(old, new)
	counts := map[string]int{}
	for _, c := range changes {
		counts[c.Kind]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s against %s: %d added, %d removed, %d changed, %d unchanged\n", newFile, oldFile,
		counts["added"], counts["removed"], counts["changed"], len(new)-counts["added"]-counts["changed"])
	for _, c := range changes {
		switch c.Kind {
		case "added":
			fmt.Fprintf(&b, "  + %s: new, its windows start empty\n", c.Rule)
		case "removed":
			fmt.Fprintf(&b, "  - %s: removed, its windows expire on their own\n", c.Rule)
		default:
			fields := make([]string, len(c.Fields))
			for i, f := range c.Fields {
				fields[i] = f.String()
			}
			effect := "keeps its windows"
			if c.Resets {
				effect = "starts its windows afresh: its definition changed"
			}
			fmt.Fprintf(&b, "  ~ %s: %s (%s)\n", c.Rule, strings.Join(fields, ", "), effect)
		}
	}
	return b.String()
}

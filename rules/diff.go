package rules

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Change is one difference between two rule sets, by rule name.
type Change struct {
	Rule string
	// Kind is "added", "removed" or "changed".
	Kind string
	// Fields are the rule file's fields that differ, with their old and
	// new values (changed rules only), in the file's order.
	Fields []FieldChange
	// Resets is true when the rule's windows start afresh: its definition
	// changed (Fingerprint). A rule added starts afresh too, and a rule
	// removed leaves its windows to expire.
	Resets bool
}

// FieldChange is one field of a changed rule.
type FieldChange struct {
	Field    string
	Old, New string
}

// String is the change as check --diff and the reload log show it:
// "threshold 3 → 4".
func (f FieldChange) String() string {
	return f.Field + " " + f.Old + " → " + f.New
}

// Diff says what replacing the rules old with new does: rules added,
// removed and changed, in new's order, then the removed ones in old's.
func Diff(old, new []Rule) []Change {
	byName := make(map[string]*Rule, len(old))
	for i := range old {
		byName[old[i].Name] = &old[i]
	}
	kept := map[string]bool{}
	var out []Change
	for i := range new {
		n := &new[i]
		o, ok := byName[n.Name]
		if !ok {
			out = append(out, Change{Rule: n.Name, Kind: "added", Resets: true})
			continue
		}
		kept[n.Name] = true
		var fields []FieldChange
		for _, f := range ruleFields {
			if ov, nv := f.get(o), f.get(n); ov != nv {
				fields = append(fields, FieldChange{Field: f.name, Old: ov, New: nv})
			}
		}
		if len(fields) > 0 {
			out = append(out, Change{Rule: n.Name, Kind: "changed", Fields: fields, Resets: o.State() != n.State()})
		}
	}
	for i := range old {
		if !kept[old[i].Name] {
			out = append(out, Change{Rule: old[i].Name, Kind: "removed"})
		}
	}
	return out
}

// ruleFields renders each field of a rule as the rules file names it.
var ruleFields = []struct {
	name string
	get  func(*Rule) string
}{
	{"description", func(r *Rule) string { return strconv.Quote(r.Description) }},
	{"metric", func(r *Rule) string { return string(r.Metric) }},
	{"field", func(r *Rule) string { return r.Field }},
	{"group_by", func(r *Rule) string { return "[" + strings.Join(r.GroupBy, ", ") + "]" }},
	{"window_type", func(r *Rule) string { return string(r.windowType()) }},
	{"window", func(r *Rule) string { return duration(r.Window) }},
	{"allowed_lateness", func(r *Rule) string { return duration(r.Lateness) }},
	{"threshold", func(r *Rule) string { return strconv.FormatInt(r.Threshold, 10) }},
	{"where", func(r *Rule) string { return whereText(r.Where) }},
	{"cooldown", func(r *Rule) string { return duration(r.Cooldown) }},
	{"severity", func(r *Rule) string { return string(r.Severity) }},
	{"mode", func(r *Rule) string { return string(r.Mode) }},
	{"channel", func(r *Rule) string { return r.Channel }},
	{"enabled", func(r *Rule) string { return strconv.FormatBool(r.Enabled) }},
	{"evidence", func(r *Rule) string { return strconv.Itoa(r.Evidence) }},
}

func duration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return alert.FormatDuration(d)
}

// whereText renders a where: filter compactly, one condition a field.
func whereText(where []Condition) string {
	if len(where) == 0 {
		return "none"
	}
	parts := make([]string, len(where))
	for i, c := range where {
		var tests []string
		if c.In != nil {
			tests = append(tests, "in ["+strings.Join(c.In, ", ")+"]")
		}
		if c.NotIn != nil {
			tests = append(tests, "not ["+strings.Join(c.NotIn, ", ")+"]")
		}
		for _, b := range []struct {
			op string
			v  *int64
		}{{">=", c.GTE}, {">", c.GT}, {"<=", c.LTE}, {"<", c.LT}} {
			if b.v != nil {
				tests = append(tests, fmt.Sprintf("%s %d", b.op, *b.v))
			}
		}
		parts[i] = c.Field + " " + strings.Join(tests, " ")
	}
	return strings.Join(parts, "; ")
}

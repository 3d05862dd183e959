package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/rules"
)

// maxFieldName bounds a declared field's name, in bytes: an alert clips
// longer names anyway.
const maxFieldName = 256

// eventFields reads the rules file's event_fields: the fields beyond the
// schema (event.Fields) that the deployment's events carry, which rules
// may then name without a warning. A documented field, a repeat or a name
// no event could carry as written is an error.
func eventFields(v any, file string) ([]string, []error) {
	var layout struct {
		EventFields []string `mapstructure:"event_fields"`
	}
	opts := decodeOptions{File: file}
	if errs := decodeStrict(map[string]any{"event_fields": v}, &layout, opts); len(errs) > 0 {
		return nil, errs
	}
	var errs []error
	for i, f := range layout.EventFields {
		msg := ""
		switch {
		case strings.TrimSpace(f) == "":
			msg = "is empty"
		case strings.TrimSpace(f) != f:
			msg = fmt.Sprintf("%q has white space around it: write the name as events write it", f)
		case strings.ContainsFunc(f, unicode.IsControl):
			msg = fmt.Sprintf("%q holds a control character", f)
		case len(f) > maxFieldName:
			msg = fmt.Sprintf("is %d bytes long, at most %d", len(f), maxFieldName)
		case slices.Contains(event.Fields, f):
			msg = fmt.Sprintf("%q is a field of the documented schema (docs/events.md): rules name it without declaring it", f)
		case slices.Index(layout.EventFields, f) != i:
			msg = fmt.Sprintf("repeats %q", f)
		}
		if msg != "" {
			errs = append(errs, opts.fieldError(fmt.Sprintf("event_fields[%d]", i), msg))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return layout.EventFields, nil
}

// FieldWarning is a field a rule names that is neither in the schema
// (event.Fields) nor declared in event_fields: most likely a typo, which
// no event carries, so that the rule never fires.
type FieldWarning struct {
	File string
	Rule string
	// Key is where the rule names it: group_by[0], field, where.currency.
	Key   string
	Field string
	// Suggestion is the known field it is nearest to, "" when none is
	// near.
	Suggestion string
	// effect says what events lacking the field do to the rule.
	effect string
}

func (w FieldWarning) String() string {
	s := fmt.Sprintf("%s: rule %q: %s: %q is neither a documented event field (docs/events.md) nor declared in event_fields: %s",
		w.File, w.Rule, w.Key, w.Field, w.effect)
	if w.Suggestion != "" {
		s += " (did you mean " + w.Suggestion + "?)"
	}
	return s
}

// FieldWarnings lists, rule by rule, every field of group_by, field and
// where: that is neither in the schema nor in declared, the event_fields
// of file. Disabled rules are included: they would never fire once
// enabled.
func FieldWarnings(file string, rs []rules.Rule, declared []string) []FieldWarning {
	known := append(slices.Clone(event.Fields), declared...)
	isKnown := make(map[string]bool, len(known))
	for _, f := range known {
		isKnown[f] = true
	}
	var out []FieldWarning
	warn := func(r *rules.Rule, key, field, effect string) {
		if !isKnown[field] {
			out = append(out, FieldWarning{File: file, Rule: r.Name, Key: key, Field: field,
				Suggestion: suggestField(field, known), effect: effect})
		}
	}
	for i := range rs {
		r := &rs[i]
		for j, f := range r.GroupBy {
			warn(r, fmt.Sprintf("group_by[%d]", j), f, "events lacking it skip the rule")
		}
		if r.Field != "" {
			warn(r, "field", r.Field, "orders lacking it are not counted")
		}
		for _, c := range r.Where {
			effect := "events lacking it do not meet the condition, and skip the rule"
			if c.In == nil && c.GTE == nil && c.GT == nil && c.LTE == nil && c.LT == nil {
				effect = "every event lacking it meets the condition, so it filters nothing out"
			}
			key := "where." + c.Field
			if strings.ContainsFunc(c.Field, func(r rune) bool { return !unicode.IsPrint(r) }) {
				key = "where." + strconv.Quote(c.Field) // a line break in it would forge a line of check's
			}
			warn(r, key, c.Field, effect)
		}
	}
	return out
}

// FieldWarnings are FieldWarnings of the configuration's rules file.
func (c *Config) FieldWarnings() []FieldWarning {
	return FieldWarnings(c.RulesFile, c.Rules, c.EventFields)
}

// suggestField names the known field that name is most likely a slip
// for: one written alike but for case and separators (customerId, Customer-ID),
// else the nearest within a bound that grows with the name (none for two
// characters, one edit up to five, two beyond), so that a short name of
// the events' own (id, os) is not taken for ip. Ties go to the first in
// known: the schema's order, then the declared.
func suggestField(name string, known []string) string {
	fold := func(s string) string {
		return strings.Map(func(r rune) rune {
			if strings.ContainsRune("_-. ", r) {
				return -1
			}
			return unicode.ToLower(r)
		}, s)
	}
	folded := fold(name)
	for _, k := range known {
		if fold(k) == folded {
			return k
		}
	}
	bound := 2
	switch n := utf8.RuneCountInString(name); {
	case n <= 2:
		return ""
	case n <= 5:
		bound = 1
	}
	best, bestD := "", bound+1
	for _, k := range known {
		// Lengths further apart than the bound are further apart in edits:
		// a long name costs no distance to compute.
		if abs(utf8.RuneCountInString(k)-utf8.RuneCountInString(name)) > bound {
			continue
		}
		if d := typoDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// typoDistance is the edit distance of a and b, in runes, counting a swap
// of two neighbours as one edit, as typing makes it (emial, email).
func typoDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// d[i][j] is the distance of x[:i] and y[:j]; three rows suffice.
	prev2, prev, cur := make([]int, len(y)+1), make([]int, len(y)+1), make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}

func abs(n int) int { return max(n, -n) }

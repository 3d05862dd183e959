package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/rules"
)

// conditionKeys are the tests a where: condition written as a mapping may
// hold.
var conditionKeys = []string{"in", "not", "gte", "gt", "lte", "lt"}

// currencyField is upper-cased and checked as a currency code: events carry
// currencies upper-case, and "krw" would otherwise never match.
const currencyField = "currency"

// where reads a rule's where: filter, a mapping from event field to
// condition (docs/configuration.md, Rules). Its conditions come sorted by field, since a
// YAML mapping has no order; the values of a list keep the file's order.
// where: with nothing, or with an empty mapping, filters nothing.
func (c *ruleChecker) where(v any) []rules.Condition {
	if v == nil {
		return nil
	}
	m, _, ok := c.mapping("where", v, "a field name must be a string (quote it)")
	if !ok {
		c.bad("where", "expected a mapping of event fields to conditions, got %s", yamlKind(v))
		return nil
	}
	var out []rules.Condition
	for _, f := range slices.Sorted(maps.Keys(m)) {
		if strings.TrimSpace(f) == "" {
			c.bad("where", "has an empty field name")
			continue
		}
		out = append(out, c.condition(f, m[f]))
	}
	return out
}

// mapping returns v's string keys when v is a mapping, reporting with msg
// each key YAML did not make a string (5:, true:): neither event fields
// nor tests are named by one. nonString counts those keys.
func (c *ruleChecker) mapping(path string, v any, msg string) (_ map[string]any, nonString int, ok bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, 0, true
	case map[any]any:
		out := map[string]any{}
		var bad []string
		for k, x := range m {
			if s, ok := k.(string); ok {
				out[s] = x
				continue
			}
			if k == nil {
				k = "~"
			}
			bad = append(bad, fmt.Sprintf("%s.%v", path, k))
		}
		slices.Sort(bad)
		for _, b := range bad {
			c.bad(b, "%s", msg)
		}
		return out, len(bad), true
	}
	return nil, 0, false
}

// condition reads the condition of one field: a list of values (one of
// them) or a mapping of tests.
func (c *ruleChecker) condition(field string, v any) rules.Condition {
	path := "where." + field
	cond := rules.Condition{Field: field}
	if list, ok := v.([]any); ok {
		cond.In = c.values(path, field, list)
		return cond
	}
	m, unknown, ok := c.mapping(path, v, "unknown key")
	if !ok {
		c.bad(path, "expected a list of values or a mapping of tests (%s), got %s",
			strings.Join(conditionKeys, ", "), yamlKind(v))
		return cond
	}
	tests := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kpath := path + "." + k
		if !slices.Contains(conditionKeys, k) {
			unknown++
			msg := "unknown key"
			if guess := guessTest(k); guess != "" {
				msg += fmt.Sprintf(" (did you mean %s.%s?)", path, guess)
			}
			c.bad(kpath, "%s", msg)
			continue
		}
		tests++
		switch k {
		case "in", "not":
			list, ok := m[k].([]any)
			if !ok {
				c.bad(kpath, "expected a list of values, got %s (one value is a list too: [value])", yamlKind(m[k]))
				continue
			}
			if k == "in" {
				cond.In = c.values(kpath, field, list)
			} else {
				cond.NotIn = c.values(kpath, field, list)
			}
		case "gte":
			cond.GTE = c.bound(kpath, m[k])
		case "gt":
			cond.GT = c.bound(kpath, m[k])
		case "lte":
			cond.LTE = c.bound(kpath, m[k])
		case "lt":
			cond.LT = c.bound(kpath, m[k])
		}
	}
	if tests == 0 {
		// Unknown keys have their errors: they were meant as the tests.
		if unknown == 0 {
			c.bad(path, "has no test: give a list of values or any of %s", strings.Join(conditionKeys, ", "))
		}
		return cond
	}
	for _, v := range cond.NotIn {
		if slices.Contains(cond.In, v) {
			c.bad(path, "%q is in both in and not", v)
		}
	}
	c.checkRange(path, field, &cond, m)
	return cond
}

// guessTest is the test an unknown key was likely meant as: the same
// letters in another case (GTE), or a near miss (gteq).
func guessTest(k string) string {
	for _, t := range conditionKeys {
		if strings.EqualFold(k, t) {
			return t
		}
	}
	return closest(k, slices.Clone(conditionKeys))
}

// values reads a list of values as the engine renders an event's fields
// (event.Event.Field): strings as they are, integers as decimal text,
// booleans as true and false. A fraction is refused, as its JSON text is
// not known (1.5, 1.50, 15e-1).
func (c *ruleChecker) values(path, field string, list []any) []string {
	if len(list) == 0 {
		c.bad(path, "lists no values")
		return nil
	}
	out := make([]string, 0, len(list))
	for i, item := range list {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		var s string
		switch t := item.(type) {
		case string:
			s = t
			if s == "" {
				c.bad(ipath, "is empty (an event's empty value counts as lacking the field)")
				continue
			}
		case int:
			s = strconv.Itoa(t)
		case int64:
			s = strconv.FormatInt(t, 10)
		case uint64:
			s = strconv.FormatUint(t, 10)
		case bool:
			s = strconv.FormatBool(t)
		case float64:
			c.bad(ipath, "expected a string, an integer or true/false, got a decimal number (quote it as the events write it)")
			continue
		case time.Time:
			c.bad(ipath, "expected a string, an integer or true/false, got a date (quote it as the events write it)")
			continue
		default:
			c.bad(ipath, "expected a string, an integer or true/false, got %s", yamlKind(item))
			continue
		}
		if field == currencyField {
			written := s
			s = strings.ToUpper(s)
			if !isCurrencyCode(s) {
				c.bad(ipath, "must be a three-letter currency code, not %q", written)
				continue
			}
		}
		if slices.Contains(out, s) {
			c.bad(ipath, "repeats %q", s)
			continue
		}
		out = append(out, s)
	}
	return out
}

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// bound reads a range bound as YAML made it, as threshold does: "3" and
// 3.5 are refused rather than converted. nil means no bound (after an
// error).
func (c *ruleChecker) bound(path string, v any) *int64 {
	var n int64
	switch t := v.(type) {
	case int:
		n = int64(t)
	case int64:
		n = t
	case uint64: // YAML makes uint64 only of what int64 cannot hold
		c.bad(path, "must be an integer between %d and %d", int64(math.MinInt64), int64(math.MaxInt64))
		return nil
	case string:
		c.bad(path, "must be an integer, not the string %q", t)
		return nil
	case float64:
		c.bad(path, "must be an integer, got %v", t)
		return nil
	case time.Time:
		c.bad(path, "must be an integer, got a date")
		return nil
	default:
		c.bad(path, "must be an integer, got %s", yamlKind(v))
		return nil
	}
	return &n
}

// checkRange refuses a range no integer is in: it would filter out every
// event, which is never what a rule means. m is the condition as written,
// for the bounds that failed to read.
func (c *ruleChecker) checkRange(path, field string, cond *rules.Condition, m map[string]any) {
	_, gte := m["gte"]
	_, gt := m["gt"]
	_, lte := m["lte"]
	_, lt := m["lt"]
	if gte && gt {
		c.bad(path, "has both gte and gt: a range has one lower bound")
	}
	if lte && lt {
		c.bad(path, "has both lte and lt: a range has one upper bound")
	}
	if (gte || gt || lte || lt) && field == currencyField {
		c.bad(path, "has a range, but currency codes are not numbers")
	}
	if gte && gt || lte && lt {
		return
	}
	// The range as inclusive bounds, in integers: gt 5 is gte 6.
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	empty := false
	var words []string
	if cond.GTE != nil {
		lo = *cond.GTE
		words = append(words, fmt.Sprintf(">= %d", *cond.GTE))
	}
	if cond.GT != nil {
		if *cond.GT == math.MaxInt64 {
			empty = true
		} else {
			lo = *cond.GT + 1
		}
		words = append(words, fmt.Sprintf("> %d", *cond.GT))
	}
	if cond.LTE != nil {
		hi = *cond.LTE
		words = append(words, fmt.Sprintf("<= %d", *cond.LTE))
	}
	if cond.LT != nil {
		if *cond.LT == math.MinInt64 {
			empty = true
		} else {
			hi = *cond.LT - 1
		}
		words = append(words, fmt.Sprintf("< %d", *cond.LT))
	}
	if empty || lo > hi {
		c.bad(path, "is an empty range: no integer is %s", strings.Join(words, " and "))
	}
}

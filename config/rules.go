package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Names are what keys, metric labels and alerts call a rule: short, and
// safe in all three.
var ruleNameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

const maxRuleName = 64

// Defaults of a rule's optional fields; the cooldown defaults to the
// window.
const (
	defaultSeverity   = alert.SeverityWarning
	defaultMode       = alert.ModeAlert
	defaultWindowType = alert.Fixed
	// defaultLateness is a sliding rule's allowed_lateness when it gives
	// none; fixed rules have none at all (see lateness).
	defaultLateness = time.Minute
)

// spec is a rule as written in the file. The threshold arrives as whatever
// YAML made of it, so that "3" and 3.5 get errors of their own.
type spec struct {
	Name        string `mapstructure:"name"`
	Description string `mapstructure:"description"`
	Metric      string `mapstructure:"metric"`
	// Field is a pointer so that field: "" is told from no field.
	Field      *string        `mapstructure:"field"`
	GroupBy    []string       `mapstructure:"group_by"`
	WindowType string         `mapstructure:"window_type"`
	Window     *time.Duration `mapstructure:"window"`
	Lateness   *time.Duration `mapstructure:"allowed_lateness"`
	Threshold  any            `mapstructure:"threshold"`
	// Where is read by ruleChecker.where, whose forms (a list, a mapping
	// of tests) no struct describes.
	Where    any            `mapstructure:"where"`
	Cooldown *time.Duration `mapstructure:"cooldown"`
	Severity string         `mapstructure:"severity"`
	Mode     string         `mapstructure:"mode"`
	Channel  string         `mapstructure:"channel"`
	Enabled  *bool          `mapstructure:"enabled"`
	Evidence *int           `mapstructure:"evidence"`
	// Links are checked against group_by (routes.go).
	Links []alert.LinkTemplate `mapstructure:"links"`
}

// decodeRule reads the i-th rule of file and applies its defaults,
// reporting every problem of it. Its links come apart: a rules.Rule has
// none, the dispatcher takes them.
func decodeRule(item any, file string, i int) (rules.Rule, []alert.LinkTemplate, error) {
	where := fmt.Sprintf("#%d", i+1)
	m, ok := item.(map[string]any)
	if !ok {
		return rules.Rule{}, nil, &FieldError{File: file, Rule: where, Msg: "must be a mapping of rule fields"}
	}
	if name, ok := m["name"].(string); ok && name != "" {
		where = fmt.Sprintf("%q", name)
	}
	opts := decodeOptions{File: file, Rule: where, Hooks: []mapstructure.DecodeHookFunc{durationHook}}
	var s spec
	errs := unknownKeys(m, &s, opts)
	decodeErrs := decodeStrict(m, &s, opts)
	c := &ruleChecker{opts: opts, failed: map[string]bool{}}
	for _, err := range decodeErrs {
		if fe, ok := errors.AsType[*FieldError](err); ok {
			base, _, _ := strings.Cut(fe.Field, "[")
			c.failed[base] = true
		}
	}
	// One statement a field: the checks of field, allowed_lateness and
	// threshold depend on the fields read before them.
	r := rules.Rule{Name: c.name(s.Name), Description: c.description(s.Description)}
	r.Metric = c.metric(s.Metric)
	r.GroupBy = c.groupBy(s.GroupBy)
	r.Field = c.field(s.Field, r.Metric, r.GroupBy)
	r.WindowType = c.windowType(s.WindowType)
	r.Window = c.window(s.Window)
	r.Lateness = c.lateness(s.Lateness, r.WindowType, r.Window)
	r.Threshold = c.threshold(s.Threshold, r.Metric)
	r.Where = c.where(s.Where)
	r.Cooldown = c.cooldown(s.Cooldown, r.Window)
	r.Severity = c.severity(s.Severity)
	r.Mode = c.mode(s.Mode)
	r.Channel = s.Channel
	r.Enabled = s.Enabled == nil || *s.Enabled
	r.Evidence = c.evidence(s.Evidence)
	links := c.links(s.Links, r.GroupBy)
	errs = append(append(errs, decodeErrs...), c.errs...)
	return r, links, errors.Join(errs...)
}

// ruleChecker checks the fields of one rule as decoded, collecting a
// FieldError for each problem.
type ruleChecker struct {
	opts decodeOptions
	// failed holds the fields that did not decode: they have their error,
	// and a second one ("is required" for the zero value left behind)
	// would only confuse.
	failed map[string]bool
	errs   []error
}

func (c *ruleChecker) bad(field, format string, args ...any) {
	if base, _, _ := strings.Cut(field, "["); c.failed[base] {
		return
	}
	c.errs = append(c.errs, &FieldError{File: c.opts.File, Rule: c.opts.Rule, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (c *ruleChecker) name(name string) string {
	if name == "" {
		c.bad("name", "is required")
	} else if !ruleNameRE.MatchString(name) || len(name) > maxRuleName {
		c.bad("name", "must be 1-%d characters of a-z, 0-9, '_' and '-'", maxRuleName)
	}
	return name
}

func (c *ruleChecker) metric(m string) alert.Metric {
	switch alert.Metric(m) {
	case alert.Count, alert.Amount, alert.Distinct:
	case "":
		c.bad("metric", "is required (count, amount or distinct)")
	default:
		c.bad("metric", "must be count, amount or distinct, not %q", m)
	}
	return alert.Metric(m)
}

// field checks a distinct rule's field against its metric. With a metric
// that is missing or wrong it only checks the name: whether a field belongs
// depends on the metric meant, which is not known.
func (c *ruleChecker) field(f *string, m alert.Metric, groupBy []string) string {
	switch {
	case f == nil:
		if m == alert.Distinct {
			c.bad("field", "is required for metric distinct (the event field whose distinct values it counts)")
		}
		return ""
	case m == alert.Count || m == alert.Amount:
		c.bad("field", "only distinct rules have a field")
	case strings.TrimSpace(*f) == "":
		c.bad("field", "is empty")
	case m == alert.Distinct && slices.Contains(groupBy, *f):
		c.bad("field", "%q is in group_by: a group holds one value of it, so its distinct count is always 1", *f)
	}
	return *f
}

func (c *ruleChecker) windowType(t string) alert.WindowType {
	switch wt := alert.WindowType(t); wt {
	case "":
		return defaultWindowType
	case alert.Fixed, alert.Sliding:
		return wt
	}
	c.bad("window_type", "must be fixed or sliding, not %q", t)
	return alert.WindowType(t)
}

// lateness checks allowed_lateness, in whole seconds as the window is. A
// fixed rule has none to give: its windows follow processing time, where
// nothing is late.
func (c *ruleChecker) lateness(l *time.Duration, wt alert.WindowType, window time.Duration) time.Duration {
	switch {
	case wt != alert.Sliding:
		// A window_type that failed to decode reads as fixed here; its
		// own error is enough.
		if l != nil && wt == alert.Fixed && !c.failed["window_type"] {
			c.bad("allowed_lateness", "only sliding rules have allowed_lateness")
		}
		return 0
	case l == nil:
		return defaultLateness
	case *l < 0:
		c.bad("allowed_lateness", "must not be negative")
	case *l%time.Second != 0:
		c.bad("allowed_lateness", "must be a whole number of seconds, got %v", *l)
	case window > 0 && *l > rules.MaxLateness*window:
		c.bad("allowed_lateness", "must be at most %d × the window (%v), got %v", rules.MaxLateness, rules.MaxLateness*window, *l)
	}
	return *l
}

func (c *ruleChecker) groupBy(fields []string) []string {
	switch {
	case len(fields) == 0:
		c.bad("group_by", "needs at least one event field")
	case len(fields) > rules.MaxGroupBy:
		c.bad("group_by", "has %d fields, at most %d", len(fields), rules.MaxGroupBy)
	}
	for j, f := range fields {
		if strings.TrimSpace(f) == "" {
			c.bad(fmt.Sprintf("group_by[%d]", j), "is empty")
		} else if slices.Index(fields, f) != j {
			c.bad(fmt.Sprintf("group_by[%d]", j), "repeats %q", f)
		}
	}
	return fields
}

// window checks the window: whole seconds, since the scripts set TTLs in
// seconds and a window rounded up would be longer than the rule says.
func (c *ruleChecker) window(w *time.Duration) time.Duration {
	switch {
	case w == nil:
		c.bad("window", "is required (a Go duration such as 1m)")
		return 0
	case *w < time.Second:
		c.bad("window", "must be at least 1s, got %v", *w)
	case *w%time.Second != 0:
		c.bad("window", "must be a whole number of seconds, got %v", *w)
	}
	return *w
}

func (c *ruleChecker) evidence(n *int) int {
	switch {
	case n == nil:
		return rules.DefaultEvidence
	case *n < 0 || *n > rules.MaxEvidence:
		c.bad("evidence", "must be 0 to %d orders, got %d", rules.MaxEvidence, *n)
	}
	return *n
}

func (c *ruleChecker) cooldown(cd *time.Duration, window time.Duration) time.Duration {
	switch {
	case cd == nil:
		return window
	case *cd < 0:
		c.bad("cooldown", "must not be negative")
	case *cd%time.Second != 0:
		c.bad("cooldown", "must be a whole number of seconds, got %v", *cd)
	}
	return *cd
}

// threshold reads the threshold as YAML made it: a string or a fraction is
// refused outright, and only an integer gets the range check (a second
// error about the range of 3.5 would only confuse). A distinct rule's
// window keeps up to threshold+1 values, so its threshold has a lower
// maximum.
func (c *ruleChecker) threshold(v any, m alert.Metric) int64 {
	var n int64
	switch t := v.(type) {
	case nil:
		c.bad("threshold", "is required (an integer > 0)")
		return 0
	case int:
		n = int64(t)
	case int64:
		n = t
	case uint64:
		n = math.MaxInt64
		if t <= math.MaxInt64 {
			n = int64(t)
		}
	case string:
		c.bad("threshold", "must be an integer, not the string %q", t)
		return 0
	default:
		c.bad("threshold", "must be an integer, got %v", t)
		return 0
	}
	switch {
	case m == alert.Distinct && (n <= 0 || n > rules.MaxDistinctThreshold):
		c.bad("threshold", "must be an integer between 1 and %d for metric distinct (a window keeps up to threshold+1 values)",
			rules.MaxDistinctThreshold)
	case n <= 0 || n > rules.MaxThreshold:
		c.bad("threshold", "must be an integer between 1 and %d", int64(rules.MaxThreshold))
	}
	return n
}

func (c *ruleChecker) severity(s string) alert.Severity {
	switch sev := alert.Severity(s); {
	case sev == "":
		return defaultSeverity
	case slices.Contains(alert.Severities, sev):
		return sev
	}
	c.bad("severity", "must be info, warning, high or critical, not %q", s)
	return alert.Severity(s)
}

func (c *ruleChecker) mode(m string) alert.Mode {
	switch alert.Mode(m) {
	case "":
		return defaultMode
	case alert.ModeAlert, alert.ModeShadow:
	default:
		c.bad("mode", "must be alert or shadow, not %q", m)
	}
	return alert.Mode(m)
}

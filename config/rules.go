package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

// LoadRules reads a rules file (README, Rules), checks every rule and
// applies the defaults of its optional fields.
func LoadRules(path string) ([]rules.Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return ParseRules(data, path)
}

// ParseRules reads and checks rules from YAML; file names the source in
// errors, which are *FieldErrors naming the rule and the field. Every
// problem found is reported, not just the first.
func ParseRules(data []byte, file string) ([]rules.Rule, error) {
	doc, err := parseYAML(data, file)
	if err != nil {
		return nil, err
	}
	top, ok := doc.(map[string]any)
	if doc != nil && !ok {
		return nil, &FieldError{File: file, Msg: "must be a mapping with a list under rules:"}
	}
	var layout struct {
		Rules any `mapstructure:"rules"`
	}
	errs := unknownKeys(top, &layout, decodeOptions{File: file})
	list, ok := top["rules"].([]any)
	if !ok {
		errs = append(errs, &FieldError{File: file, Field: "rules", Msg: "must be a list of rules"})
		return nil, errors.Join(errs...)
	}
	if len(list) == 0 {
		errs = append(errs, &FieldError{File: file, Field: "rules", Msg: "no rules defined"})
	}
	var out []rules.Rule
	seen := map[string]int{}
	for i, item := range list {
		r, err := decodeRule(item, file, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[r.Name]; dup {
			errs = append(errs, &FieldError{File: file, Rule: fmt.Sprintf("%q (#%d)", r.Name, i+1), Field: "name",
				Msg: fmt.Sprintf("duplicate of rule #%d: names must be unique", prev+1)})
			continue
		}
		seen[r.Name] = i
		out = append(out, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Names are what keys, metric labels and alerts call a rule: short, and
// safe in all three.
var ruleNameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

const maxRuleName = 64

// Defaults of a rule's optional fields; the cooldown defaults to the
// window.
const (
	defaultSeverity = alert.SeverityWarning
	defaultMode     = alert.ModeAlert
)

// spec is a rule as written in the file. The threshold arrives as whatever
// YAML made of it, so that "3" and 3.5 get errors of their own.
type spec struct {
	Name        string         `mapstructure:"name"`
	Description string         `mapstructure:"description"`
	Metric      string         `mapstructure:"metric"`
	GroupBy     []string       `mapstructure:"group_by"`
	Window      *time.Duration `mapstructure:"window"`
	Threshold   any            `mapstructure:"threshold"`
	Cooldown    *time.Duration `mapstructure:"cooldown"`
	Severity    string         `mapstructure:"severity"`
	Mode        string         `mapstructure:"mode"`
	Channel     string         `mapstructure:"channel"`
	Enabled     *bool          `mapstructure:"enabled"`
}

// decodeRule reads the i-th rule of file and applies its defaults,
// reporting every problem of it.
func decodeRule(item any, file string, i int) (rules.Rule, error) {
	where := fmt.Sprintf("#%d", i+1)
	m, ok := item.(map[string]any)
	if !ok {
		return rules.Rule{}, &FieldError{File: file, Rule: where, Msg: "must be a mapping of rule fields"}
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
	r := rules.Rule{
		Name:        c.name(s.Name),
		Description: s.Description,
		Metric:      c.metric(s.Metric),
		GroupBy:     c.groupBy(s.GroupBy),
		Window:      c.window(s.Window),
		Threshold:   c.threshold(s.Threshold),
		Severity:    c.severity(s.Severity),
		Mode:        c.mode(s.Mode),
		Channel:     s.Channel,
		Enabled:     s.Enabled == nil || *s.Enabled,
	}
	r.Cooldown = c.cooldown(s.Cooldown, r.Window)
	errs = append(append(errs, decodeErrs...), c.errs...)
	return r, errors.Join(errs...)
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
	case alert.Count, alert.Amount:
	case "":
		c.bad("metric", "is required (count or amount)")
	default:
		c.bad("metric", "must be count or amount, not %q", m)
	}
	return alert.Metric(m)
}

func (c *ruleChecker) groupBy(fields []string) []string {
	if len(fields) == 0 {
		c.bad("group_by", "needs at least one event field")
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
// error about the range of 3.5 would only confuse).
func (c *ruleChecker) threshold(v any) int64 {
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
	if n <= 0 || n > rules.MaxThreshold {
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

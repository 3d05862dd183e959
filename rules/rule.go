package rules

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/go-viper/mapstructure/v2"
	"go.yaml.in/yaml/v3"
)

// Rule is one velocity rule, with its defaults applied. Its metric, severity
// and mode are the alert model's words (package alert): its alerts carry
// them.
type Rule struct {
	Name        string
	Description string
	Metric      alert.Metric
	GroupBy     []string
	Window      time.Duration
	Threshold   int64
	// Cooldown is how long after an alert the same (rule, group) stays
	// quiet. 0 disables it.
	Cooldown time.Duration
	Severity alert.Severity
	Mode     alert.Mode
	// Channel overrides slack.channel in bot-token mode.
	Channel string
	Enabled bool
}

// MaxThreshold keeps thresholds exact in the scripts, whose numbers are
// doubles (2^53 - 1).
const MaxThreshold = 1<<53 - 1

var nameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// maxNameLen keeps keys and metric labels short.
const maxNameLen = 64

// spec is a rule as written in the file. Durations arrive as whatever YAML
// made of them and are parsed by hand, so that "60" gets a helpful error
// instead of becoming 60 nanoseconds.
type spec struct {
	Name        string   `mapstructure:"name"`
	Description string   `mapstructure:"description"`
	Metric      string   `mapstructure:"metric"`
	GroupBy     []string `mapstructure:"group_by"`
	Window      any      `mapstructure:"window"`
	Threshold   any      `mapstructure:"threshold"`
	Cooldown    any      `mapstructure:"cooldown"`
	Severity    string   `mapstructure:"severity"`
	Mode        string   `mapstructure:"mode"`
	Channel     string   `mapstructure:"channel"`
	Enabled     *bool    `mapstructure:"enabled"`
}

// FieldError names the file, the rule and the field at fault.
type FieldError struct {
	File  string
	Rule  string // the rule's name, or its position (#3) when it has none
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Rule != "" {
		b.WriteString("rule ")
		b.WriteString(e.Rule)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadFile reads and validates a rules file.
func LoadFile(path string) ([]Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return Parse(data, path)
}

// Parse reads and validates rules from YAML; file names the source in
// errors. Every problem found is reported, not just the first.
//
// The YAML is decoded as it is written, not through viper: viper folds keys
// to lower case, so "window: 1m" next to "Window: 5m" would silently become
// one of them, and it drops empty mappings, so "defaults: {}" would pass as
// known. Keys here are exact and every unknown one is an error.
func Parse(data []byte, file string) ([]Rule, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml.v3 lists several problems on several lines; check prints one.
		msg := strings.Join(strings.Fields(err.Error()), " ")
		return nil, &FieldError{File: file, Msg: "not valid YAML: " + msg}
	}
	top, ok := doc.(map[string]any)
	if doc != nil && !ok {
		return nil, &FieldError{File: file, Msg: "must be a mapping with a list under rules:"}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "rules" {
			errs = append(errs, &FieldError{File: file, Field: k, Msg: "unknown key (the file holds a list under rules:)"})
		}
	}
	list, ok := top["rules"].([]any)
	if !ok {
		errs = append(errs, &FieldError{File: file, Field: "rules", Msg: "must be a list of rules"})
		return nil, errors.Join(errs...)
	}
	if len(list) == 0 {
		errs = append(errs, &FieldError{File: file, Field: "rules", Msg: "no rules defined"})
	}
	var out []Rule
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

func decodeRule(item any, file string, i int) (Rule, error) {
	where := fmt.Sprintf("#%d", i+1)
	m, ok := item.(map[string]any)
	if !ok {
		return Rule{}, &FieldError{File: file, Rule: where, Msg: "must be a mapping of rule fields"}
	}
	if name, ok := m["name"].(string); ok && name != "" {
		where = fmt.Sprintf("%q", name)
	}
	var s spec
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:   &s,
		Metadata: &md,
		// mapstructure matches names case-insensitively by default: a rule
		// holding both window: 1m and Window: 5m would silently get
		// either. Exact names make Window an unknown field instead.
		MatchName: func(key, field string) bool { return key == field },
	})
	if err != nil {
		return Rule{}, err
	}
	var errs []error
	// A field that failed to decode is reported once, as a type error; the
	// checks below would only add "is required" for its zero value.
	failed := map[string]bool{}
	bad := func(field, format string, args ...any) {
		if base, _, _ := strings.Cut(field, "["); failed[base] {
			return
		}
		errs = append(errs, &FieldError{File: file, Rule: where, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if err := dec.Decode(m); err != nil {
		for _, f := range decodeFailures(err) {
			errs = append(errs, &FieldError{File: file, Rule: where, Field: f.field, Msg: f.msg})
			base, _, _ := strings.Cut(f.field, "[")
			failed[base] = true
		}
	}
	slices.Sort(md.Unused)
	for _, k := range md.Unused {
		bad(k, "unknown field")
	}
	if s.Name == "" {
		bad("name", "is required")
	} else if !nameRE.MatchString(s.Name) || len(s.Name) > maxNameLen {
		bad("name", "must be 1-%d characters of a-z, 0-9, '_' and '-'", maxNameLen)
	}
	r := Rule{
		Name:        s.Name,
		Description: s.Description,
		Metric:      alert.Metric(s.Metric),
		GroupBy:     s.GroupBy,
		Severity:    alert.Severity(s.Severity),
		Mode:        alert.Mode(s.Mode),
		Channel:     s.Channel,
		Enabled:     s.Enabled == nil || *s.Enabled,
	}
	switch r.Metric {
	case alert.Count, alert.Amount:
	case "":
		bad("metric", "is required (count or amount)")
	default:
		bad("metric", "must be count or amount, not %q", s.Metric)
	}
	if len(r.GroupBy) == 0 {
		bad("group_by", "needs at least one event field")
	}
	for j, f := range r.GroupBy {
		if strings.TrimSpace(f) == "" {
			bad(fmt.Sprintf("group_by[%d]", j), "is empty")
		} else if slices.Index(r.GroupBy, f) != j {
			bad(fmt.Sprintf("group_by[%d]", j), "repeats %q", f)
		}
	}
	var werr, cerr error
	if r.Window, werr = duration(s.Window); werr != nil {
		bad("window", "%v", werr)
	} else if s.Window == nil {
		bad("window", "is required (a Go duration such as 1m)")
	} else if r.Window < time.Second {
		bad("window", "must be at least 1s, got %v", r.Window)
	} else if r.Window%time.Second != 0 {
		bad("window", "must be a whole number of seconds, got %v", r.Window)
	}
	isInt := true
	switch t := s.Threshold.(type) {
	case nil:
		isInt = false
		bad("threshold", "is required (an integer > 0)")
	case int:
		r.Threshold = int64(t)
	case int64:
		r.Threshold = t
	case uint64:
		r.Threshold = math.MaxInt64
		if t <= math.MaxInt64 {
			r.Threshold = int64(t)
		}
	case string:
		isInt = false
		bad("threshold", "must be an integer, not the string %q", t)
	default:
		isInt = false
		bad("threshold", "must be an integer, got %v", t)
	}
	// Only an integer gets the range check: a float already has its error,
	// and a second one about the range would only confuse.
	if isInt && (r.Threshold <= 0 || r.Threshold > MaxThreshold) {
		bad("threshold", "must be an integer between 1 and %d", int64(MaxThreshold))
	}
	r.Cooldown = r.Window
	if s.Cooldown != nil {
		if r.Cooldown, cerr = duration(s.Cooldown); cerr != nil {
			bad("cooldown", "%v", cerr)
		} else if r.Cooldown < 0 {
			bad("cooldown", "must not be negative")
		} else if r.Cooldown%time.Second != 0 {
			bad("cooldown", "must be a whole number of seconds, got %v", r.Cooldown)
		}
	}
	switch r.Severity {
	case alert.SeverityInfo, alert.SeverityWarning, alert.SeverityHigh, alert.SeverityCritical:
	case "":
		r.Severity = alert.SeverityWarning
	default:
		bad("severity", "must be info, warning, high or critical, not %q", s.Severity)
	}
	switch r.Mode {
	case alert.ModeAlert, alert.ModeShadow:
	case "":
		r.Mode = alert.ModeAlert
	default:
		bad("mode", "must be alert or shadow, not %q", s.Mode)
	}
	return r, errors.Join(errs...)
}

// duration accepts a Go duration string, or the integer 0 (YAML makes a
// bare 0 an int). Other bare numbers are refused: 60 is not obviously
// seconds.
func duration(v any) (time.Duration, error) {
	switch t := v.(type) {
	case nil:
		return 0, nil
	case string:
		d, err := time.ParseDuration(t)
		if err != nil {
			return 0, fmt.Errorf("%q is not a Go duration (such as 30s, 1m, 1h30m)", t)
		}
		return d, nil
	case int:
		if t == 0 {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("%v needs a unit (such as 30s, 1m, 1h30m)", v)
}

type decodeFailure struct{ field, msg string }

// decodeFailures splits a mapstructure error, which joins one error per
// field under a multi-line header, into one failure per field, so that each
// becomes a one-line FieldError naming its field.
func decodeFailures(err error) []decodeFailure {
	if de, ok := err.(*mapstructure.DecodeError); ok {
		if inner := de.Unwrap(); inner != nil {
			if _, joined := inner.(interface{ Unwrap() []error }); joined {
				return decodeFailures(inner)
			}
			return []decodeFailure{{field: de.Name(), msg: strings.ReplaceAll(inner.Error(), "'", "")}}
		}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []decodeFailure
		for _, e := range j.Unwrap() {
			out = append(out, decodeFailures(e)...)
		}
		return out
	}
	if inner := errors.Unwrap(err); inner != nil {
		return decodeFailures(inner)
	}
	return []decodeFailure{{msg: strings.ReplaceAll(err.Error(), "'", "")}}
}

// Package rules holds the velocity rules (Rule; package config reads them
// from their file and checks them) and the Engine that evaluates every
// event against them through the Redis scripts of package lua, handing
// first crossings on as alerts.
package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// Rule is one velocity rule, with its defaults applied. Its metric, severity
// and mode are the alert model's words (package alert): its alerts carry
// them.
type Rule struct {
	Name        string
	Description string
	Metric      alert.Metric
	// Field is the event field whose distinct values a distinct rule
	// counts; empty for the other metrics.
	Field   string
	GroupBy []string
	// WindowType says how Window is measured: Fixed (the default) or
	// Sliding.
	WindowType alert.WindowType
	Window     time.Duration
	// Lateness is how far behind its group's newest event time (minus the
	// window) a sliding rule still counts an event (allowed_lateness);
	// 0 for fixed rules.
	Lateness  time.Duration
	Threshold int64
	// Where lists conditions an event must meet, all of them, for the rule
	// to see it; sorted by field, one condition a field.
	Where []Condition
	// Cooldown is how long after an alert the same (rule, group) stays
	// quiet. 0 disables it.
	Cooldown time.Duration
	Severity alert.Severity
	Mode     alert.Mode
	// Channel overrides slack.channel in bot-token mode.
	Channel string
	Enabled bool
	// Evidence is how many of the orders behind a crossing its alert
	// lists (0 to MaxEvidence; 0 keeps none).
	Evidence int
}

// Condition is one field's test of a where: filter. The field's value must
// be one of In (when In is set), none of NotIn, and an integer within the
// bounds that are set; an event lacking the field meets only a condition
// that has nothing but NotIn.
type Condition struct {
	Field string
	In    []string
	NotIn []string
	// Bounds of a numeric range; nil when not set.
	GTE, GT, LTE, LT *int64
}

// MaxThreshold keeps thresholds exact in the scripts, whose numbers are
// doubles (2^53 - 1).
const MaxThreshold = 1<<53 - 1

// MaxLateness bounds a sliding rule's allowed_lateness, in windows: a
// group keeps its buckets of two windows and the lateness.
const MaxLateness = lua.MaxLateness

// MaxGroupBy bounds a rule's group_by: its alerts name every field, and
// the dispatcher drops an alert with more as malformed.
const MaxGroupBy = alert.MaxGroupFields

// MaxDistinctThreshold bounds a distinct rule's threshold: a window keeps
// up to threshold + 1 values.
const MaxDistinctThreshold = 10_000

// Version names a rule set: the first 12 hex digits of the SHA-256 of its
// rules, every field with its defaults applied, in order. Two files that
// differ only in layout or comments have one version.
func Version(rs []Rule) string {
	// A Rule holds strings, numbers and slices of them: Marshal cannot
	// fail.
	data, _ := json.Marshal(rs)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// State names the rule's windows in their Redis keys: its name and the
// fingerprint of its definition.
func (r *Rule) State() string { return r.Name + "." + r.Fingerprint() }

// Fingerprint names the rule's definition: what decides what its windows
// hold (metric, field, group_by, window type and length, where). Windows
// live under it, so a change of any of these starts fresh windows rather
// than mixing old counts into new, while a change of threshold, cooldown,
// severity, mode, channel or allowed_lateness keeps them.
func (r *Rule) Fingerprint() string {
	var b strings.Builder
	field := func(name, v string) {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(v))
		b.WriteByte(';')
	}
	field("metric", string(r.Metric))
	field("field", r.Field)
	field("group_by", strings.Join(quoteAll(r.GroupBy), ","))
	field("window_type", string(r.windowType()))
	field("window", r.Window.String())
	for _, c := range r.Where {
		field("where", c.Field)
		field("in", strings.Join(sortedQuoted(c.In), ","))
		field("not", strings.Join(sortedQuoted(c.NotIn), ","))
		for _, bound := range []struct {
			name string
			v    *int64
		}{{"gte", c.GTE}, {"gt", c.GT}, {"lte", c.LTE}, {"lt", c.LT}} {
			if bound.v != nil {
				field(bound.name, strconv.FormatInt(*bound.v, 10))
			}
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:4])
}

// windowType is the rule's window type; a Rule made in code may leave it
// out, for fixed.
func (r *Rule) windowType() alert.WindowType {
	if r.WindowType == "" {
		return alert.Fixed
	}
	return r.WindowType
}

func quoteAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Quote(v)
	}
	return out
}

// sortedQuoted quotes a set of values in an order of their own: [KRW, USD]
// and [USD, KRW] are one definition.
func sortedQuoted(vs []string) []string {
	out := quoteAll(vs)
	slices.Sort(out)
	return out
}

package alert

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MaxGroupFields bounds a rule's group_by, and so an alert's group: the
// configuration refuses more (rules.MaxGroupBy).
const MaxGroupFields = 64

// Bounds of an alert read from the topic. fraudwatch's own alerts stay
// far within them (rules.Engine clips what it writes).
const (
	maxIDBytes      = 128 // an event id (event.MaxIDBytes)
	maxValueBytes   = 1024 + len("…")
	maxTextBytes    = 1024 + len("…")
	maxFieldBytes   = 256 + len("…")
	maxRuleBytes    = 64
	maxCurrencyByte = 16 + len("…")
	// An evidence entry's order id and value (rules clips them to 128).
	maxEvidenceBytes = 128 + len("…")
)

// WithinBounds tells whether every field of a is within the bounds the
// dispatcher holds an alert read from the topic to; fraudwatch's own
// alerts always are.
func (a Alert) WithinBounds() error {
	switch {
	case a.Rule == "" || len(a.Rule) > maxRuleBytes || strings.ContainsAny(a.Rule, ":{} ."):
		return fmt.Errorf("alert: rule name of %d bytes", len(a.Rule))
	case a.EventID == "" || len(a.EventID) > maxIDBytes:
		return fmt.Errorf("alert: event id of %d bytes", len(a.EventID))
	case len(a.GroupValues) == 0 || len(a.GroupValues) > MaxGroupFields || len(a.GroupBy) != len(a.GroupValues):
		return fmt.Errorf("alert: %d group values for %d fields", len(a.GroupValues), len(a.GroupBy))
	case len(a.OrderID) > maxTextBytes || len(a.Description) > maxTextBytes || len(a.Currency) > maxCurrencyByte || len(a.Field) > maxFieldBytes:
		return errors.New("alert: a text field too long")
	case a.Definition != "" && !isFingerprint(a.Definition):
		return errors.New("alert: a definition that is not 8 hex digits")
	case !slices.Contains([]Metric{Count, Amount, Distinct}, a.Metric) || !slices.Contains([]WindowType{"", Fixed, Sliding}, a.WindowType) || a.Window < 0:
		return errors.New("alert: an unknown metric, window type or window")
	}
	for i := range a.GroupValues {
		if len(a.GroupValues[i]) > maxValueBytes || len(a.GroupBy[i]) > maxFieldBytes {
			return fmt.Errorf("alert: group field %d too long", i)
		}
	}
	if len(a.Evidence) > MaxEvidence {
		return fmt.Errorf("alert: %d orders of evidence", len(a.Evidence))
	}
	for i, e := range a.Evidence {
		if len(e.OrderID) > maxEvidenceBytes || len(e.EventID) > maxIDBytes || len(e.Value) > maxEvidenceBytes {
			return fmt.Errorf("alert: evidence %d too long", i)
		}
	}
	return nil
}

func isFingerprint(s string) bool {
	if len(s) != 8 {
		return false
	}
	for i := range len(s) {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

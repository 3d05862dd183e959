// Package outcome keeps what became of orders, as analysts and other
// systems say it (docs/outcomes.md): fraud, legit or unclear, one outcome
// an order, the latest winning. Alerts are judged by their orders'
// outcomes, and so are rules: live (Store.Quality) and in backtests.
//
// This file is the outcome's form on the outcomes topic and in backtests'
// inputs: one JSON object a record,
//
//	{"type": "outcome", "order_id": "o-1", "outcome": "fraud",
//	 "source": "chargeback", "occurred_at": "2026-12-01T10:00:00Z"}
//
// or, to label an alert fraudwatch sent (and so every order it lists) as
// Slack's buttons do, "alert_id": "rule/event_id" in order_id's stead and
// who says so in "by" (`fraudwatch label add --alert` writes these).
package outcome

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Limits of an outcome record (docs/events.md).
const (
	// MaxRecordBytes bounds a record's value.
	MaxRecordBytes = 4096
	// MaxOrderIDBytes bounds order_id, as event_id is bounded.
	MaxOrderIDBytes = 128
	// MaxSourceBytes bounds source.
	MaxSourceBytes = 64
	// MaxAlertIDBytes bounds alert_id: a rule's name, "/", an event id.
	MaxAlertIDBytes = 64 + 1 + 128
	// MaxByBytes bounds by.
	MaxByBytes = 256
)

// Type is the type member every outcome record carries.
const Type = "outcome"

// Outcome is what became of one order: its label, who or what said so
// (Source: "chargeback", "manual_review", "slack", "cli"; free text) and
// when it happened.
type Outcome struct {
	OrderID string `json:"order_id,omitempty"`
	// AlertID, in OrderID's stead, labels an alert: the alert itself and
	// every order it lists (Store.LabelAlert).
	AlertID    string      `json:"alert_id,omitempty"`
	Label      alert.Label `json:"outcome"`
	Source     string      `json:"source"`
	OccurredAt time.Time   `json:"occurred_at"`
	// By is who says so, when a person does ("cli:alice"); optional.
	By string `json:"by,omitempty"`
}

// Reason says why an outcome record is refused: the reason label of
// fraudwatch_outcomes_invalid_total and the start of its dead letter's
// fraudwatch-error header. Reasons lists the closed set.
type Reason string

// Reasons an outcome record is refused.
const (
	ReasonOversized     Reason = "oversized"
	ReasonMalformed     Reason = "malformed_json"
	ReasonInvalidType   Reason = "invalid_type"
	ReasonMissingField  Reason = "missing_field"
	ReasonInvalidOrder  Reason = "invalid_order_id"
	ReasonInvalidAlert  Reason = "invalid_alert_id"
	ReasonInvalidBy     Reason = "invalid_by"
	ReasonInvalidLabel  Reason = "invalid_outcome"
	ReasonInvalidSource Reason = "invalid_source"
	ReasonInvalidTime   Reason = "invalid_occurred_at"
)

// Reasons lists every reason.
var Reasons = []Reason{ReasonOversized, ReasonMalformed, ReasonInvalidType, ReasonMissingField,
	ReasonInvalidOrder, ReasonInvalidAlert, ReasonInvalidBy, ReasonInvalidLabel, ReasonInvalidSource, ReasonInvalidTime}

// InvalidError says why a record is refused. Its text names the reason and
// the field, never a value: it goes to logs and dead-letter headers.
type InvalidError struct {
	Reason Reason
	Field  string
	Detail string
}

func (e *InvalidError) Error() string {
	s := string(e.Reason)
	if e.Field != "" || e.Detail != "" {
		s += ":"
	}
	for _, part := range []string{e.Field, e.Detail} {
		if part != "" {
			s += " " + part
		}
	}
	return s
}

func invalid(r Reason, field, detail string) *InvalidError {
	return &InvalidError{Reason: r, Field: field, Detail: detail}
}

// record is the JSON form; pointers tell a member missing from one empty.
type record struct {
	Type       *string `json:"type"`
	OrderID    *string `json:"order_id"`
	AlertID    *string `json:"alert_id"`
	By         *string `json:"by"`
	Outcome    *string `json:"outcome"`
	Source     *string `json:"source"`
	OccurredAt *string `json:"occurred_at"`
}

// Decode decodes and validates one record. A returned error is always an
// *InvalidError. Members other than the five are ignored, as events'
// are; occurred_at is RFC 3339, within a day ahead of now.
func Decode(b []byte, now time.Time) (Outcome, error) {
	if len(b) > MaxRecordBytes {
		return Outcome{}, invalid(ReasonOversized, "", fmt.Sprintf("is longer than %d bytes", MaxRecordBytes))
	}
	b = bytes.TrimSpace(b)
	if !utf8.Valid(b) || len(b) == 0 || b[0] != '{' {
		return Outcome{}, invalid(ReasonMalformed, "", "value is not a JSON object")
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Outcome{}, invalid(ReasonMalformed, te.Field, "is not a string")
		}
		return Outcome{}, invalid(ReasonMalformed, "", "value is not a JSON object")
	}
	for _, m := range []struct {
		name string
		v    *string
	}{{"type", r.Type}, {"order_id", cmpOr(r.OrderID, r.AlertID)}, {"outcome", r.Outcome}, {"source", r.Source}, {"occurred_at", r.OccurredAt}} {
		if m.v == nil {
			return Outcome{}, invalid(ReasonMissingField, m.name, "is required")
		}
	}
	if *r.Type != Type {
		return Outcome{}, invalid(ReasonInvalidType, "type", `must be "outcome"`)
	}
	at, err := time.Parse(time.RFC3339Nano, *r.OccurredAt)
	if err != nil {
		return Outcome{}, invalid(ReasonInvalidTime, "occurred_at", "is not an RFC 3339 time")
	}
	if r.OrderID != nil && r.AlertID != nil {
		return Outcome{}, invalid(ReasonInvalidAlert, "alert_id", "and order_id cannot both be given")
	}
	o := Outcome{OrderID: deref(r.OrderID), AlertID: deref(r.AlertID), By: deref(r.By),
		Label: alert.Label(*r.Outcome), Source: *r.Source, OccurredAt: at.UTC()}
	if r.By != nil && o.By == "" {
		return Outcome{}, invalid(ReasonInvalidBy, "by", "must not be empty")
	}
	if err := o.validate(now); err != nil {
		return Outcome{}, err
	}
	return o, nil
}

// Validate checks an outcome made in the process (the CLI, a click) as
// Decode checks a record's.
func (o Outcome) Validate(now time.Time) error {
	if err := o.validate(now); err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	return nil
}

func (o Outcome) validate(now time.Time) *InvalidError {
	switch {
	case o.AlertID != "" && o.OrderID != "":
		return invalid(ReasonInvalidAlert, "alert_id", "and order_id cannot both be given")
	case o.AlertID != "":
		rule, event, ok := strings.Cut(o.AlertID, "/")
		if !ok || rule == "" || event == "" || len(o.AlertID) > MaxAlertIDBytes || !printable(o.AlertID) {
			return invalid(ReasonInvalidAlert, "alert_id", "must be rule/event_id, as fraudwatch alert list shows it")
		}
	case o.OrderID == "" || len(o.OrderID) > MaxOrderIDBytes || !printable(o.OrderID):
		return invalid(ReasonInvalidOrder, "order_id", fmt.Sprintf("must be 1 to %d bytes of printable text", MaxOrderIDBytes))
	case !o.Label.Valid():
		return invalid(ReasonInvalidLabel, "outcome", "must be fraud, legit or unclear")
	case o.Source == "" || len(o.Source) > MaxSourceBytes || !printable(o.Source):
		return invalid(ReasonInvalidSource, "source", fmt.Sprintf("must be 1 to %d bytes of printable text", MaxSourceBytes))
	case len(o.By) > MaxByBytes || !printable(o.By):
		return invalid(ReasonInvalidBy, "by", fmt.Sprintf("must be at most %d bytes of printable text", MaxByBytes))
	case o.OccurredAt.IsZero() || o.OccurredAt.Year() < 2000 || o.OccurredAt.After(now.Add(24*time.Hour)):
		return invalid(ReasonInvalidTime, "occurred_at", "must be after 2000 and at most a day ahead")
	}
	return nil
}

func cmpOr(a, b *string) *string {
	if a != nil {
		return a
	}
	return b
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// Record is o in the topic's form, one line of JSON without a newline.
func (o Outcome) Record() []byte {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Outcome
	}{Type, o}) // strings and a time: cannot fail
	return b
}

package event

import (
	"errors"
	"strings"
)

// Reason says why an event is invalid. Reasons label
// fraudwatch_events_invalid_total and start the fraudwatch-error dead-letter
// header, so the set is closed: Reasons lists it.
type Reason string

// Reasons an event is invalid (docs/events.md).
const (
	ReasonOversized      Reason = "oversized"
	ReasonInvalidUTF8    Reason = "invalid_utf8"
	ReasonMalformedJSON  Reason = "malformed_json"
	ReasonTooDeep        Reason = "too_deep"
	ReasonMissingField   Reason = "missing_field"
	ReasonWrongType      Reason = "wrong_type"
	ReasonInvalidEventID Reason = "invalid_event_id"
	ReasonInvalidType    Reason = "invalid_type"
	ReasonTypeMismatch   Reason = "type_mismatch"
	ReasonInvalidAmount  Reason = "invalid_amount"
	ReasonInvalidTime    Reason = "invalid_occurred_at"
	ReasonInvalidCurr    Reason = "invalid_currency"
	// ReasonUnprocessable: a valid event that the rules engine cannot
	// process, and never will (see ErrUnprocessable).
	ReasonUnprocessable Reason = "unprocessable"
)

// Reasons lists every reason an event can be invalid for.
var Reasons = []Reason{
	ReasonOversized, ReasonInvalidUTF8, ReasonMalformedJSON, ReasonTooDeep, ReasonMissingField,
	ReasonWrongType, ReasonInvalidEventID, ReasonInvalidType, ReasonTypeMismatch,
	ReasonInvalidAmount, ReasonInvalidTime, ReasonInvalidCurr, ReasonUnprocessable,
}

// InvalidError says why an event cannot be processed. Its text never
// contains field values: it travels in logs and dead-letter headers.
type InvalidError struct {
	Reason Reason
	Field  string // the field at fault, if any
	Detail string
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Reason))
	if e.Field != "" || e.Detail != "" {
		b.WriteString(":")
	}
	if e.Field != "" {
		b.WriteString(" ")
		b.WriteString(e.Field)
	}
	if e.Detail != "" {
		b.WriteString(" ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

func invalid(reason Reason, field, detail string) *InvalidError {
	return &InvalidError{Reason: reason, Field: field, Detail: detail}
}

// ErrUnprocessable marks a valid event that no retry can process: a script
// refused the arguments the rules derived from it. A handler wraps it so
// that the consumer dead-letters the event (reason unprocessable) instead of
// retrying it for ever.
var ErrUnprocessable = errors.New("event cannot be processed")

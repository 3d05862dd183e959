package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// stringFields are the string fields of the schema, with where they go.
var stringFields = []struct {
	name     string
	required bool
	set      func(*Event) *string
}{
	{"event_id", true, func(e *Event) *string { return &e.EventID }},
	{"order_id", true, func(e *Event) *string { return &e.OrderID }},
	{"customer_id", true, func(e *Event) *string { return &e.CustomerID }},
	{"email", false, func(e *Event) *string { return &e.Email }},
	{"phone", false, func(e *Event) *string { return &e.Phone }},
	{"card_fingerprint", false, func(e *Event) *string { return &e.CardFingerprint }},
	{"ip", false, func(e *Event) *string { return &e.IP }},
	{"device_id", false, func(e *Event) *string { return &e.DeviceID }},
	{"shipping_address", false, func(e *Event) *string { return &e.ShippingAddress }},
}

// Decode decodes and validates one message value. topicType is the
// type implied by the topic the message came from ("" when the topic
// carries both types and the event must say). A returned error is always an
// *InvalidError.
func Decode(data []byte, topicType Type) (*Event, error) {
	if !utf8.Valid(data) {
		return nil, invalid(ReasonInvalidUTF8, "", "value is not valid UTF-8")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, invalid(ReasonMalformedJSON, "", "value is not a JSON object")
	}
	e := &Event{raw: raw}

	for _, f := range stringFields {
		v, ok, err := str(raw, f.name)
		if err != nil {
			return nil, err
		}
		if !ok && f.required {
			return nil, invalid(ReasonMissingField, f.name, "is required")
		}
		*f.set(e) = v
	}
	if len(e.EventID) > MaxIDBytes {
		return nil, invalid(ReasonInvalidEventID, "event_id", fmt.Sprintf("is longer than %d bytes", MaxIDBytes))
	}

	var err error
	if e.Type, err = eventType(raw, topicType); err != nil {
		return nil, err
	}
	if e.Amount, err = amount(raw); err != nil {
		return nil, err
	}
	if e.Currency, err = currency(raw); err != nil {
		return nil, err
	}
	if e.OccurredAt, err = occurredAt(raw); err != nil {
		return nil, err
	}
	return e, nil
}

// eventType reads the event's type, which a topic of one type implies.
func eventType(raw map[string]json.RawMessage, topicType Type) (Type, error) {
	typ, ok, err := str(raw, "type")
	switch {
	case err != nil:
		return "", err
	case ok && typ != string(Order) && typ != string(Refund):
		return "", invalid(ReasonInvalidType, "type", `must be "order" or "refund"`)
	case ok && topicType != "" && Type(typ) != topicType:
		return "", invalid(ReasonTypeMismatch, "type", "does not match the topic")
	case ok:
		return Type(typ), nil
	case topicType != "":
		return topicType, nil
	}
	return "", invalid(ReasonMissingField, "type", "is required on a topic that carries both types")
}

// currency reads the optional currency code, upper-cased.
func currency(raw map[string]json.RawMessage) (string, error) {
	cur, ok, err := str(raw, "currency")
	if err != nil || !ok {
		return "", err
	}
	if !isCurrencyCode(cur) {
		return "", invalid(ReasonInvalidCurr, "currency", "must be a three-letter ISO 4217 code")
	}
	return strings.ToUpper(cur), nil
}

// occurredAt reads the optional time of the event.
func occurredAt(raw map[string]json.RawMessage) (time.Time, error) {
	at, ok, err := str(raw, "occurred_at")
	if err != nil || !ok {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, upperTZ(at))
	if err != nil {
		return time.Time{}, invalid(ReasonInvalidTime, "occurred_at", "must be an RFC 3339 time")
	}
	return t, nil
}

// str reads an optional string field. Absent, null and "" all count as
// absent; any other JSON type is an error.
func str(raw map[string]json.RawMessage, name string) (string, bool, error) {
	v, ok := raw[name]
	if !ok || isNull(v) {
		return "", false, nil
	}
	if len(v) == 0 || v[0] != '"' {
		return "", false, invalid(ReasonWrongType, name, "must be a string")
	}
	s, err := unquote(v)
	if err != nil {
		return "", false, invalid(ReasonWrongType, name, "must be a string")
	}
	return s, s != "", nil
}

// unquote decodes a JSON string of a document json.Unmarshal has already
// checked. Most strings hold no escape: their bytes, between the quotes,
// are their value, and decoding them again would cost an allocation of the
// decoder each.
func unquote(v json.RawMessage) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v[1:len(v)-1], '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// amount reads the required amount: a JSON integer literal in
// [1, MaxAmount]. 100.0, 1e2 and "100" are all refused: minor units are
// whole numbers, and accepting a float would invite rounding.
func amount(raw map[string]json.RawMessage) (int64, error) {
	v, ok := raw["amount"]
	if !ok || isNull(v) {
		return 0, invalid(ReasonMissingField, "amount", "is required")
	}
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, invalid(ReasonInvalidAmount, "amount", "must be an integer number of minor units")
	}
	if bytes.ContainsAny(v, ".eE") {
		return 0, invalid(ReasonInvalidAmount, "amount", "must be an integer, not a fraction")
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 1 || n > MaxAmount {
		return 0, invalid(ReasonInvalidAmount, "amount", "must lie between 1 and 10^15")
	}
	return n, nil
}

// upperTZ upper-cases the ASCII letters t and z, which RFC 3339 (§5.6)
// allows in lower case but time.Parse does not. No other letter can appear
// in a valid time, so nothing invalid becomes valid.
func upperTZ(s string) string {
	if !strings.ContainsAny(s, "tz") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case 't':
			return 'T'
		case 'z':
			return 'Z'
		}
		return r
	}, s)
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

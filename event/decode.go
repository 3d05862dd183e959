package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The members the schema names, as indexes of a members array.
const (
	fEventID = iota
	fOrderID
	fCustomerID
	fEmail
	fPhone
	fCardFingerprint
	fIP
	fDeviceID
	fShippingAddress
	fType
	fAmount
	fCurrency
	fOccurredAt
	numFields
)

// fieldIndex is the index of a member the schema names, or -1.
func fieldIndex(name []byte) int {
	switch string(name) {
	case "event_id":
		return fEventID
	case "order_id":
		return fOrderID
	case "customer_id":
		return fCustomerID
	case "email":
		return fEmail
	case "phone":
		return fPhone
	case "card_fingerprint":
		return fCardFingerprint
	case "ip":
		return fIP
	case "device_id":
		return fDeviceID
	case "shipping_address":
		return fShippingAddress
	case "type":
		return fType
	case "amount":
		return fAmount
	case "currency":
		return fCurrency
	case "occurred_at":
		return fOccurredAt
	}
	return -1
}

// members holds the raw value of each member the schema names (the last,
// should a name repeat, as encoding/json has it; nil when absent), its
// offset in the message, and the message as a string when there is one
// (else ""; a message is never empty).
type members struct {
	raw  [numFields]json.RawMessage
	at   [numFields]int
	text string
}

// stringFields are the string fields of the schema, with where they go.
var stringFields = []struct {
	index    int
	name     string
	required bool
	set      func(*Event) *string
}{
	{fEventID, "event_id", true, func(e *Event) *string { return &e.EventID }},
	{fOrderID, "order_id", true, func(e *Event) *string { return &e.OrderID }},
	{fCustomerID, "customer_id", true, func(e *Event) *string { return &e.CustomerID }},
	{fEmail, "email", false, func(e *Event) *string { return &e.Email }},
	{fPhone, "phone", false, func(e *Event) *string { return &e.Phone }},
	{fCardFingerprint, "card_fingerprint", false, func(e *Event) *string { return &e.CardFingerprint }},
	{fIP, "ip", false, func(e *Event) *string { return &e.IP }},
	{fDeviceID, "device_id", false, func(e *Event) *string { return &e.DeviceID }},
	{fShippingAddress, "shipping_address", false, func(e *Event) *string { return &e.ShippingAddress }},
}

// Decode decodes and validates one message value. topicType is the
// type implied by the topic the message came from ("" when the topic
// carries both types and the event must say). A returned error is always an
// *InvalidError. The event keeps data, for group_by on fields it does not
// name: data must not change while the event is in use.
func Decode(data []byte, topicType Type) (*Event, error) {
	e := new(Event)
	if err := decode(e, data, "", topicType); err != nil {
		return nil, err
	}
	return e, nil
}

// Batch decodes the messages of one fetched batch into events that share
// their allocations: one array of events, and one copy of all the messages
// whose substrings are their strings, where Decode allocates an event and
// each of its strings for every message. Any event of a batch, or any of
// its strings, keeps the whole batch in memory: what is kept long (an
// alert's ids, a backtest's report) is better copied.
type Batch struct {
	values [][]byte
	text   string
	// starts[i] is where values[i] is in text.
	starts []int
	events []Event
}

// NewBatch returns the Batch of values, the messages in their order (nil
// for one that will not be decoded). The events keep their values, which
// must not change while the events are in use.
func NewBatch(values [][]byte) *Batch {
	size := 0
	for _, v := range values {
		size += len(v)
	}
	var text strings.Builder
	text.Grow(size)
	starts := make([]int, len(values)+1)
	for i, v := range values {
		starts[i] = text.Len()
		text.Write(v)
	}
	starts[len(values)] = text.Len()
	return &Batch{values: values, text: text.String(), starts: starts, events: make([]Event, len(values))}
}

// Decode decodes the batch's message i as Decode does.
func (b *Batch) Decode(i int, topicType Type) (*Event, error) {
	e := &b.events[i]
	if err := decode(e, b.values[i], b.text[b.starts[i]:b.starts[i+1]], topicType); err != nil {
		*e = Event{}
		return nil, err
	}
	return e, nil
}

// decode decodes data into e. text is data as a string, whose substrings
// become the event's strings where they hold no escape; "": each string a
// copy of its own, so that an event kept alone keeps its strings and
// data, not a second copy of data.
func decode(e *Event, data []byte, text string, topicType Type) error {
	if !utf8.Valid(data) {
		return invalid(ReasonInvalidUTF8, "", "value is not valid UTF-8")
	}
	var m members
	if err := eachMember(data, func(name []byte, value json.RawMessage, at int) {
		if i := fieldIndex(name); i >= 0 {
			m.raw[i], m.at[i] = value, at
		}
	}); err != nil {
		if errors.Is(err, errTooDeep) {
			return invalid(ReasonTooDeep, "", fmt.Sprintf("value nests deeper than %d levels", MaxDepth))
		}
		return invalid(ReasonMalformedJSON, "", "value is not a JSON object")
	}
	m.text = text
	e.data = data

	for _, f := range stringFields {
		v, ok, err := m.str(f.index, f.name)
		if err != nil {
			return err
		}
		if !ok && f.required {
			return invalid(ReasonMissingField, f.name, "is required")
		}
		*f.set(e) = v
	}
	if len(e.EventID) > MaxIDBytes {
		return invalid(ReasonInvalidEventID, "event_id", fmt.Sprintf("is longer than %d bytes", MaxIDBytes))
	}

	var err error
	if e.Type, err = eventType(&m, topicType); err != nil {
		return err
	}
	if e.Amount, err = amount(m.raw[fAmount]); err != nil {
		return err
	}
	if e.Currency, err = currency(&m); err != nil {
		return err
	}
	if e.OccurredAt, err = occurredAt(&m); err != nil {
		return err
	}
	return nil
}

// eventType reads the event's type, which a topic of one type implies.
func eventType(m *members, topicType Type) (Type, error) {
	typ, ok, err := m.str(fType, "type")
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
func currency(m *members) (string, error) {
	cur, ok, err := m.str(fCurrency, "currency")
	if err != nil || !ok {
		return "", err
	}
	if !isCurrencyCode(cur) {
		return "", invalid(ReasonInvalidCurr, "currency", "must be a three-letter ISO 4217 code")
	}
	return strings.ToUpper(cur), nil
}

// occurredAt reads the optional time of the event.
func occurredAt(m *members) (time.Time, error) {
	at, ok, err := m.str(fOccurredAt, "occurred_at")
	if err != nil || !ok {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, upperTZ(at))
	if err != nil {
		return time.Time{}, invalid(ReasonInvalidTime, "occurred_at", "must be an RFC 3339 time")
	}
	return t, nil
}

// str reads the optional string field name, whose raw value is v (nil:
// absent). Absent, null and "" all count as absent; any other JSON type is
// an error.
func (m *members) str(field int, name string) (string, bool, error) {
	v := m.raw[field]
	if v == nil || isNull(v) {
		return "", false, nil
	}
	if len(v) == 0 || v[0] != '"' {
		return "", false, invalid(ReasonWrongType, name, "must be a string")
	}
	if m.text != "" && len(v) >= 2 && v[len(v)-1] == '"' && bytes.IndexByte(v[1:len(v)-1], '\\') < 0 {
		s := m.text[m.at[field]+1 : m.at[field]+len(v)-1]
		return s, s != "", nil
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
func amount(v json.RawMessage) (int64, error) {
	if v == nil || isNull(v) {
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

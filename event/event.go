// Package event is the schema of fraudwatch's input: the order and refund
// events read from Kafka (docs/events.md). Decode turns a message value into
// an *Event or an *InvalidError whose Reason says why it cannot be counted;
// the text of either never holds a field's value, so both may travel in logs
// and dead-letter headers.
package event

import (
	"encoding/json"
	"strconv"
	"time"
)

// Type is the kind of an event.
type Type string

// Event types. An order adds to counters; a refund lowers amount counters.
const (
	Order  Type = "order"
	Refund Type = "refund"
)

// Limits of an event (docs/events.md).
const (
	MaxIDBytes = 128                   // event_id
	MaxAmount  = 1_000_000_000_000_000 // 10^15 minor units
)

// Source says where an event was read from. It is set by the consumer and
// is what logs name instead of the payload.
type Source struct {
	Topic     string
	Partition int
	Offset    int64
	// Time is the Kafka record's timestamp: the event's time when it
	// carries no occurred_at.
	Time time.Time
}

// Event is one decoded, validated order or refund.
type Event struct {
	EventID         string
	Type            Type
	OrderID         string
	CustomerID      string
	Email           string
	Phone           string
	CardFingerprint string
	IP              string
	DeviceID        string
	ShippingAddress string
	Amount          int64
	Currency        string    // upper-case ISO 4217 code, or ""
	OccurredAt      time.Time // zero when the event carries none

	Source Source

	// data is the message the event was decoded from, for group_by on
	// fields this type does not name.
	data []byte
}

// Fields are the fields of the schema (docs/events.md), by their JSON
// names, in its order: what a rule may name without declaring it
// (event_fields, docs/configuration.md). Events may carry others, which
// Field reads as well.
var Fields = []string{
	"event_id", "type", "order_id", "customer_id",
	"email", "phone", "card_fingerprint", "ip", "device_id", "shipping_address",
	"amount", "currency", "occurred_at",
}

// Field returns the value of a field by its JSON name, as group_by sees it:
// strings as they are, numbers as their JSON text, booleans as true/false.
// Absent, null, empty, object and array values are reported as absent.
func (e *Event) Field(name string) (string, bool) {
	switch name {
	case "event_id":
		return e.EventID, e.EventID != ""
	case "type":
		return string(e.Type), e.Type != ""
	case "order_id":
		return e.OrderID, e.OrderID != ""
	case "customer_id":
		return e.CustomerID, e.CustomerID != ""
	case "email":
		return e.Email, e.Email != ""
	case "phone":
		return e.Phone, e.Phone != ""
	case "card_fingerprint":
		return e.CardFingerprint, e.CardFingerprint != ""
	case "ip":
		return e.IP, e.IP != ""
	case "device_id":
		return e.DeviceID, e.DeviceID != ""
	case "shipping_address":
		return e.ShippingAddress, e.ShippingAddress != ""
	case "amount":
		return strconv.FormatInt(e.Amount, 10), true
	case "currency":
		return e.Currency, e.Currency != ""
	}
	var v json.RawMessage
	// The last member of that name, as encoding/json has it. For an event
	// Decode made this cannot fail (it read data as an object already); an
	// event built otherwise has no data, so no other fields.
	_ = eachMember(e.data, func(n []byte, value json.RawMessage, _ int) {
		if string(n) == name {
			v = value
		}
	})
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		s, err := unquote(v)
		if err != nil {
			return "", false
		}
		return s, s != ""
	case 't', 'f':
		return string(v), true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(v), true
	}
	return "", false // null, object, array
}

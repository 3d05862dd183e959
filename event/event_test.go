package event_test

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/event"
)

// baseEvent is a valid order; tests change one field at a time.
func baseEvent() map[string]any {
	return map[string]any{
		"event_id":    "evt-1",
		"type":        "order",
		"order_id":    "ord-1",
		"customer_id": "cust-1",
		"amount":      json.Number("15000"),
	}
}

// with returns baseEvent with field set to v (a raw JSON literal) or, when
// v is remove, without it.
func with(t *testing.T, field string, v any) []byte {
	t.Helper()
	m := baseEvent()
	if v == remove {
		delete(m, field)
	} else {
		m[field] = v
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type removeT struct{}

var remove = removeT{}

// raw is a JSON literal placed as it is.
type raw string

func (r raw) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestDecodeValid(t *testing.T) {
	ts := time.Date(2024, 3, 1, 12, 30, 45, 0, time.FixedZone("", 9*3600))
	tests := []struct {
		name  string
		data  []byte
		topic event.Type
		check func(t *testing.T, e *event.Event)
	}{
		{
			name: "all fields", topic: event.Order,
			data: []byte(`{"event_id":"evt-1","type":"order","order_id":"ord-1","customer_id":"cust-1",
				"email":"a@example.com","phone":"+82-10-1234-5678","card_fingerprint":"fp-1","ip":"203.0.113.9",
				"device_id":"dev-1","shipping_address":"서울 강남구 1","amount":15000,"currency":"KRW",
				"occurred_at":"2024-03-01T12:30:45+09:00"}`),
			check: func(t *testing.T, e *event.Event) {
				want := event.Event{
					EventID: "evt-1", Type: event.Order, OrderID: "ord-1", CustomerID: "cust-1",
					Email: "a@example.com", Phone: "+82-10-1234-5678", CardFingerprint: "fp-1",
					IP: "203.0.113.9", DeviceID: "dev-1", ShippingAddress: "서울 강남구 1",
					Amount: 15000, Currency: "KRW",
				}
				got := *e
				if !got.OccurredAt.Equal(ts) {
					t.Errorf("OccurredAt = %v, want %v", got.OccurredAt, ts)
				}
				if got.EventID != want.EventID || got.Type != want.Type || got.OrderID != want.OrderID ||
					got.CustomerID != want.CustomerID || got.Email != want.Email || got.Phone != want.Phone ||
					got.CardFingerprint != want.CardFingerprint || got.IP != want.IP || got.DeviceID != want.DeviceID ||
					got.ShippingAddress != want.ShippingAddress || got.Amount != want.Amount || got.Currency != want.Currency {
					t.Errorf("got %+v\nwant %+v", got, want)
				}
			},
		},
		{
			name: "minimal, type from the topic", topic: event.Order,
			data: with(t, "type", remove),
			check: func(t *testing.T, e *event.Event) {
				if e.Type != event.Order || e.Currency != "" || !e.OccurredAt.IsZero() || e.Email != "" {
					t.Errorf("got %+v", e)
				}
			},
		},
		{
			name: "refund topic supplies refund", topic: event.Refund,
			data:  with(t, "type", remove),
			check: wantType(event.Refund),
		},
		{
			name: "type matching the topic", topic: event.Refund,
			data:  with(t, "type", "refund"),
			check: wantType(event.Refund),
		},
		{
			name: "both-types topic takes the field", topic: "",
			data:  with(t, "type", "refund"),
			check: wantType(event.Refund),
		},
		{name: "type null counts as missing", topic: event.Order, data: with(t, "type", nil), check: wantType(event.Order)},
		{name: "amount 1", topic: event.Order, data: with(t, "amount", raw("1")), check: wantAmount(1)},
		{name: "amount 10^15", topic: event.Order, data: with(t, "amount", raw("1000000000000000")), check: wantAmount(event.MaxAmount)},
		{name: "amount with white space", topic: event.Order, data: []byte("{\"event_id\":\"e\",\"order_id\":\"o\",\"customer_id\":\"c\",\"amount\":\n 42 \t}"), check: wantAmount(42)},
		{name: "event_id 128 bytes", topic: event.Order, data: with(t, "event_id", strings.Repeat("x", 128)), check: wantEventIDLen(128)},
		{name: "event_id 1 byte", topic: event.Order, data: with(t, "event_id", "x"), check: wantEventIDLen(1)},
		{name: "event_id 128 bytes of Korean and ASCII", topic: event.Order, data: with(t, "event_id", strings.Repeat("한", 42)+"xy"), check: wantEventIDLen(128)},
		{name: "currency lower case normalised", topic: event.Order, data: with(t, "currency", "krw"), check: wantCurrency("KRW")},
		{name: "currency mixed case normalised", topic: event.Order, data: with(t, "currency", "uSd"), check: wantCurrency("USD")},
		{name: "currency empty is absent", topic: event.Order, data: with(t, "currency", ""), check: wantCurrency("")},
		{name: "currency null is absent", topic: event.Order, data: with(t, "currency", nil), check: wantCurrency("")},
		{name: "occurred_at UTC", topic: event.Order, data: with(t, "occurred_at", "2024-03-01T03:30:45Z"), check: wantTime(ts)},
		{name: "occurred_at with nanoseconds", topic: event.Order, data: with(t, "occurred_at", "2024-03-01T03:30:45.123456789Z"), check: wantTime(ts.Add(123456789))},
		{name: "occurred_at lower-case t and z (RFC 3339 5.6)", topic: event.Order, data: with(t, "occurred_at", "2024-03-01t03:30:45z"), check: wantTime(ts)},
		{name: "occurred_at empty is absent", topic: event.Order, data: with(t, "occurred_at", ""), check: wantTime(time.Time{})},
		{name: "identity null is absent", topic: event.Order, data: with(t, "email", nil), check: func(t *testing.T, e *event.Event) {
			if e.Email != "" {
				t.Errorf("Email = %q", e.Email)
			}
		}},
		{name: "unknown extra fields allowed", topic: event.Order, data: with(t, "merchant", map[string]any{"id": 1, "tags": []int{1}}), check: wantAmount(15000)},
		{name: "field names are case-sensitive", topic: event.Order, data: with(t, "Amount", "not a number"), check: wantAmount(15000)},
		{name: "escaped UTF-8 in strings", topic: event.Order, data: with(t, "customer_id", raw(`"\ud55c\uad6d"`)), check: func(t *testing.T, e *event.Event) {
			if e.CustomerID != "한국" {
				t.Errorf("CustomerID = %q", e.CustomerID)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := event.Decode(tt.data, tt.topic)
			if err != nil {
				t.Fatalf("Decode(%s): %v", tt.data, err)
			}
			tt.check(t, e)
		})
	}
}

func wantType(want event.Type) func(*testing.T, *event.Event) {
	return func(t *testing.T, e *event.Event) {
		if e.Type != want {
			t.Errorf("Type = %q, want %q", e.Type, want)
		}
	}
}

func wantAmount(want int64) func(*testing.T, *event.Event) {
	return func(t *testing.T, e *event.Event) {
		if e.Amount != want {
			t.Errorf("Amount = %d, want %d", e.Amount, want)
		}
	}
}

func wantEventIDLen(want int) func(*testing.T, *event.Event) {
	return func(t *testing.T, e *event.Event) {
		if len(e.EventID) != want {
			t.Errorf("len(EventID) = %d, want %d", len(e.EventID), want)
		}
	}
}

func wantCurrency(want string) func(*testing.T, *event.Event) {
	return func(t *testing.T, e *event.Event) {
		if e.Currency != want {
			t.Errorf("Currency = %q, want %q", e.Currency, want)
		}
	}
}

func wantTime(want time.Time) func(*testing.T, *event.Event) {
	return func(t *testing.T, e *event.Event) {
		if !e.OccurredAt.Equal(want) {
			t.Errorf("OccurredAt = %v, want %v", e.OccurredAt, want)
		}
	}
}

func TestDecodeInvalid(t *testing.T) {
	type tc struct {
		name   string
		data   []byte
		topic  event.Type
		reason event.Reason
		field  string
		// secret is a part of the input that must not appear in Error().
		secret string
	}
	tests := []tc{
		{name: "not JSON", data: []byte(`order SECRET-1`), reason: event.ReasonMalformedJSON, secret: "SECRET-1"},
		{name: "truncated JSON", data: []byte(`{"event_id":"SECRET-1","amount":`), reason: event.ReasonMalformedJSON, secret: "SECRET-1"},
		{name: "trailing garbage", data: append(with(t, "event_id", "SECRET-1"), " x"...), reason: event.ReasonMalformedJSON, secret: "SECRET-1"},
		{name: "empty value", data: []byte(``), reason: event.ReasonMalformedJSON},
		{name: "top-level array", data: []byte(`[{"event_id":"SECRET-1"}]`), reason: event.ReasonMalformedJSON, secret: "SECRET-1"},
		{name: "top-level string", data: []byte(`"SECRET-1"`), reason: event.ReasonMalformedJSON, secret: "SECRET-1"},
		{name: "top-level number", data: []byte(`12345`), reason: event.ReasonMalformedJSON, secret: "12345"},
		{name: "top-level null", data: []byte(`null`), reason: event.ReasonMalformedJSON},
		// docs/events.md: past MaxDepth levels (the object is the first), in any field.
		{name: "an ignored field nested past the bound", data: with(t, "extra", raw(nested(event.MaxDepth))), reason: event.ReasonTooDeep},
		{name: "objects nested past the bound", data: with(t, "extra", raw(strings.Repeat(`{"a":`, event.MaxDepth)+"1"+strings.Repeat("}", event.MaxDepth))), reason: event.ReasonTooDeep},
		{name: "nested past the bound and never closed", data: []byte(`{"extra":` + strings.Repeat("[", event.MaxDepth)), reason: event.ReasonTooDeep},
		{name: "nested within the bound but broken", data: []byte(`{"extra":` + strings.Repeat("[", 100) + `}`), reason: event.ReasonMalformedJSON},
		{name: "invalid UTF-8 in a string", data: []byte("{\"event_id\":\"SECRET-1\xff\",\"order_id\":\"o\",\"customer_id\":\"c\",\"amount\":1}"), reason: event.ReasonInvalidUTF8, secret: "SECRET-1"},
		{name: "invalid UTF-8 outside JSON", data: []byte("\xc3\x28"), reason: event.ReasonInvalidUTF8},
		{name: "event_id 129 bytes", data: with(t, "event_id", "SECRET"+strings.Repeat("x", 123)), reason: event.ReasonInvalidEventID, field: "event_id", secret: "SECRET"},
		{name: "event_id 129 bytes of Korean", data: with(t, "event_id", strings.Repeat("한", 43)), reason: event.ReasonInvalidEventID, field: "event_id", secret: "한"},
		{name: "type unknown", topic: event.Order, data: with(t, "type", "SECRET-purchase"), reason: event.ReasonInvalidType, field: "type", secret: "SECRET"},
		{name: "type upper case", topic: event.Order, data: with(t, "type", "ORDER"), reason: event.ReasonInvalidType, field: "type", secret: "ORDER"},
		{name: "type unknown on a both-types topic", data: with(t, "type", "chargeback"), reason: event.ReasonInvalidType, field: "type", secret: "chargeback"},
		{name: "type mismatching the order topic", topic: event.Order, data: with(t, "type", "refund"), reason: event.ReasonTypeMismatch, field: "type"},
		{name: "type mismatching the refund topic", topic: event.Refund, data: with(t, "type", "order"), reason: event.ReasonTypeMismatch, field: "type"},
		{name: "type missing on a both-types topic", data: with(t, "type", remove), reason: event.ReasonMissingField, field: "type"},
		{name: "type empty on a both-types topic", data: with(t, "type", ""), reason: event.ReasonMissingField, field: "type"},
		{name: "type null on a both-types topic", data: with(t, "type", nil), reason: event.ReasonMissingField, field: "type"},
		{name: "type a number", topic: event.Order, data: with(t, "type", 1), reason: event.ReasonWrongType, field: "type"},
		{name: "amount 0", data: with(t, "amount", raw("0")), reason: event.ReasonInvalidAmount, field: "amount"},
		{name: "amount -0", data: with(t, "amount", raw("-0")), reason: event.ReasonInvalidAmount, field: "amount"},
		{name: "amount negative", data: with(t, "amount", raw("-15000")), reason: event.ReasonInvalidAmount, field: "amount", secret: "15000"},
		{name: "amount 10^15+1", data: with(t, "amount", raw("1000000000000001")), reason: event.ReasonInvalidAmount, field: "amount", secret: "1000000000000001"},
		{name: "amount MaxInt64", data: with(t, "amount", raw("9223372036854775807")), reason: event.ReasonInvalidAmount, field: "amount", secret: "9223372036854775807"},
		{name: "amount MaxInt64+1", data: with(t, "amount", raw("9223372036854775808")), reason: event.ReasonInvalidAmount, field: "amount", secret: "9223372036854775808"},
		{name: "amount huge digit string", data: with(t, "amount", raw(strings.Repeat("9", 400))), reason: event.ReasonInvalidAmount, field: "amount", secret: "99999"},
		{name: "amount 1.0", data: with(t, "amount", raw("1.0")), reason: event.ReasonInvalidAmount, field: "amount"},
		{name: "amount 15000.5", data: with(t, "amount", raw("15000.5")), reason: event.ReasonInvalidAmount, field: "amount", secret: "15000"},
		{name: "amount 1e3", data: with(t, "amount", raw("1e3")), reason: event.ReasonInvalidAmount, field: "amount"},
		{name: "amount 1E3", data: with(t, "amount", raw("1E3")), reason: event.ReasonInvalidAmount, field: "amount"},
		{name: "amount string", data: with(t, "amount", "15000"), reason: event.ReasonInvalidAmount, field: "amount", secret: "15000"},
		{name: "amount true", data: with(t, "amount", true), reason: event.ReasonInvalidAmount, field: "amount"},
		{name: "amount object", data: with(t, "amount", map[string]int{"value": 15000}), reason: event.ReasonInvalidAmount, field: "amount", secret: "15000"},
		{name: "amount array", data: with(t, "amount", []int{15000}), reason: event.ReasonInvalidAmount, field: "amount", secret: "15000"},
		{name: "amount null", data: with(t, "amount", nil), reason: event.ReasonMissingField, field: "amount"},
		{name: "amount missing", data: with(t, "amount", remove), reason: event.ReasonMissingField, field: "amount"},
		{name: "currency too long", data: with(t, "currency", "KRWX"), reason: event.ReasonInvalidCurr, field: "currency", secret: "KRWX"},
		{name: "currency too short", data: with(t, "currency", "KR"), reason: event.ReasonInvalidCurr, field: "currency"},
		{name: "currency digits", data: with(t, "currency", "410"), reason: event.ReasonInvalidCurr, field: "currency", secret: "410"},
		{name: "currency non-ASCII", data: with(t, "currency", "원원원"), reason: event.ReasonInvalidCurr, field: "currency", secret: "원"},
		{name: "currency with space", data: with(t, "currency", "KR "), reason: event.ReasonInvalidCurr, field: "currency"},
		{name: "currency a number", data: with(t, "currency", 410), reason: event.ReasonWrongType, field: "currency", secret: "410"},
		{name: "occurred_at not a time", data: with(t, "occurred_at", "SECRET yesterday"), reason: event.ReasonInvalidTime, field: "occurred_at", secret: "SECRET"},
		{name: "occurred_at without zone", data: with(t, "occurred_at", "2024-03-01T12:30:45"), reason: event.ReasonInvalidTime, field: "occurred_at", secret: "2024"},
		{name: "occurred_at with a space", data: with(t, "occurred_at", "2024-03-01 12:30:45Z"), reason: event.ReasonInvalidTime, field: "occurred_at"},
		{name: "occurred_at date only", data: with(t, "occurred_at", "2024-03-01"), reason: event.ReasonInvalidTime, field: "occurred_at"},
		{name: "occurred_at hour 24", data: with(t, "occurred_at", "2024-03-01T24:00:00Z"), reason: event.ReasonInvalidTime, field: "occurred_at"},
		{name: "occurred_at unix seconds", data: with(t, "occurred_at", 1709263845), reason: event.ReasonWrongType, field: "occurred_at", secret: "1709263845"},
	}
	for _, f := range []string{"event_id", "order_id", "customer_id"} {
		tests = append(tests,
			tc{name: f + " missing", data: with(t, f, remove), reason: event.ReasonMissingField, field: f},
			tc{name: f + " empty", data: with(t, f, ""), reason: event.ReasonMissingField, field: f},
			tc{name: f + " null", data: with(t, f, nil), reason: event.ReasonMissingField, field: f},
			tc{name: f + " number", data: with(t, f, 98765), reason: event.ReasonWrongType, field: f, secret: "98765"},
			tc{name: f + " bool", data: with(t, f, true), reason: event.ReasonWrongType, field: f},
			tc{name: f + " object", data: with(t, f, map[string]string{"id": "SECRET"}), reason: event.ReasonWrongType, field: f, secret: "SECRET"},
			tc{name: f + " array", data: with(t, f, []string{"SECRET"}), reason: event.ReasonWrongType, field: f, secret: "SECRET"},
		)
	}
	for _, f := range []string{"email", "phone", "card_fingerprint", "ip", "device_id", "shipping_address"} {
		tests = append(tests,
			tc{name: f + " number", data: with(t, f, 98765), reason: event.ReasonWrongType, field: f, secret: "98765"},
			tc{name: f + " bool", data: with(t, f, false), reason: event.ReasonWrongType, field: f},
			tc{name: f + " object", data: with(t, f, map[string]string{"v": "SECRET"}), reason: event.ReasonWrongType, field: f, secret: "SECRET"},
			tc{name: f + " array", data: with(t, f, []string{"SECRET"}), reason: event.ReasonWrongType, field: f, secret: "SECRET"},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := event.Decode(tt.data, tt.topic)
			if err == nil {
				t.Fatalf("Decode(%q) = %+v, want an error", tt.data, e)
			}
			if e != nil {
				t.Errorf("Decode returned an event with its error: %+v", e)
			}
			var ie *event.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v (%T) is not an *InvalidError", err, err)
			}
			if ie.Reason != tt.reason {
				t.Errorf("Reason = %q, want %q (error %q)", ie.Reason, tt.reason, err)
			}
			if ie.Field != tt.field {
				t.Errorf("Field = %q, want %q (error %q)", ie.Field, tt.field, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, string(tt.reason)) {
				t.Errorf("Error() = %q does not start with the reason %q", msg, tt.reason)
			}
			if tt.field != "" && !strings.Contains(msg, tt.field) {
				t.Errorf("Error() = %q does not name the field %q", msg, tt.field)
			}
			if tt.secret != "" && strings.Contains(msg, tt.secret) {
				t.Errorf("Error() = %q contains the offending value %q", msg, tt.secret)
			}
			if !slices.Contains(event.Reasons, ie.Reason) {
				t.Errorf("Reason %q is not listed in event.Reasons", ie.Reason)
			}
		})
	}
}

// nested is an array n levels deep.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// A message nested MaxDepth levels deep, the object included, is an event.
func TestDepthWithinTheBound(t *testing.T) {
	if _, err := event.Decode(with(t, "extra", raw(nested(event.MaxDepth-1))), event.Order); err != nil {
		t.Fatalf("Decode of %d levels: %v", event.MaxDepth, err)
	}
}

func TestInvalidErrorText(t *testing.T) {
	tests := []struct {
		err  event.InvalidError
		want string
	}{
		{event.InvalidError{Reason: "malformed_json"}, "malformed_json"},
		{event.InvalidError{Reason: "missing_field", Field: "amount"}, "missing_field: amount"},
		{event.InvalidError{Reason: "invalid_utf8", Detail: "value is not valid UTF-8"}, "invalid_utf8: value is not valid UTF-8"},
		{event.InvalidError{Reason: "missing_field", Field: "amount", Detail: "is required"}, "missing_field: amount is required"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestReasonsAreDistinctLabels(t *testing.T) {
	seen := map[event.Reason]bool{}
	for _, r := range event.Reasons {
		if r == "" || strings.ContainsAny(string(r), " :\n") || seen[r] {
			t.Errorf("reason %q is empty, not a plain label, or repeated", r)
		}
		seen[r] = true
	}
}

// The reasons are the labels docs/events.md lists, in its order:
// dashboards and alert rules are written against them.
func TestReasonsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(doc), "\nReasons: ")
	list, _, _ = strings.Cut(list, ": a valid event")
	if !ok {
		t.Fatal("docs/events.md has no list of reasons")
	}
	var want []string
	for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(list, -1) {
		want = append(want, m[1])
	}
	var got []string
	for _, r := range event.Reasons {
		got = append(got, string(r))
	}
	if !slices.Equal(got, want) {
		t.Errorf("event.Reasons %q,\ndocs/events.md lists %q", got, want)
	}
}

func TestEventField(t *testing.T) {
	data := []byte(`{"event_id":"evt-1","order_id":"ord-1","customer_id":"cust-1","email":"a@example.com",
		"phone":"010","card_fingerprint":"fp","ip":"203.0.113.9","device_id":"dev","shipping_address":"서울",
		"amount":15000,"currency":"krw","occurred_at":"2024-03-01T03:30:45Z",
		"merchant_id":"m-7","store":"","shop_no":42,"ratio":-1.5e3,"vip":true,"trial":false,
		"none":null,"obj":{"a":1},"arr":[1,2],"emoji":"😀 {x}"}`)
	e, err := event.Decode(data, event.Order)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		want  string
		ok    bool
	}{
		{"event_id", "evt-1", true},
		{"type", "order", true},
		{"order_id", "ord-1", true},
		{"customer_id", "cust-1", true},
		{"email", "a@example.com", true},
		{"phone", "010", true},
		{"card_fingerprint", "fp", true},
		{"ip", "203.0.113.9", true},
		{"device_id", "dev", true},
		{"shipping_address", "서울", true},
		{"amount", "15000", true},
		{"currency", "KRW", true}, // normalised, as the rule sees it
		{"occurred_at", "2024-03-01T03:30:45Z", true},
		{"merchant_id", "m-7", true},
		{"emoji", "😀 {x}", true},
		{"shop_no", "42", true},
		{"ratio", "-1.5e3", true},
		{"vip", "true", true},
		{"trial", "false", true},
		{"store", "", false},
		{"none", "", false},
		{"obj", "", false},
		{"arr", "", false},
		{"missing", "", false},
		{"Customer_ID", "", false}, // names are case-sensitive
	}
	for _, tt := range tests {
		got, ok := e.Field(tt.field)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Field(%q) = %q, %v; want %q, %v", tt.field, got, ok, tt.want, tt.ok)
		}
	}

	// Optional schema fields the event lacks are absent, not "".
	min, err := event.Decode(with(t, "type", remove), event.Refund)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"email", "phone", "card_fingerprint", "ip", "device_id", "shipping_address", "currency", "occurred_at"} {
		if v, ok := min.Field(f); ok {
			t.Errorf("Field(%q) = %q, true on an event without it", f, v)
		}
	}
	if v, ok := min.Field("type"); v != "refund" || !ok {
		t.Errorf(`Field("type") = %q, %v; want the topic's type`, v, ok)
	}
}

// The base event must itself be valid, or the invalid cases prove nothing.
func TestBaseEventValid(t *testing.T) {
	m := baseEvent()
	data, _ := json.Marshal(m)
	if _, err := event.Decode(data, event.Order); err != nil {
		t.Fatalf("base event %s: %v", data, err)
	}
	if _, err := event.Decode(data, ""); err != nil {
		t.Fatalf("base event on a both-types topic: %v", err)
	}
}

// A batch's events cost no allocation of their own: their strings are the
// batch's text, and their structs its array.
func TestBatchDecodesWithoutAllocating(t *testing.T) {
	data, err := json.Marshal(baseEvent())
	if err != nil {
		t.Fatal(err)
	}
	b := event.NewBatch([][]byte{data})
	if n := testing.AllocsPerRun(100, func() {
		if _, err := b.Decode(0, event.Order); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations an event", n)
	}
}

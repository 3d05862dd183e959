package event_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/event"
)

// specFields are the only field names an *InvalidError may carry: anything
// else would mean a key from the payload leaked into logs and headers.
var specFields = []string{
	"", "event_id", "type", "order_id", "customer_id", "email", "phone", "card_fingerprint",
	"ip", "device_id", "shipping_address", "amount", "currency", "occurred_at",
}

var topicTypes = []event.Type{"", event.Order, event.Refund}

// FuzzDecode checks that Decode never panics and that every input
// ends as either an event that keeps the schema's invariants or an
// *InvalidError with a listed reason. The seeds run in the normal suite.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		`{"event_id":"e\u00e9\n","type":"order","order_id":"o\"1","customer_id":"\ud55c","amount":1,"email":"a\/b"}`,
		`{"event_id":"e1","type":"order","order_id":"o1","customer_id":"c1","amount":15000}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1,"currency":"krw","occurred_at":"2024-03-01T03:30:45Z"}`,
		`{"event_id":"e1","type":"refund","order_id":"o1","customer_id":"c1","amount":1000000000000000}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1000000000000001}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":-1}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1.0}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1e3}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":"100"}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":99999999999999999999999999}`,
		`{"event_id":"","order_id":"o1","customer_id":"c1","amount":1}`,
		`{"event_id":null,"order_id":"o1","customer_id":"c1","amount":1}`,
		`{"event_id":7,"order_id":"o1","customer_id":"c1","amount":1}`,
		`{"event_id":"` + strings.Repeat("한", 43) + `","order_id":"o1","customer_id":"c1","amount":1}`,
		`{"event_id":"e1","type":"ORDER","order_id":"o1","customer_id":"c1","amount":1}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1,"email":{"a":1},"x":[1,{}]}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1,"event_id":"e2"}`,
		`{"event_id":"\ud800","order_id":"o1","customer_id":"c1","amount":1}`,
		"{\"event_id\":\"e\xff\",\"order_id\":\"o1\",\"customer_id\":\"c1\",\"amount\":1}",
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1,"seller":"s\u00e9","seller":"t","z\u0061":"q","n":12.5,"b":true}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1,"\ud800x":"v","customer\u005fid":"c2"}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1} {}`,
		`{"event_id":"e1","order_id":"o1","customer_id":"c1","amount":1} x`,
		`[1,2]`, `"s"`, `null`, `0`, ``, `{`, `{}`, ` {"a":1} `,
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i%len(topicTypes)))
	}
	f.Fuzz(func(t *testing.T, data []byte, topic uint8) {
		topicType := topicTypes[int(topic)%len(topicTypes)]
		e, err := event.Decode(data, topicType)
		// A batch decodes a message as Decode does, wherever it sits.
		b := event.NewBatch([][]byte{[]byte(`{"event_id":"x"}`), data, nil})
		if be, berr := b.Decode(1, topicType); (berr == nil) != (err == nil) || (err != nil && berr.Error() != err.Error()) ||
			(err == nil && !reflect.DeepEqual(*be, *e)) {
			t.Fatalf("in a batch: %+v, %v; alone: %+v, %v", be, berr, e, err)
		}
		if err != nil {
			if e != nil {
				t.Fatalf("both an event and an error: %v", err)
			}
			var ie *event.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v (%T) is not an *InvalidError", err, err)
			}
			if !slices.Contains(event.Reasons, ie.Reason) {
				t.Fatalf("reason %q not in event.Reasons", ie.Reason)
			}
			if !slices.Contains(specFields, ie.Field) {
				t.Fatalf("error names field %q, which the schema does not define", ie.Field)
			}
			// Malformed is encoding/json's word, not a stricter parser's.
			var obj map[string]json.RawMessage
			if ie.Reason == event.ReasonMalformedJSON && json.Unmarshal(data, &obj) == nil && obj != nil {
				t.Fatalf("Decode calls malformed what encoding/json reads as an object")
			}
			return
		}
		if e == nil {
			t.Fatal("nil event and nil error")
		}
		if !utf8.Valid(data) {
			t.Fatal("accepted invalid UTF-8")
		}
		if e.EventID == "" || e.OrderID == "" || e.CustomerID == "" {
			t.Fatalf("a required field is empty: %+v", e)
		}
		if len(e.EventID) > event.MaxIDBytes {
			t.Fatalf("event_id of %d bytes", len(e.EventID))
		}
		if e.Amount < 1 || e.Amount > event.MaxAmount {
			t.Fatalf("amount %d out of range", e.Amount)
		}
		if e.Type != event.Order && e.Type != event.Refund {
			t.Fatalf("type %q", e.Type)
		}
		if topicType != "" && e.Type != topicType {
			t.Fatalf("type %q on a %q topic", e.Type, topicType)
		}
		if e.Currency != "" && (len(e.Currency) != 3 || strings.ToUpper(e.Currency) != e.Currency) {
			t.Fatalf("currency %q not a normalised code", e.Currency)
		}
		for _, name := range specFields[1:] {
			v, ok := e.Field(name)
			if ok && v == "" {
				t.Fatalf("Field(%q) present but empty", name)
			}
			if !utf8.ValidString(v) {
				t.Fatalf("Field(%q) is not valid UTF-8", name)
			}
		}
		for name, want := range map[string]string{"event_id": e.EventID, "order_id": e.OrderID, "customer_id": e.CustomerID} {
			if v, ok := e.Field(name); !ok || v != want {
				t.Fatalf("Field(%q) = %q, %v; struct holds %q", name, v, ok, want)
			}
		}
		// The strings are what encoding/json makes of them, escapes or not.
		var plain map[string]any
		if err := json.Unmarshal(data, &plain); err != nil {
			t.Fatalf("Decode accepted what encoding/json refuses: %v", err)
		}
		for name, v := range plain {
			// Every string field as group_by sees it, the schema's (which
			// are substrings of one copy of data) and others; currency is
			// upper-cased.
			if want, ok := v.(string); ok && name != "currency" {
				if got, _ := e.Field(name); got != want {
					t.Fatalf("Field(%q) = %q, encoding/json says %q", name, got, want)
				}
			}
		}
		for _, name := range specFields[1:] {
			if want, ok := plain[name].(string); ok {
				if got, _ := e.Field(name); got != want && !(name == "currency" && strings.EqualFold(got, want)) {
					t.Fatalf("Field(%q) = %q, encoding/json says %q", name, got, want)
				}
			}
		}
	})
}

package alert

import (
	"strings"
	"testing"
)

func TestLinkTemplates(t *testing.T) {
	a := Alert{ID: "r/e1", Rule: "r", EventID: "e1", OrderID: "o/../1?x=1", GroupBy: []string{"customer_id"}, GroupValues: []string{"c 7"}}
	tests := []struct {
		name     string
		tmpl     LinkTemplate
		checkErr string
		want     string
		made     bool
	}{
		{"order", LinkTemplate{Text: "Order {order_id}", URL: "https://bo.example/orders/{order_id}"}, "", "https://bo.example/orders/o%2F..%2F1%3Fx=1", true},
		{"group field", LinkTemplate{Text: "Customer", URL: "https://bo.example/c/{customer_id}"}, "", "https://bo.example/c/c%207", true},
		{"unknown field", LinkTemplate{Text: "Card", URL: "https://bo.example/c/{card}"}, "{card} is not a field", "", false},
		{"not http", LinkTemplate{Text: "x", URL: "javascript:alert(1)"}, "not an absolute http(s) URL", "", false},
		{"no text", LinkTemplate{URL: "https://bo.example/"}, "both required", "", false},
		{"stray brace", LinkTemplate{Text: "x", URL: "https://bo.example/{Order}"}, "a { or }", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tmpl.Check([]string{"customer_id"})
			if tt.checkErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.checkErr) {
					t.Fatalf("Check = %v, want %q", err, tt.checkErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			l, ok := tt.tmpl.Make(a)
			if ok != tt.made || l.URL != tt.want {
				t.Fatalf("Make = %+v, %v; want %q, %v", l, ok, tt.want, tt.made)
			}
		})
	}
	// A field the alert leaves empty leaves the link out.
	if ls := MakeLinks([]LinkTemplate{{Text: "x", URL: "https://bo.example/{order_id}"}}, Alert{}); len(ls) != 0 {
		t.Fatalf("MakeLinks of an alert without an order = %+v, want none", ls)
	}
}

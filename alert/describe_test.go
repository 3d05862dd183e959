package alert_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// A description's placeholders read as the alert writes the values.
func TestDescribe(t *testing.T) {
	amount := alert.Alert{Metric: alert.Amount, Threshold: 700_000, Currency: "KRW", Window: 10 * time.Minute,
		GroupBy: []string{"card_fingerprint"}}
	usd := amount
	usd.Threshold, usd.Currency = 50_000, "USD"
	count := alert.Alert{Metric: alert.Count, Threshold: 1500, Window: time.Minute, WindowType: alert.Sliding,
		GroupBy: []string{"email", "phone"}}
	tests := []struct {
		name, desc string
		a          alert.Alert
		want       string
	}{
		{"an amount", "{threshold} or more paid with one card within {window}", amount,
			"KRW 700,000 or more paid with one card within 10m"},
		{"another currency", "{threshold} or more", usd, "USD 500.00 or more"},
		{"a count, its group", "{threshold} or more orders by one {group_by} in {window}", count,
			"1,500 or more orders by one email, phone in 1m"},
		{"twice", "{threshold}: {threshold}", count, "1,500: 1,500"},
		{"no placeholder", "Big spenders {sic}", count, "Big spenders {sic}"},
		{"empty", "", count, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := alert.Describe(tt.desc, &tt.a); got != tt.want {
				t.Errorf("Describe(%q) = %q, want %q", tt.desc, got, tt.want)
			}
		})
	}
}

func TestUnknownPlaceholders(t *testing.T) {
	tests := []struct {
		desc string
		want []string
	}{
		{"{threshold} within {window} by {group_by}", nil},
		{"{treshold} within {window}, {treshold} and {field}", []string{"{treshold}", "{field}"}},
		{"braces {} and {Threshold} and { window } are text", nil},
	}
	for _, tt := range tests {
		if got := alert.UnknownPlaceholders(tt.desc); !slices.Equal(got, tt.want) {
			t.Errorf("UnknownPlaceholders(%q) = %q, want %q", tt.desc, got, tt.want)
		}
	}
}

// A description that writes its own threshold goes stale when it changes.
func TestLiteralThreshold(t *testing.T) {
	tests := []struct {
		desc      string
		metric    alert.Metric
		threshold int64
		want      string
	}{
		{"KRW 1,000,000 or more paid with one card", alert.Amount, 1_000_000, "1,000,000"},
		{"1000000 won", alert.Amount, 1_000_000, "1000000"},
		{"USD 500 or more", alert.Amount, 50_000, "500"},
		{"USD 12.50 or more", alert.Amount, 1250, "12.50"},
		{"Three or more orders within a minute", alert.Count, 3, "Three"},
		{"3 or more orders within 10 minutes", alert.Count, 3, "3"},
		{"{threshold} or more orders within 10 minutes", alert.Count, 3, ""},
		{"500 orders", alert.Count, 50_000, ""}, // minor units are amounts' only
		{"Four or more cards", alert.Distinct, 3, ""},
		{"", alert.Count, 3, ""},
	}
	for _, tt := range tests {
		if got := alert.LiteralThreshold(tt.desc, tt.metric, tt.threshold); got != tt.want {
			t.Errorf("LiteralThreshold(%q, %s, %d) = %q, want %q", tt.desc, tt.metric, tt.threshold, got, tt.want)
		}
	}
}

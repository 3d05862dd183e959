package alert_test

import (
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

func TestFormatMoney(t *testing.T) {
	tests := []struct {
		name     string
		metric   alert.Metric
		v        int64
		currency string
		want     string
	}{
		{"KRW has no minor unit", "amount", 1_250_000, "KRW", "KRW 1,250,000"},
		{"JPY has no minor unit", "amount", 1000, "JPY", "JPY 1,000"},
		{"USD cents", "amount", 1250, "USD", "USD 12.50"},
		{"USD below one", "amount", 5, "USD", "USD 0.05"},
		{"USD large", "amount", 100_000_000_00, "USD", "USD 100,000,000.00"},
		{"BHD has three decimals", "amount", 1250, "BHD", "BHD 1.250"},
		{"lowercase code", "amount", 1250, "usd", "USD 12.50"},
		{"unknown code", "amount", 1250, "ZZZ", "1,250 minor units (unknown currency ZZZ)"},
		{"XXX is no currency", "amount", 1250, "XXX", "1,250 minor units (unknown currency XXX)"},
		{"malformed code", "amount", 1250, "dollars", "1,250 minor units (unknown currency dollars)"},
		{"no currency", "amount", 1250, "", "1,250 minor units"},
		{"negative", "amount", -1250, "USD", "USD -12.50"},
		{"count ignores currency", "count", 1_234_567, "KRW", "1,234,567"},
		{"small count", "count", 3, "", "3"},
		{"max int64", "amount", 9_223_372_036_854_775_807, "USD", "USD 92,233,720,368,547,758.07"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := alert.FormatValue(tt.metric, tt.v, tt.currency); got != tt.want {
				t.Errorf("FormatValue(%q, %d, %q) = %q, want %q", tt.metric, tt.v, tt.currency, got, tt.want)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{time.Second, "1s"},
		{90 * time.Second, "1m30s"},
		{10 * time.Minute, "10m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{24 * time.Hour, "24h"},
	}
	for _, tt := range tests {
		if got := alert.FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

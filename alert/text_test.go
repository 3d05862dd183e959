package alert

import (
	"testing"
	"time"
)

// The exported helpers are the formatting the Slack message uses; the
// cases of TestFormatMoney and TestFormatDuration cover the details.
func TestExportedFormatters(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{FormatValue("amount", 1_250_000, "KRW"), "KRW 1,250,000"},
		{FormatValue("amount", 1250, "USD"), "USD 12.50"},
		{FormatValue("count", 1234, "KRW"), "1,234"},
		{FormatDuration(10 * time.Minute), "10m"},
		{FormatDuration(90 * time.Second), "1m30s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

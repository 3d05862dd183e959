package testkit

import (
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// SampleAlert is one alert with every field set, for the tests of what
// formats, logs or delivers alerts. Its time is 14:05:06 in Seoul, so that
// a message shows 05:05:06Z.
func SampleAlert() alert.Alert {
	return alert.Alert{
		Rule:        "amount-per-card-10m",
		Description: "More than 1,000,000 won paid by one card within 10 minutes",
		Severity:    alert.SeverityCritical,
		Mode:        alert.ModeAlert,
		Metric:      alert.Amount,
		GroupBy:     []string{"card_fingerprint", "email"},
		GroupValues: []string{"fp_9f8e7d", "kim@example.com"},
		Current:     1_250_000,
		Threshold:   1_000_000,
		Currency:    "KRW",
		Window:      10 * time.Minute,
		Cooldown:    30 * time.Minute,
		CooldownKey: "fw:{amount-per-card-10m:x}:cooldown",
		OrderID:     "ord-77",
		EventID:     "evt-991",
		At:          time.Date(2025, 3, 4, 14, 5, 6, 0, time.FixedZone("KST", 9*3600)),
	}
}

package dispatch_test

import (
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Secrets of the test notifiers: no error may show them.
const (
	testWebhookPath = "/services/T0001/B0001/WebhookSecret0123"
	testToken       = "xoxb-1111-2222-TokenSecret0123"
)

func sampleAlert() alert.Alert {
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

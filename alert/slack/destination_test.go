package slack

import (
	"testing"
	"time"
)

// The dispatcher names a rule without a channel by where it goes: token
// mode's slack.channel; a webhook names none, since it posts where it was
// made for.
func TestDefaultDestination(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"token", Config{Token: "xoxb-1", Channel: "#fraud-alerts", Timeout: time.Second}, "#fraud-alerts"},
		{"webhook", Config{WebhookURL: "https://hooks.slack.com/services/T/B/x", Timeout: time.Second}, ""},
	} {
		n, err := New(tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.DefaultDestination(); got != tt.want {
			t.Errorf("%s: DefaultDestination() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

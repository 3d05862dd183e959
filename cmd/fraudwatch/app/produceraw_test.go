package app

import (
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
)

// --topic names a configured topic by its role or its name; a role that is
// another topic's name is refused as ambiguous, and so is any other name.
func TestRawTopic(t *testing.T) {
	k := config.Default().Kafka
	swapped := k
	swapped.OrdersTopic, swapped.RefundsTopic = "refunds", "orders"
	for _, tt := range []struct {
		k          config.Kafka
		name, want string
		err        string
	}{
		{k, "orders", "orders", ""},
		{k, "dead-letter", "fraudwatch.dlq", ""},
		{k, "fraudwatch.dlq", "fraudwatch.dlq", ""},
		{k, "alerts", "fraudwatch.alerts", ""},
		{k, "fraudwatch.alerts", "fraudwatch.alerts", ""},
		{k, "dead_letter", "", "not a configured topic; give a role or a name: orders (orders), refunds (refunds), " +
			"dead-letter (fraudwatch.dlq), alerts (fraudwatch.alerts)"},
		{k, "", "", "not a configured topic"},
		{swapped, "orders", "", `--topic "orders" is ambiguous: the orders topic is "refunds", and "orders" is the refunds topic`},
		{swapped, "alerts", "fraudwatch.alerts", ""},
	} {
		got, err := RawTopic(tt.k, tt.name)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("RawTopic(%q): %q, %v; want %q, %q", tt.name, got, err, tt.want, tt.err)
		}
	}
}

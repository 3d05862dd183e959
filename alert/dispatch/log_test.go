package dispatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

func TestLogNotifierNeverLogsGroupValues(t *testing.T) {
	count := sampleAlert()
	count.Metric, count.Currency = alert.Count, ""
	count.GroupBy = []string{"email", "phone", "ip"}
	count.GroupValues = []string{"kim@example.com", "+82-10-1234-5678", "203.0.113.7"}
	count.Current, count.Threshold = 3, 3

	amount := sampleAlert()
	amount.GroupBy = []string{"card_fingerprint", "shipping_address"}
	amount.GroupValues = []string{"fp_9f8e7d", "서울특별시 강남구 테헤란로 152"}

	distinct := count
	distinct.Metric, distinct.Field = alert.Distinct, "ip"
	distinct.Evidence = []alert.Evidence{{OrderID: "ord-8", EventID: "e8", Value: "198.51.100.23"}, {OrderID: "ord-7", EventID: "e7", Value: "198.51.100.24"}}

	for _, a := range []alert.Alert{count, amount, distinct} {
		t.Run(string(a.Metric), func(t *testing.T) {
			var buf bytes.Buffer
			n := dispatch.NewLogNotifier(slog.New(slog.NewJSONHandler(&buf, nil)))
			if r, err := n.Notify(context.Background(), a); err != nil || !r.IsZero() {
				t.Fatalf("Notify: %v", err)
			}
			out := buf.String()
			for _, v := range a.GroupValues {
				if strings.Contains(out, v) {
					t.Errorf("log holds the group value %q: %s", v, out)
				}
			}
			for _, e := range a.Evidence {
				if strings.Contains(out, e.Value) || !strings.Contains(out, e.OrderID) {
					t.Errorf("log holds the value %q, or lacks the order %q: %s", e.Value, e.OrderID, out)
				}
			}
			if lines := strings.Count(out, "\n"); lines != 1 {
				t.Fatalf("%d log records, want 1: %s", lines, out)
			}
			var rec struct {
				Msg       string   `json:"msg"`
				Level     string   `json:"level"`
				Rule      string   `json:"rule"`
				Severity  string   `json:"severity"`
				Metric    string   `json:"metric"`
				Current   int64    `json:"current"`
				Threshold int64    `json:"threshold"`
				Window    int64    `json:"window"`
				GroupBy   []string `json:"group_by"`
				OrderID   string   `json:"order_id"`
				EventID   string   `json:"event_id"`
				At        string   `json:"at"`
			}
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatalf("log record is not JSON: %v", err)
			}
			if rec.Msg != "fraud alert: threshold crossed" || rec.Level != "WARN" || rec.Rule != a.Rule || rec.Severity != string(a.Severity) || rec.Metric != string(a.Metric) ||
				rec.Current != a.Current || rec.Threshold != a.Threshold || time.Duration(rec.Window) != a.Window ||
				rec.OrderID != a.OrderID || rec.EventID != a.EventID || rec.At != "2025-03-04T05:05:06Z" {
				t.Errorf("log record %+v does not describe the alert", rec)
			}
			if strings.Join(rec.GroupBy, ",") != strings.Join(a.GroupBy, ",") {
				t.Errorf("group_by = %v, want the field names %v", rec.GroupBy, a.GroupBy)
			}
		})
	}
}

// Through the dispatcher, as the service runs without Slack.
func TestLogNotifierThroughDispatcher(t *testing.T) {
	var buf bytes.Buffer
	env := testDispatcher(t, dispatch.NewLogNotifier(slog.New(slog.NewJSONHandler(&buf, nil))), dispatch.DispatcherConfig{})
	a := env.alert("g1", "evt-1")
	if err := env.deliver(t, a); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"event_id":"evt-1"`) {
		t.Errorf("log lacks the alert: %s", buf.String())
	}
	if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", a.Rule); got != 1 {
		t.Errorf("fraudwatch_alerts_sent_total = %v, want 1", got)
	}
}

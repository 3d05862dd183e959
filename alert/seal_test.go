package alert_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

func sealed() alert.Alert {
	a := testkit.SampleAlert()
	a.Group, a.Definition = "fp_9f8e7d:kim%40example.com", "0badcafe"
	a.Evidence = []alert.Evidence{{OrderID: "ord-77", EventID: "evt-991", Amount: 700_000, At: a.At}, {OrderID: "ord-76", EventID: "evt-990", Amount: 550_000}}
	a.PublishedAt = time.UnixMilli(1_741_064_706_789)
	return a
}

// A seal changes with every field it covers, and with nothing else; the
// fields' boundaries count, not only their bytes.
func TestSealCoversWhatAnAlertSays(t *testing.T) {
	base := sealed()
	tests := []struct {
		name    string
		change  func(a *alert.Alert)
		changes bool
	}{
		{"rule", func(a *alert.Alert) { a.Rule += "x" }, true},
		{"definition", func(a *alert.Alert) { a.Definition = "0000ffff" }, true},
		{"group", func(a *alert.Alert) { a.Group = "~x" }, true},
		{"group values", func(a *alert.Alert) { a.GroupValues = []string{"fp_9f8e7d…", "kim@example.com"} }, true},
		{"a value moved across a boundary", func(a *alert.Alert) { a.GroupValues = []string{"fp_9f8e7dk", "im@example.com"} }, true},
		{"group_by", func(a *alert.Alert) { a.GroupBy = []string{"card_fingerprint"} }, true},
		{"metric", func(a *alert.Alert) { a.Metric = alert.Count }, true},
		{"field", func(a *alert.Alert) { a.Field = "ip" }, true},
		{"window", func(a *alert.Alert) { a.Window++ }, true},
		{"window type", func(a *alert.Alert) { a.WindowType = alert.Sliding }, true},
		{"event id", func(a *alert.Alert) { a.EventID = "evt-992" }, true},
		{"order id", func(a *alert.Alert) { a.OrderID = "ord-VICTIM" }, true},
		{"at", func(a *alert.Alert) { a.At = a.At.Add(time.Nanosecond) }, true},
		{"current", func(a *alert.Alert) { a.Current++ }, true},
		{"currency", func(a *alert.Alert) { a.Currency = "USD" }, true},
		{"an evidence order", func(a *alert.Alert) { a.Evidence[1].OrderID = "ord-VICTIM" }, true},
		{"an evidence event", func(a *alert.Alert) { a.Evidence[1].EventID = "x" }, true},
		{"an evidence amount", func(a *alert.Alert) { a.Evidence[1].Amount++ }, true},
		{"an evidence time", func(a *alert.Alert) { a.Evidence[1].At = time.Unix(1, 0) }, true},
		{"an evidence value", func(a *alert.Alert) { a.Evidence[1].Value = "v" }, true},
		{"evidence dropped", func(a *alert.Alert) { a.Evidence = a.Evidence[:1] }, true},
		{"published_at", func(a *alert.Alert) { a.PublishedAt = a.PublishedAt.Add(time.Millisecond) }, true},
		// What the dispatcher takes from the rule in force or builds.
		{"severity, threshold, description", func(a *alert.Alert) {
			a.Severity, a.Threshold, a.Description = alert.SeverityInfo, 1, "x"
		}, false},
		{"mode, channel, cooldown, id, keys", func(a *alert.Alert) {
			a.Mode, a.Channel, a.Cooldown, a.ID, a.CooldownKey, a.RecordKey = alert.ModeShadow, "#x", 0, "x", "x", "y"
		}, false},
		{"times in another zone", func(a *alert.Alert) {
			a.At, a.PublishedAt = a.At.In(time.FixedZone("X", 3600)), a.PublishedAt.UTC()
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := sealed()
			a.GroupValues, a.Evidence = append([]string(nil), a.GroupValues...), append([]alert.Evidence(nil), a.Evidence...)
			tt.change(&a)
			if changed := a.Seal() != base.Seal(); changed != tt.changes {
				t.Errorf("seal changed: %v, want %v", changed, tt.changes)
			}
		})
	}
}

// An alert hashes the same before it is written to the alerts topic and
// once read back: JSON replaces invalid UTF-8, drops a time's zone and
// monotonic reading, and makes no difference of nil and empty.
func TestSealSurvivesTheTopic(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(a *alert.Alert)
	}{
		{"as the engine writes it", func(*alert.Alert) {}},
		{"invalid UTF-8", func(a *alert.Alert) { a.OrderID, a.Evidence[0].Value = "o\xff\xfe-1", "\xc3" }},
		{"a clock's monotonic reading", func(a *alert.Alert) { a.At = time.Now() }},
		{"no evidence", func(a *alert.Alert) { a.Evidence = []alert.Evidence{} }},
		{"unsealed", func(a *alert.Alert) { a.PublishedAt = time.Time{} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := sealed()
			a.ID, a.CooldownKey, a.RecordKey = "r/e", "c", "r"
			tt.change(&a)
			data, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			read, err := alert.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if read.Seal() != a.Seal() {
				t.Errorf("the alert read back hashes otherwise")
			}
			if read.Sealed() != a.Sealed() {
				t.Errorf("read back Sealed() = %v, want %v", read.Sealed(), a.Sealed())
			}
		})
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// The alert commands, as an operator types them, against a real Redis and
// Kafka: list shows the open alerts; ack and resolve change one in Redis,
// as cli:<who> ($USER by default), then say so on the alerts topic, keyed
// like the alert's messages; an id no open alert has is refused.
func TestAlertCommands(t *testing.T) {
	k := kafkatest.New(t)
	alerts := k.Topic(t, "alerts", 1)
	prefix := redistest.Prefix(t)
	cfg := writeConfig(t, testkit.Process{Brokers: k.Brokers, Alerts: alerts, RedisAddrs: redistest.Addrs(t), Cluster: redistest.Cluster(),
		Prefix: prefix, Rules: "rules.yaml"}.YAML(), testRules)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"alert"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	// An alert sent, as the dispatcher opens it.
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	g := keys.Group([]string{"c-1"})
	a := alert.Alert{ID: "orders-per-customer/evt-1", Rule: "orders-per-customer", EventID: "evt-1", Severity: alert.SeverityHigh, OrderID: "o-1"}
	body, _ := json.Marshal(a)
	if _, err := scripts.ClaimAlert(t.Context(), lua.AlertClaim{CooldownKey: keys.Cooldown(g, a.Rule), RecordKey: keys.Record(g, a.Rule, a.EventID, "slack"),
		LegacyKey: keys.AlertRecord(g, a.Rule, a.EventID), AlertKey: keys.Alert(g, a.Rule, a.EventID), Alert: body, ID: a.ID, Claimant: "alerts/0/1"}); err != nil {
		t.Fatal(err)
	}
	ref := alert.Ref{Rule: a.Rule, Group: g.Encoding(), EventID: a.EventID}
	refText, _ := json.Marshal(ref)
	index, refs := keys.OpenAlerts()
	if err := scripts.IndexAlert(t.Context(), index, refs, a.ID, string(refText), 100, time.Hour); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := run("list", "--config", cfg); code != 0 || !strings.Contains(out, a.ID) || !strings.Contains(out, "open") {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run("list", "--config", cfg, "--rule", "other", "--format", "json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("list of another rule: %d %q, want []", code, out)
	}
	if code, out, errOut := run("ack", a.ID, "--config", cfg, "--as", "ann"); code != 0 || !strings.Contains(out, a.ID+": acknowledged, acknowledged by cli:ann at ") {
		t.Fatalf("ack: %d %q %q", code, out, errOut)
	}
	msgs := k.ReadAll(t, alerts, 1, 10*time.Second)
	want, _ := dispatch.EncodeUpdate(ref)
	if len(msgs) != 1 || string(msgs[0].Value) != string(want) || string(msgs[0].Key) != keys.Cooldown(g, a.Rule) {
		t.Fatalf("on the alerts topic: %d messages, first %q keyed %q; want the update keyed by the alert's cooldown key", len(msgs), msgs[0].Value, msgs[0].Key)
	}
	var listed []map[string]any
	if code, out, _ := run("list", "--config", cfg, "--format", "json"); code != 0 || json.Unmarshal([]byte(out), &listed) != nil ||
		len(listed) != 1 || listed[0]["status"] != "acknowledged" || listed[0]["acknowledged_by"] != "cli:ann" {
		t.Errorf("list --format json after the ack: %d %q", code, out)
	}
	t.Setenv("USER", "lee")
	if code, out, errOut := run("resolve", a.ID, "--config", cfg); code != 0 || !strings.Contains(out, "resolved by cli:lee") || !strings.Contains(out, "acknowledged by cli:ann") {
		t.Fatalf("resolve: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run("list", "--config", cfg); code != 0 || !strings.Contains(out, "no open alerts") {
		t.Errorf("list after the resolve: %d %q", code, out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "list, ack or resolve"},
		{[]string{"ack", "--config", cfg}, "which alert?"},
		{[]string{"ack", a.ID, "--config", cfg}, "no open alert " + a.ID}, // resolved: no longer open
		{[]string{"list", "--config", cfg, "--format", "yaml"}, "text or json"},
	} {
		if code, out, errOut := run(tt.args...); code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("alert %q: %d %q %q, want exit %d and %q", tt.args, code, out, errOut, exitUsage, tt.want)
		}
	}
}

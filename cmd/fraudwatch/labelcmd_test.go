package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// fraudwatch label, as an operator types it, with no replica running: bad
// flags and outcomes are refused before anything is written (exit 2), an
// alert fraudwatch does not know too; a good outcome goes to the outcomes
// topic, as its record, keyed by its order, and the wait for a replica to
// record it ends in exit 1 saying where it is; list reads what the store
// holds (docs/outcomes.md, Ways in).
func TestLabelCommands(t *testing.T) {
	k := kafkatest.New(t)
	outcomes := k.Topic(t, "outcomes", 1)
	cfgPath := writeConfig(t, testkit.Process{Brokers: k.Brokers, Outcomes: outcomes, RedisAddrs: redistest.Addrs(t),
		Cluster: redistest.Cluster(), Prefix: redistest.Prefix(t), Rules: "rules.yaml"}.YAML(), testRules)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"label"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "add or list"},
		{"nothing named", []string{"add", "--outcome", "fraud", "--as", "kim"}, "name the orders"},
		{"orders and an alert", []string{"add", "--outcome", "fraud", "--as", "kim", "--alert", "r/e", "o-1"}, "not both"},
		{"an unknown outcome", []string{"add", "--outcome", "chargeback", "--as", "kim", "o-1"}, "must be fraud, legit or unclear"},
		{"a source too long", []string{"add", "--outcome", "fraud", "--as", "kim", "--source", strings.Repeat("s", 65), "o-1"}, "source"},
		{"an order id too long", []string{"add", "--outcome", "fraud", "--as", "kim", strings.Repeat("o", 129)}, "order_id"},
		{"an unknown alert", []string{"add", "--outcome", "fraud", "--as", "kim", "--alert", "orders-per-customer/e-404"}, "no alert orders-per-customer/e-404"},
		{"a bad format", []string{"list", "--format", "yaml"}, "text or json"},
		{"a bad outcome to list", []string{"list", "--outcome", "maybe"}, "fraud, legit or unclear"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(append(tc.args, "--config", cfgPath)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}

	// Written, never recorded: no replica runs.
	code, out, errOut := run("add", "--config", cfgPath, "--outcome", "fraud", "--as", "kim", "--wait", "300ms", "o-1")
	if code != exitFailure || !strings.Contains(out, "wrote 1 outcome(s) to "+outcomes) ||
		!strings.Contains(errOut, "1 of 1 outcome(s) not recorded within 300ms: they are on "+outcomes) {
		t.Fatalf("add without a replica: exit %d, %q, %q", code, out, errOut)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: outcomes, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	msg, err := r.ReadMessage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	o, err := outcome.Decode(msg.Value, time.Now())
	if err != nil || string(msg.Key) != "o-1" || o.OrderID != "o-1" || o.Label != alert.LabelFraud || o.Source != "cli" || o.By != "cli:kim" {
		t.Fatalf("the record written: key %q, %+v, %v", msg.Key, o, err)
	}

	// Recorded, as a replica records it: listed, and waited for.
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	store, done, err := app.OutcomeStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, err := store.Record(t.Context(), o, outcome.ViaCLI, o.By); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("list", "--config", cfgPath); code != 0 || !strings.Contains(out, "o-1") || !strings.Contains(out, "cli:kim") {
		t.Errorf("list: exit %d, %q, %q", code, out, errOut)
	}
	var listed []outcome.OrderRecord
	if code, out, _ := run("list", "--config", cfgPath, "--order", "o-1", "--format", "json"); code != 0 ||
		json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].Label != alert.LabelFraud {
		t.Errorf("list --order o-1: exit %d, %q", code, out)
	}
	if code, _, errOut := run("list", "--config", cfgPath, "--order", "o-404"); code != exitUsage || !strings.Contains(errOut, "no outcome") {
		t.Errorf("list --order o-404: exit %d, %q", code, errOut)
	}
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
)

// produce: events from a file or from standard input ("-"); a line it
// cannot route stops it with 2, naming the line and what was sent before.
func TestProduceCommand(t *testing.T) {
	k := kafkatest.New(t)
	orders, refunds := k.Topic(t, "orders", 1), k.Topic(t, "refunds", 1)
	path := writeConfig(t, fmt.Sprintf("kafka:\n  brokers: [%q]\n  orders_topic: %q\n  refunds_topic: %q\nredis:\n  addrs: [127.0.0.1:1]\nrules_file: rules.yaml\n",
		k.Brokers[0], orders, refunds), testRules)
	good := `{"type":"order","event_id":"1","order_id":"o","customer_id":"c","amount":5}` + "\n" +
		`{"type":"refund","event_id":"2","order_id":"o","customer_id":"c","amount":5}` + "\n"

	// A demo's recording carries its rules among its events: skipped.
	rulesLine, err := backtest.RulesLine(time.Now(), "test", []byte(testRules))
	if err != nil {
		t.Fatal(err)
	}
	cmd := command("produce", "--config", path, "--input", "-")
	cmd.Stdin = strings.NewReader(string(rulesLine) + "\n" + good)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "produced 1 order to "+orders+" and 1 refund to "+refunds+"; skipped 1 rules line\n") {
		t.Fatalf("produce from standard input: %v\n%s", err, out)
	}

	bad := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(bad, []byte(good+`{"type":"gift"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"produce", "--config", path, "--input", bad}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit code %d, want 2\n%s", code, stderr.String())
	}
	if want := "line 3: \"type\" must be \"order\" or \"refund\" (2 events before it were sent)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	if n := len(k.ReadAll(t, orders, 2, 10*time.Second)); n != 2 {
		t.Errorf("%d orders on the topic, want both runs' one each", n)
	}
}

// A failed write names the command once: "fraudwatch produce: write after
// 0 events: ...", not "fraudwatch produce: produce: ...".
func TestProduceFailureNamesTheCommandOnce(t *testing.T) {
	path := writeConfig(t, "kafka:\n  brokers: [127.0.0.1:1]\nrules_file: rules.yaml\n", testRules)
	cmd := command("produce", "--config", path, "--input", "-")
	cmd.Stdin = strings.NewReader(`{"type":"order","event_id":"1","order_id":"o","customer_id":"c","amount":5}` + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("produce to a closed port: %v, want exit code 1\n%s", err, stderr.String())
	}
	if got, want := stderr.String(), "fraudwatch produce: write after 0 events: "; !strings.HasPrefix(got, want) {
		t.Errorf("stderr %q does not start with %q", got, want)
	}
}

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

// produce --raw sends every line as it is, whatever it holds, to the
// topic --topic names by its role or its configured name, with --key's
// key or none; a topic not configured is refused, listing the choices.
func TestProduceRaw(t *testing.T) {
	k := kafkatest.New(t)
	orders, refunds := k.Topic(t, "orders", 1), k.Topic(t, "refunds", 1)
	dlq, alerts := k.Topic(t, "dlq", 1), k.Topic(t, "alerts", 1)
	path := writeConfig(t, fmt.Sprintf("kafka:\n  brokers: [%q]\n  orders_topic: %q\n  refunds_topic: %q\n  dead_letter_topic: %q\n  alerts_topic: %q\n"+
		"redis:\n  addrs: [127.0.0.1:1]\nrules_file: rules.yaml\n", k.Brokers[0], orders, refunds, dlq, alerts), testRules)
	lines := []string{
		"not JSON at all",
		`[{"type":"order","event_id":"1"}]`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001), // deeper than encoding/json goes
		"",
		`{"type":"gift"}` + "\r",
		`{"type":"order","event_id":"2","customer_id":"c"}`,
	}
	input := filepath.Join(t.TempDir(), "raw.txt")
	if err := os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		topic, want string
		key         []string
	}{
		{"dead-letter", dlq, nil},
		{alerts, alerts, []string{"--key", "cust-7"}},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"produce", "--config", path, "--input", input, "--raw", "--topic", tt.topic}, tt.key...)
		if code := run(args, &stdout, &stderr); code != 0 || stdout.String() != fmt.Sprintf("produced 6 lines to %s\n", tt.want) {
			t.Fatalf("%q: exit %d, %q %q", args, code, stdout.String(), stderr.String())
		}
		got := k.ReadAll(t, tt.want, len(lines), 10*time.Second)
		if len(got) != len(lines) {
			t.Fatalf("--topic %s: %d messages on %s, want %d", tt.topic, len(got), tt.want, len(lines))
		}
		for i, m := range got {
			if string(m.Value) != lines[i] || (tt.key == nil) != (m.Key == nil) || (tt.key != nil && string(m.Key) != tt.key[1]) {
				t.Errorf("--topic %s: message %d is %.40q keyed %q, want %.40q keyed %q", tt.topic, i, m.Value, m.Key, lines[i], tt.key)
			}
		}
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--raw", "--topic", "ordrs"}, `--topic "ordrs" is not a configured topic; give a role or a name: orders (` + orders +
			`), refunds (` + refunds + `), dead-letter (` + dlq + `), alerts (` + alerts + `)`},
		{[]string{"--raw"}, "--raw needs --topic"},
		{[]string{"--topic", "orders"}, "--topic and --key go with --raw"},
		{[]string{"--key", "k"}, "--topic and --key go with --raw"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"produce", "--config", path, "--input", input}, tt.args...)
		if code := run(args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
	// Only a line too long to read stops it, once the lines before it are
	// sent.
	long := filepath.Join(t.TempDir(), "long.txt")
	if err := os.WriteFile(long, []byte("a\n"+strings.Repeat("x", 16<<20+1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"produce", "--config", path, "--input", long, "--raw", "--topic", "dead-letter"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "line 2: longer than 16 MiB (1 lines before it were sent)") {
		t.Errorf("a line of 16 MiB and 1 byte: exit %d, %q", code, stderr.String())
	}
}

package main

import (
	"bytes"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// The test binary doubles as the fraudwatch binary: with this variable set
// it runs main's command line instead of the tests, so that signal and
// exit-code behaviour is tested on a real process.
const envRunMain = "FRAUDWATCH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(runProcess(os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	widenParallel(3)
	code := m.Run()
	removePlain()
	os.Exit(code)
}

// widenParallel lets n of the package's parallel tests run at once where
// go test's -parallel was not given (its default is GOMAXPROCS, 2 in CI):
// they are the end-to-end tests, which mostly wait (a webhook kept down a
// minute, a broker starting, replicas killed and restarted), so with two
// at once the one that waits longest started only after another ended.
func widenParallel(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); p != nil && !given {
		if now, err := strconv.Atoi(p.Value.String()); err == nil && now < n {
			_ = p.Value.Set(strconv.Itoa(n))
		}
	}
}

// A command with Redis unreachable says so once, in its own error line:
// go-redis's pool does not print its retried dials beside it.
func TestCommandsDoNotLetGoRedisLog(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "redis:\n  addrs: [127.0.0.1:1]\nrules_file: rules.yaml\n", testRules)
	for _, args := range [][]string{{"silence", "list"}, {"alert", "list"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := command(append(args, "--config", path)...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if err == nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "fraudwatch "+strings.Join(args, " ")+": ") ||
				!strings.Contains(lines[0], "connection refused") {
				t.Errorf("exit %v; stderr, want one line, the command's error:\n%s", err, stderr.String())
			}
		})
	}
}

// Three of the end-to-end tests run at once (widenParallel) unless
// go test was told otherwise.
func TestEndToEndTestsRunThreeAtOnce(t *testing.T) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String()); !given && (err != nil || n < 3) {
		t.Errorf("-test.parallel is %d (%v), want 3 or more", n, err)
	}
}

func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	return cmd
}

const testRules = `rules:
  - name: orders-per-customer
    description: "{threshold} orders by one customer within {window}"
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 3
  - name: amount-per-card
    metric: amount
    group_by: [card_fingerprint]
    window: 10m
    threshold: 1000000
    mode: shadow
`

// writeConfig writes a config and rules file into a fresh directory and
// returns the config's path.
func writeConfig(t *testing.T, body, rulesBody string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rulesBody), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fraudwatch.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCommandLine(t *testing.T) {
	good := writeConfig(t, "rules_file: rules.yaml\n", testRules)
	badRule := writeConfig(t, "rules_file: rules.yaml\n", strings.Replace(testRules, "window: 1m", "window: 500ms", 1))
	// The rules before a change: a lower threshold, a longer window, one
	// rule more.
	older := filepath.Join(filepath.Dir(good), "old-rules.yaml")
	oldRules := strings.Replace(strings.Replace(testRules, "threshold: 3", "threshold: 2", 1), "window: 10m", "window: 5m", 1) +
		"  - {name: gone, metric: count, group_by: [ip], window: 1m, threshold: 9}\n"
	if err := os.WriteFile(older, []byte(oldRules), 0o600); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(filepath.Dir(good), "events.jsonl")
	if err := os.WriteFile(events, []byte(`{"event_id":"a","type":"order","order_id":"1","customer_id":"c","amount":5,"occurred_at":"2026-03-01T12:00:00Z"}
{"event_id":"b","type":"order","order_id":"2","customer_id":"c","amount":5,"occurred_at":"2026-03-01T12:00:01Z"}
{"event_id":"c","type":"order","order_id":"3","customer_id":"c","amount":5,"occurred_at":"2026-03-01T12:00:02Z"}
not an event
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Descriptions: a placeholder no alert renders is an error, a threshold
	// written as a number a warning.
	unknownPlaceholder := writeConfig(t, "rules_file: rules.yaml\n", strings.Replace(testRules, "{window}", "{windw}", 1))
	literalThreshold := writeConfig(t, "rules_file: rules.yaml\n", strings.Replace(testRules, "{threshold} orders", "Three orders", 1))
	unknownKey := writeConfig(t, "rules_file: rules.yaml\nkafka:\n  brokerz: [x]\n", testRules)
	// The consumer's bound on an event is the backtest's: at 1 KiB, an
	// order of 2 KB is oversized.
	smallEvents := writeConfig(t, "rules_file: rules.yaml\nkafka:\n  max_event_bytes: 1024\n", testRules)
	bigEvent := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(bigEvent, []byte(`{"event_id":"a","type":"order","order_id":"1","customer_id":"c","amount":5,"note":"`+
		strings.Repeat("x", 2000)+`"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Input that opens but cannot be read: a failure of the run, not of
	// its arguments.
	unreadable := t.TempDir()
	// Outcomes of the orders of events: 1 fraud, one refused.
	outcomes := filepath.Join(t.TempDir(), "outcomes.jsonl")
	if err := os.WriteFile(outcomes, []byte(`{"type":"outcome","order_id":"1","outcome":"fraud","source":"chargeback","occurred_at":"2026-03-02T00:00:00Z"}
{"type":"outcome","order_id":"2","outcome":"maybe","source":"chargeback","occurred_at":"2026-03-02T00:00:00Z"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		out, err []string // substrings of stdout / stderr
	}{
		{"no command", nil, 2, nil, []string{"usage"}},
		{"unknown command", []string{"frobnicate"}, 2, nil, []string{`unknown command "frobnicate"`}},
		{"version", []string{"version"}, 0, []string{"fraudwatch ", "(commit ", "go1."}, nil},
		{"help", []string{"help"}, 0, []string{"fraudwatch run --config FILE"}, nil},
		{"check ok", []string{"check", "--config", good}, 0, []string{"2 rules"}, nil},
		{"check prints the rule table", []string{"check", "--config", "../../deploy/fraudwatch.yaml"}, 0,
			[]string{"RULE", "WINDOW", "amount-per-card-10m", "fixed 10m", "1000000"}, nil},
		{"shipped example config", []string{"check", "--config", "../../deploy/fraudwatch.yaml"}, 0, []string{"5 rules", "1 sliding, 1 distinct, 1 with where"}, nil},
		{"check without config", []string{"check"}, 2, nil, []string{"--config is required"}},
		{"check --diff says what a change does", []string{"check", "--config", good, "--diff", older}, 0, []string{
			"0 added, 1 removed, 2 changed, 0 unchanged", "- gone", "~ orders-per-customer: threshold 2 → 3 (keeps its windows)",
			"~ amount-per-card: window 5m → 10m, cooldown 5m → 10m (starts its windows afresh"}, nil},
		{"check --diff against an invalid file", []string{"check", "--config", good, "--diff", filepath.Join(filepath.Dir(badRule), "rules.yaml")}, 2,
			nil, []string{"--diff", "window"}},
		{"check missing file", []string{"check", "--config", "/nonexistent/fw.yaml"}, 2, nil, []string{"/nonexistent/fw.yaml"}},
		{"check bad rule names file, rule and field", []string{"check", "--config", badRule}, 2, nil,
			[]string{"rules.yaml", "orders-per-customer", "window"}},
		{"check refuses an unknown placeholder", []string{"check", "--config", unknownPlaceholder}, 2, nil,
			[]string{"rules.yaml", `"orders-per-customer"`, "description", "unknown placeholder {windw}", "{threshold}, {window}, {group_by}"}},
		{"check warns of a threshold written as a number", []string{"check", "--config", literalThreshold}, 0,
			[]string{`warning: ` + filepath.Join(filepath.Dir(literalThreshold), "rules.yaml") + `: rule "orders-per-customer": description: writes its threshold as "Three"`, "write {threshold}"}, nil},
		{"check unknown key", []string{"check", "--config", unknownKey}, 2, nil, []string{"kafka.brokerz"}},
		{"bad flag", []string{"run", "--nope"}, 2, nil, []string{"flag provided but not defined"}},
		{"topics without config", []string{"topics"}, 2, nil, []string{"fraudwatch topics: --config is required"}},
		{"topics with no partitions", []string{"topics", "--config", good, "--partitions", "0"}, 2, nil,
			[]string{"fraudwatch topics: --partitions must be 1 to 10000, not 0"}},
		{"topics with no replicas", []string{"topics", "--config", good, "--replication-factor", "0"}, 2, nil,
			[]string{"fraudwatch topics: --replication-factor must be at least 1, not 0"}},
		{"topics with a bad number", []string{"topics", "--config", good, "--partitions", "six"}, 2, nil,
			[]string{"invalid value \"six\" for flag -partitions"}},
		{"topics with an invalid config", []string{"topics", "--config", unknownKey}, 2, nil, []string{"kafka.brokerz"}},
		{"backtest", []string{"backtest", "--config", good, "--input", events}, 0, []string{
			"3 events (3 orders, 0 refunds)", "invalid lines: 1 (malformed_json 1)", "orders-per-customer", "2026-03-01T12:00:02.000Z"}, nil},
		{"backtest says it ran the scripts' model", []string{"backtest", "--config", good, "--input", events}, 0,
			[]string{"; scripts: go model\n"}, nil},
		{"backtest through the Lua scripts", []string{"backtest", "--config", good, "--input", events, "--lua", "--format", "json"}, 0,
			[]string{`"scripts": "lua"`, `"orders": 3`}, nil},
		{"backtest against other rules", []string{"backtest", "--config", good, "--input", events, "--compare", older, "--format", "json"}, 0,
			[]string{`"compare"`, `"removed"`}, nil},
		{"backtest bounds events as the consumer does", []string{"backtest", "--config", smallEvents, "--input", bigEvent}, 0,
			[]string{"0 events (0 orders, 0 refunds)", "invalid lines: 1 (oversized 1)"}, nil},
		{"backtest takes what the consumer takes", []string{"backtest", "--config", good, "--input", bigEvent}, 0,
			[]string{"1 event (1 order, 0 refunds)"}, nil},
		{"backtest of another rules file", []string{"backtest", "--config", good, "--input", events, "--rules", older}, 0,
			[]string{"rules: " + older, "gone"}, nil},
		{"backtest without input", []string{"backtest", "--config", good}, 2, nil, []string{"--input or --from-topic"}},
		{"backtest says whose settings it ran under", []string{"backtest", "--config", good, "--input", events}, 0,
			[]string{"; settings: " + good + "; scripts: go model\n"}, nil},
		{"backtest without --config of input that carries no rules", []string{"backtest", "--input", events}, 2, nil,
			[]string{"fraudwatch backtest: no rules: " + events + " carries none (a demo's recording does); give --config or --rules\n"}},
		{"backtest without --config of another rules file", []string{"backtest", "--input", events, "--rules", older}, 0,
			[]string{"rules: " + older + ", version ", "; settings: defaults (no --config); scripts: go model\n", "gone"}, nil},
		{"backtest --from-topic without --config", []string{"backtest", "--from-topic"}, 2, nil,
			[]string{"fraudwatch backtest: --from-topic needs --config: its brokers, topics and rules\n"}},
		{"backtest with both inputs", []string{"backtest", "--config", good, "--input", events, "--from-topic"}, 2, nil, []string{"one of them"}},
		{"backtest of input it cannot read fails with 1", []string{"backtest", "--config", good, "--input", unreadable}, 1, nil, []string{"is a directory"}},
		{"run with a bad log format", []string{"run", "--config", good, "--log-format", "xml"}, 2, nil, []string{"--log-format"}},
		{"backtest in an unknown format", []string{"backtest", "--config", good, "--input", events, "--format", "xml"}, 2, nil, []string{"text or json"}},
		{"backtest scored by outcomes", []string{"backtest", "--config", good, "--input", events, "--outcomes", outcomes, "--now", "2026-03-03T00:00:00Z"}, 0,
			[]string{"outcomes: 2 records (1 refused: invalid_outcome 1)", "scores (docs/outcomes.md):", "fraud orders no rule caught: 0 of 1"}, nil},
		{"backtest refuses an outcome more than a day after --now", []string{"backtest", "--config", good, "--input", events, "--outcomes", outcomes,
			"--now", "2026-02-28T23:59:59Z"}, 0, []string{"invalid_occurred_at 1"}, nil},
		{"backtest of outcomes it cannot read fails with 1", []string{"backtest", "--config", good, "--input", events, "--outcomes", unreadable}, 1,
			nil, []string{"--outcomes", "is a directory"}},
		{"backtest sweeps a rule", []string{"backtest", "--config", good, "--input", events, "--outcomes", outcomes, "--sweep",
			"orders-per-customer:threshold=2..4", "--max-alerts-per-day", "50000"}, 0,
			[]string{"orders-per-customer alone, at each threshold (3 replays):", "best recall within 50000.0 alerts a day: threshold=2"}, nil},
		{"backtest of a sweep it cannot read", []string{"backtest", "--config", good, "--input", events, "--sweep", "orders-per-customer:limit=2"}, 2,
			nil, []string{"the setting is threshold or window"}},
		{"backtest budget without a sweep", []string{"backtest", "--config", good, "--input", events, "--max-alerts-per-day", "5"}, 2,
			nil, []string{"--max-alerts-per-day is a sweep's budget: give --sweep"}},
		{"backtest sweep against other rules", []string{"backtest", "--config", good, "--input", events, "--compare", older, "--sweep",
			"orders-per-customer:threshold=2"}, 2, nil, []string{"--sweep and --compare do not go together"}},
		{"backtest --outcomes-from-topic without --config", []string{"backtest", "--input", events, "--rules", older, "--outcomes-from-topic"}, 2,
			nil, []string{"--outcomes-from-topic needs --config"}},
		{"backtest at a time it cannot read", []string{"backtest", "--config", good, "--input", events, "--now", "yesterday"}, 2,
			nil, []string{`--now "yesterday" is not an RFC 3339 time`}},
		{"stray argument", []string{"check", "--config", good, "extra"}, 2, nil, []string{"unexpected arguments"}},
		{"run with a bad log level", []string{"run", "--config", good, "--log-level", "loud"}, 2, nil, []string{"--log-level"}},
		{"produce without input", []string{"produce", "--config", good}, 2, nil, []string{"--input is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, want := range tt.out {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q: %s", want, stdout.String())
				}
			}
			for _, want := range tt.err {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q: %s", want, stderr.String())
				}
			}
		})
	}
}

// webhook is a Slack incoming-webhook stand-in that records posts.
type webhook struct {
	mu    sync.Mutex
	posts []string
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.posts = append(w.posts, string(b))
	w.mu.Unlock()
	_, _ = rw.Write([]byte("ok"))
}

func (w *webhook) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.posts)
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor is testkit.WaitFor, under the name these tests call it by.
var waitFor = testkit.WaitFor

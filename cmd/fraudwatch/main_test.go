package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// The test binary doubles as the fraudwatch binary: with this variable set
// it runs main's command line instead of the tests, so that signal and
// exit-code behaviour is tested on a real process.
const envRunMain = "FRAUDWATCH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
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
		{"backtest with both inputs", []string{"backtest", "--config", good, "--input", events, "--from-topic"}, 2, nil, []string{"one of them"}},
		{"backtest of input it cannot read fails with 1", []string{"backtest", "--config", good, "--input", unreadable}, 1, nil, []string{"is a directory"}},
		{"run with a bad log format", []string{"run", "--config", good, "--log-format", "xml"}, 2, nil, []string{"--log-format"}},
		{"backtest in an unknown format", []string{"backtest", "--config", good, "--input", events, "--format", "xml"}, 2, nil, []string{"text or json"}},
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

// An address with a one-word userinfo, in each address key, is refused by
// check and by run, which print the keys and never the credential
// (docs/configuration.md).
func TestAddressCredentialsAreRefusedUnprinted(t *testing.T) {
	const secret = "tok3nSECRET"
	path := writeConfig(t, fmt.Sprintf(`kafka:
  brokers: ["%[1]s@127.0.0.1:9092"]
redis:
  addrs: ["%[1]s@127.0.0.1:6379"]
metrics:
  listen: "%[1]s@127.0.0.1:9464"
slack:
  token: xoxb-1
  signing_secret: s3cret
  interactions_listen: "%[1]s@127.0.0.1:9091"
rules_file: rules.yaml
`, secret), testRules)
	for _, cmd := range []string{"check", "run"} {
		t.Run(cmd, func(t *testing.T) {
			out, err := command(cmd, "--config", path).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("fraudwatch %s: %v, want exit 2\n%s", cmd, err, out)
			}
			if strings.Contains(string(out), secret) {
				t.Errorf("fraudwatch %s prints the secret:\n%s", cmd, out)
			}
			for _, key := range []string{"kafka.brokers[0]", "redis.addrs[0]", "metrics.listen", "slack.interactions_listen"} {
				if !strings.Contains(string(out), key+`: "[redacted]@127.0.0.1:`) {
					t.Errorf("fraudwatch %s does not refuse %s:\n%s", cmd, key, out)
				}
			}
		})
	}
}

// demo runs from the command line: it stops by itself after --duration,
// prints its summary with the seed that repeats it, and records the
// traffic it sent for backtest (README, Two commands).
func TestDemoCommand(t *testing.T) {
	record := filepath.Join(t.TempDir(), "events.jsonl")
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"demo", "--duration", "4s", "--no-color", "--seed", "7", "--record", record}, &stdout, &stderr)
	}()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("demo --duration 4s still running after 60s")
	}
	out := stdout.String()
	if !strings.Contains(out, "Summary after") || !strings.Contains(out, "--seed 7 repeats this traffic") || !strings.Contains(out, "events sent") {
		t.Errorf("no summary naming its seed:\n%s", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("escape codes with --no-color")
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	// The rules first, the reload's halfway, the traffic's events around
	// them; the summary says how many events, where, and which rules.
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var events, rulesAt []int
	for i, l := range lines {
		if backtest.IsRulesLine([]byte(l)) {
			rulesAt = append(rulesAt, i)
		} else {
			events = append(events, i)
		}
	}
	if len(events) < 10 || len(rulesAt) != 2 || rulesAt[0] != 0 || rulesAt[1] < 2 || rulesAt[1] > len(lines)-2 {
		t.Fatalf("recorded %d events, rules lines at %v: want the rules first and the reload's among the events", len(events), rulesAt)
	}
	var first struct {
		Type    string `json:"type"`
		EventID string `json:"event_id"`
	}
	if json.Unmarshal([]byte(lines[1]), &first) != nil || first.Type == "" || first.EventID == "" {
		t.Errorf("the first event %.80q: want the traffic as events with their type", lines[1])
	}
	// The reload comes halfway, or later on a busy machine: it is taken
	// once everything sent before it is processed.
	want := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("\nRecorded %d events to %s, and the rules they ran under: built-in demo rules, cmd/fraudwatch/demo/rules.yaml, "+
		"reloaded at ", len(events), record)) + `(0:0[2-9])` + regexp.QuoteMeta(": amount-per-card-10m threshold 1000000 → 700000\n"+
		fmt.Sprintf("`fraudwatch backtest --config FILE --input %s` replays them under these rules, reloaded at the same point\n", record)))
	if !want.MatchString(out) {
		t.Errorf("the summary does not say what was recorded, want %q:\n%s", want, out)
	}
	// Its help says the level it logs at.
	stderr.Reset()
	if code := run([]string{"demo", "-h"}, &stdout, &stderr); code != 0 ||
		!regexp.MustCompile(`-log-level string\n\s+log level: debug, info, warn or error \(default "warn"\)`).MatchString(stderr.String()) {
		t.Errorf("demo -h: exit %d, no default log level warn:\n%s", code, stderr.String())
	}
	for _, bad := range [][]string{{"demo", "--log-level", "loud"}, {"demo", "--record", filepath.Join(t.TempDir(), "no", "such", "dir", "f")}} {
		if code := run(bad, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2", bad, code)
		}
	}
}

// backtest --input - reads standard input; with standard error not a
// terminal it draws no progress line there; and an interrupt ends it while
// its input is still open, with 1 and no report (docs/backtest.md).
func TestBacktestFromStandardInput(t *testing.T) {
	good := writeConfig(t, "rules_file: rules.yaml\n", testRules)
	events := `{"event_id":"a","type":"order","order_id":"1","customer_id":"c","amount":5,"occurred_at":"2026-03-01T12:00:00Z"}
{"event_id":"b","type":"order","order_id":"2","customer_id":"c","amount":5,"occurred_at":"2026-03-01T12:00:01Z"}
`
	t.Run("read to its end", func(t *testing.T) {
		cmd := command("backtest", "--config", good, "--input", "-")
		cmd.Stdin = strings.NewReader(events)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "backtest of -: 2 events (2 orders, 0 refunds)") {
			t.Errorf("stdout:\n%s", stdout.String())
		}
		if stderr.Len() > 0 {
			t.Errorf("stderr, not a terminal, got %q", stderr.String())
		}
	})
	// A producer's retry of a is replayed once, as run processes it once,
	// unless the configuration turns the check off.
	retry := events + `{"event_id":"a","type":"order","order_id":"1","customer_id":"c","amount":5,"occurred_at":"2026-03-01T12:00:00Z"}` + "\n"
	for _, tt := range []struct{ config, want string }{
		{good, "backtest of -: 2 events (2 orders, 0 refunds)"},
		{writeConfig(t, "rules_file: rules.yaml\nkafka:\n  retry_window: 0\n", testRules), "backtest of -: 3 events (3 orders, 0 refunds)"},
	} {
		cmd := command("backtest", "--config", tt.config, "--input", "-")
		cmd.Stdin = strings.NewReader(retry)
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: %v, want %q:\n%s", tt.config, err, tt.want, out)
		}
	}
	t.Run("interrupted while its input is open", func(t *testing.T) {
		cmd := command("backtest", "--config", good, "--input", "-")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var stdout bytes.Buffer
		stderr := &testkit.Buffer{}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = r, &stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		if _, err := io.WriteString(w, events); err != nil {
			t.Fatal(err)
		}
		// It reads only once its signals are caught: before that, SIGINT
		// would end it as Go's runtime does.
		waitFor(t, 10*time.Second, "the process to read its input", func() bool {
			n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ) // FIONREAD
			return err == nil && n == 0
		})
		if !signalAndWait(t, cmd, syscall.SIGINT, 10*time.Second) {
			t.Fatal("still running 10s after SIGINT, its input open")
		}
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "interrupted, nothing reported") {
			t.Errorf("exit %d, stderr %q; want 1 and why", code, stderr.String())
		}
		if stdout.Len() > 0 {
			t.Errorf("reported:\n%s", stdout.String())
		}
	})
}

func TestCheckNeverPrintsSecrets(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		code    int
		secrets []string
		// want is printed too (on stdout when code is 0, else on stderr).
		want []string
	}{
		{name: "secret settings", config: `rules_file: rules.yaml
slack:
  token: xoxb-very-secret-token
  channel: "#fraud"
redis:
  password: redis-secret-pw
`, secrets: []string{"xoxb-very-secret-token", "redis-secret-pw"}},
		{name: "a password inside a redis address", config: `rules_file: rules.yaml
redis:
  addrs: ["redis://:redis-url-secret@cache:6379"]
`, code: 2, secrets: []string{"redis-url-secret"}, want: []string{`"redis://:[redacted]@cache:6379"`}},
		{name: "a password inside a broker address", config: `rules_file: rules.yaml
kafka:
  brokers: ["fw:broker-url-secret@kafka:9092"]
`, code: 2, secrets: []string{"broker-url-secret"}, want: []string{`"fw:[redacted]@kafka:9092"`}},
		{name: "sasl plain without tls, with a warning", config: `rules_file: rules.yaml
kafka:
  sasl: {mechanism: plain, username: fw, password: sasl-secret-pw}
`, secrets: []string{"sasl-secret-pw"}, want: []string{"\nwarning: kafka.sasl.mechanism: plain without kafka.tls.enabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.config, testRules)
			var stdout, stderr bytes.Buffer
			if code := run([]string{"check", "--config", path}, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, secret := range tt.secrets {
				if strings.Contains(stdout.String()+stderr.String(), secret) {
					t.Fatalf("check printed a secret: %s%s", stdout.String(), stderr.String())
				}
			}
			out := stdout.String()
			if tt.code != 0 {
				out = stderr.String()
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("check printed no %q:\n%s", w, out)
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

// processConfig writes the configuration of a fraudwatch run as a process:
// orders (made by the caller) and fresh refunds, dead-letter and alerts
// topics on k, a fresh group, the test's Redis, the Slack webhook hookURL,
// metrics on metrics; kafka holds more lines of the kafka section.
func processConfig(t *testing.T, k *kafkatest.Cluster, orders, hookURL, metrics string, kafka []string, shutdown string) string {
	t.Helper()
	p := testkit.Process{Brokers: k.Brokers[:1], Group: kafkatest.Group(t, "fw"), Orders: orders,
		Refunds: k.Topic(t, "refunds", 1), DeadLetter: k.Topic(t, "dlq", 1), Alerts: k.Topic(t, "alerts", 2),
		Kafka:      append([]string{"heartbeat_interval: 200ms", "session_timeout: 6s"}, kafka...),
		RedisAddrs: redistest.Addrs(t), Cluster: redistest.Cluster(), Prefix: redistest.Prefix(t),
		Webhook: hookURL, Metrics: metrics, Shutdown: shutdown, Rules: "rules.yaml"}
	return writeConfig(t, p.YAML(), testRules)
}

// TestSIGTERMDrainsCommitsAndExitsZero runs the real command as a process:
// it alerts, gets SIGTERM, exits 0 in bounded time, and a restart consumes
// nothing it already processed, so it alerts nothing again; SIGINT stops
// the restarted one as cleanly.
func TestSIGTERMDrainsCommitsAndExitsZero(t *testing.T) {
	k := kafkatest.New(t)
	orders := k.Topic(t, "orders", 3)
	hook := &webhook{}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	metrics := freeAddr(t)
	// commit_interval is an hour: only the shutdown commit records progress.
	path := processConfig(t, k, orders, srv.URL+"/hook", metrics, []string{"commit_interval: 1h"}, "15s")

	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := command("run", "--config", path, "--log-format", "text")
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		waitFor(t, 30*time.Second, "/readyz", func() bool {
			resp, err := http.Get("http://" + metrics + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		return cmd, &logs
	}
	stop := func(cmd *exec.Cmd, logs *bytes.Buffer, sig syscall.Signal) {
		t.Helper()
		if !signalAndWait(t, cmd, sig, 30*time.Second) {
			t.Fatalf("no exit within 30s of %v\n%s", sig, logs.String())
		}
		if !cmd.ProcessState.Success() {
			t.Fatalf("exit after %v: %v\n%s", sig, cmd.ProcessState, logs.String())
		}
	}
	consumed := func() string {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, `fraudwatch_events_consumed_total{type="order"}`) {
				return strings.Fields(line)[1]
			}
		}
		return ""
	}
	order := func(id, customer string) []byte {
		return fmt.Appendf(nil, `{"event_id":%q,"order_id":"o-%s","customer_id":%q,"amount":1000}`, id, id, customer)
	}

	cmd, logs := start()
	k.ProduceTo(t, orders, 0, order("1", "c"), order("2", "c"))
	k.ProduceTo(t, orders, 1, order("3", "c"), order("4", "c"))
	waitFor(t, 30*time.Second, "four orders", func() bool { return consumed() == "4" })
	waitFor(t, 30*time.Second, "the Slack post", func() bool { return hook.count() == 1 })
	// commit_interval is an hour: only the shutdown commit records progress.
	stop(cmd, logs, syscall.SIGTERM)

	cmd, logs = start()
	k.ProduceTo(t, orders, 2, order("5", "someone-else"))
	waitFor(t, 30*time.Second, "the new order", func() bool { return consumed() != "" && consumed() != "0" })
	if got := consumed(); got != "1" {
		t.Fatalf("restarted process consumed %s orders, want only the new one", got)
	}
	// SIGHUP reloads the rules (unchanged here) and leaves the process
	// running: stop still sees it drain and exit 0, on SIGINT this time.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the reload SIGHUP asks for", func() bool {
		return scrape(t, metrics, "fraudwatch_rules_reloads_total", "result", "unchanged") == 1
	})
	stop(cmd, logs, syscall.SIGINT)
	if got := hook.count(); got != 1 {
		t.Fatalf("Slack posts = %d, want 1", got)
	}
}

// A replica that cannot start (here, its metrics port is taken) exits
// with 1, a runtime failure, and says why.
func TestRunExitsOneWhenItCannotStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := writeConfig(t, testkit.Process{Brokers: []string{"127.0.0.1:1"}, RedisAddrs: redistest.Addrs(t),
		Cluster: redistest.Cluster(), Metrics: taken.Addr().String(), Rules: "rules.yaml"}.YAML(), testRules)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--config", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, stderr.String())
	}
	// run logs JSON to stderr unless told otherwise.
	var line struct{ Msg, Err string }
	last := strings.TrimSpace(stderr.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	if err := json.Unmarshal([]byte(last), &line); err != nil || line.Msg != "fraudwatch could not start" || !strings.Contains(line.Err, "metrics.listen") {
		t.Errorf("stderr's last line is not JSON saying why (%v):\n%s", err, stderr.String())
	}
}

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

// startRun starts `fraudwatch run` as a process, its logs as text in
// logs; it is killed when t ends.
func startRun(t *testing.T, path string) (*exec.Cmd, *testkit.Buffer) {
	t.Helper()
	cmd := command("run", "--config", path, "--log-format", "text")
	logs := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, logs
}

// The first SIGTERM or SIGINT drains, here held by an alert whose Slack
// post does not answer; once the log says it is shutting down, a second
// ends the process at once (docs/design.md, Delivery guarantees).
func TestSecondSignalEndsTheProcessAtOnce(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			k := kafkatest.New(t)
			orders := k.Topic(t, "orders", 1)
			posted := make(chan struct{}, 16)
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case posted <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			defer srv.Close()
			defer close(release) // before Close, which waits for the handler
			metrics := freeAddr(t)
			path := processConfig(t, k, orders, srv.URL+"/hook", metrics, nil, "60s")
			cmd, logs := startRun(t, path)
			order := func(id string) []byte {
				return fmt.Appendf(nil, `{"event_id":%q,"order_id":"o-%s","customer_id":"c","amount":1000}`, id, id)
			}
			k.ProduceTo(t, orders, 0, order("1"), order("2"), order("3"))
			select {
			case <-posted:
			case <-time.After(30 * time.Second):
				t.Fatalf("no Slack post within 30s\n%s", logs.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the shutdown's log line", func() bool { return strings.Contains(logs.String(), "shutting down") })
			if !signalAndWait(t, cmd, sig, 5*time.Second) {
				t.Fatalf("still running 5s after the second signal\n%s", logs.String())
			}
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
				t.Fatalf("exit %v, want the process ended by the second signal\n%s", cmd.ProcessState, logs.String())
			}
		})
	}
}

// A shutdown step that overruns its deadline does not hold the process:
// it exits with 1 once shutdown_timeout has passed (docs/design.md,
// Delivery guarantees: Shutdown).
// kafka-go waits out a JoinGroup in progress before it leaves its group;
// here the broker holds every JoinGroup until the test ends.
func TestShutdownOverrunExitsOne(t *testing.T) {
	k := kafkatest.NewFake(t)
	orders := k.Topic(t, "orders", 1)
	joining := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the cluster closes
	k.Fake().ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.Fake().KeepControl()
		select {
		case joining <- struct{}{}:
		default:
		}
		k.Fake().SleepControl(func() { <-release })
		return nil, nil, false
	})
	metrics := freeAddr(t)
	const shutdown = 3 * time.Second
	path := processConfig(t, k, orders, "http://127.0.0.1:1/hook", metrics, nil, shutdown.String())
	cmd, logs := startRun(t, path)
	select {
	case <-joining:
	case <-time.After(30 * time.Second):
		t.Fatalf("no JoinGroup within 30s\n%s", logs.String())
	}
	began := time.Now()
	if !signalAndWait(t, cmd, syscall.SIGTERM, shutdown+30*time.Second) {
		t.Fatalf("still running %v after SIGTERM\n%s", shutdown+30*time.Second, logs.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, logs.String())
	}
	if took := time.Since(began); took < shutdown {
		t.Errorf("exited %v after SIGTERM, before shutdown_timeout (%v)\n%s", took, shutdown, logs.String())
	}
	if !strings.Contains(logs.String(), "shutdown took longer than shutdown_timeout") {
		t.Errorf("no log line says why\n%s", logs.String())
	}
}

// signalAndWait sends sig to cmd and waits up to d for it to exit; false
// when it has not (cmd.ProcessState then says how it ended).
func signalAndWait(t *testing.T, cmd *exec.Cmd, sig os.Signal, d time.Duration) bool {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func TestBackstopFiresOnlyAfterShutdownBegins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	fired := make(chan time.Time, 1)
	backstop(ctx, 50*time.Millisecond, func() { fired <- time.Now() })
	select {
	case <-fired:
		t.Fatal("fired before the shutdown began")
	case <-time.After(100 * time.Millisecond):
	}
	began := time.Now()
	cancel()
	select {
	case at := <-fired:
		if at.Sub(began) < 50*time.Millisecond {
			t.Fatalf("fired %v after the shutdown began, want at least 50ms", at.Sub(began))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("never fired")
	}
}

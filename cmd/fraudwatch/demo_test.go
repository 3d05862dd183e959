package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

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
	if strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("ended by --duration, it says it was interrupted:\n%s", stderr.String())
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
		fmt.Sprintf("`fraudwatch backtest --input %s` replays them under these rules, reloaded at the same point\n", record)))
	if !want.MatchString(out) {
		t.Errorf("the summary does not say what was recorded, want %q:\n%s", want, out)
	}
	t.Run("backtest of the recording without --config", func(t *testing.T) { backtestWithoutConfig(t, record) })
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

// A demo's recording carries its rules: backtested without --config, under
// config.Default's settings, it raises the alerts it raises with one.
func backtestWithoutConfig(t *testing.T, record string) {
	good := writeConfig(t, "rules_file: rules.yaml\n", testRules)
	backtest := func(args ...string) []byte {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"backtest", "--input", record}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("backtest %q: exit %d\n%s", args, code, stderr.String())
		}
		return stdout.Bytes()
	}
	type replay struct {
		RulesFrom    string          `json:"rules_from"`
		SettingsFrom string          `json:"settings_from"`
		Report       json.RawMessage `json:"report"`
	}
	var with, without replay
	if err := errors.Join(json.Unmarshal(backtest("--config", good, "--format", "json"), &with),
		json.Unmarshal(backtest("--format", "json"), &without)); err != nil {
		t.Fatal(err)
	}
	if with.SettingsFrom != good || without.SettingsFrom != "defaults (no --config)" {
		t.Errorf("settings from %q with --config, %q without", with.SettingsFrom, without.SettingsFrom)
	}
	if !strings.HasPrefix(without.RulesFrom, "recorded in "+record+": built-in demo rules") || without.RulesFrom != with.RulesFrom {
		t.Errorf("rules from %q without --config, %q with it: want the recording's", without.RulesFrom, with.RulesFrom)
	}
	if !bytes.Equal(with.Report, without.Report) || !bytes.Contains(with.Report, []byte(`"outcome": "sent"`)) {
		t.Errorf("the report without --config differs from the one with it, or sent no alert:\n%s\n%s", with.Report, without.Report)
	}
	if out := backtest(); !regexp.MustCompile(`(?m)^rules: recorded in .*; settings: defaults \(no --config\); scripts: go model$`).Match(out) {
		t.Errorf("the text does not say it ran under the defaults:\n%s", out)
	}
}

// A first Ctrl-C ends the demo's traffic and lets it catch up and print its
// summary, which may take a while on a busy machine; a second ends the
// process at once, as in run. On an idle machine the pipeline is often
// caught up already, and the demo may end by itself before a second signal
// can land: the test signals as soon as the notice is written, and such an
// attempt, which shows nothing, is made again, up to five times.
func TestDemoSecondInterruptEndsAtOnce(t *testing.T) {
	t.Parallel()
	for attempt := 1; ; attempt++ {
		stdout, stderr, ws := interruptDemoTwice(t)
		if ws.Signaled() && ws.Signal() == syscall.SIGINT && !strings.Contains(stdout, "\nSummary") {
			return
		}
		if ws.Signaled() || !strings.Contains(stdout, "\nSummary") || attempt == 5 {
			t.Fatalf("attempt %d ended %v, not by the second SIGINT; stdout:\n%s\nstderr:\n%s", attempt, ws, stdout, stderr)
		}
		t.Logf("attempt %d: the demo had caught up and ended before the second SIGINT; again", attempt)
	}
}

// interruptDemoTwice starts the demo, sends SIGINT once its header is out
// and again the moment it says it was interrupted, and returns its output
// and how it ended.
func interruptDemoTwice(t *testing.T) (stdout, stderr string, ws syscall.WaitStatus) {
	t.Helper()
	var out testkit.Buffer
	notice := &noticed{want: "a second Ctrl-C ends it at once", seen: make(chan struct{})}
	cmd := command("demo", "--no-color", "--seed", "7")
	cmd.Stdout, cmd.Stderr = &out, notice
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor(t, 60*time.Second, "the demo's header", func() bool {
		return strings.Contains(out.String(), "orders-per-ip-1m")
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-notice.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("the demo did not say it was interrupted; stderr:\n%s", notice.buf.String())
	}
	if !signalAndWait(t, cmd, syscall.SIGINT, 30*time.Second) {
		t.Fatalf("still running 30 s after the second SIGINT; stdout:\n%s", out.String())
	}
	ws, _ = cmd.ProcessState.Sys().(syscall.WaitStatus)
	return out.String(), notice.buf.String(), ws
}

// noticed keeps what is written and closes seen the first time it holds
// want.
type noticed struct {
	buf  testkit.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (n *noticed) Write(p []byte) (int, error) {
	k, err := n.buf.Write(p)
	if strings.Contains(n.buf.String(), n.want) {
		n.once.Do(func() { close(n.seen) })
	}
	return k, err
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

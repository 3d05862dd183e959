package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// processConfig writes the configuration of a fraudwatch run as a process:
// orders (made by the caller) and fresh refunds, dead-letter and alerts
// topics on k, a fresh group, the test's Redis, the Slack webhook hookURL,
// metrics on metrics; kafka holds more lines of the kafka section.
func processConfig(t *testing.T, k *kafkatest.Cluster, orders, hookURL, metrics string, kafka []string, shutdown string) string {
	t.Helper()
	p := testkit.Process{Brokers: k.Brokers[:1], Group: kafkatest.Group(t, "fw"), Orders: orders,
		Refunds: k.Topic(t, "refunds", 1), DeadLetter: k.Topic(t, "dlq", 1), Alerts: k.Topic(t, "alerts", 2),
		Outcomes:   k.Topic(t, "outcomes", 1),
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

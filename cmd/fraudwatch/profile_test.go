package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// run --cpuprofile FILE profiles the whole run and writes the profile at
// shutdown; a FILE that cannot be made is refused before anything starts.
func TestRunWritesItsCPUProfileAtShutdown(t *testing.T) {
	var stdout, stderr bytes.Buffer
	bad := filepath.Join(t.TempDir(), "no-such-dir", "cpu.pprof")
	path := writeConfig(t, testkit.Process{Brokers: []string{"127.0.0.1:1"}, Metrics: "127.0.0.1:0", Rules: "rules.yaml"}.YAML(), testRules)
	if code := run([]string{"run", "--config", path, "--cpuprofile", bad}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "--cpuprofile") {
		t.Fatalf("--cpuprofile in a missing directory: exit %d, want %d, saying so\n%s", code, exitUsage, stderr.String())
	}

	k := kafkatest.New(t)
	metrics := freeAddr(t)
	profile := filepath.Join(t.TempDir(), "cpu.pprof")
	path = processConfig(t, k, k.Topic(t, "orders", 1), "", metrics, nil, "15s")
	cmd := command("run", "--config", path, "--log-format", "text", "--cpuprofile", profile)
	logs := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor(t, 30*time.Second, "/readyz", func() bool { return ready(metrics) })
	if !signalAndWait(t, cmd, syscall.SIGTERM, 30*time.Second) || !cmd.ProcessState.Success() {
		t.Fatalf("exit after SIGTERM: %v\n%s", cmd.ProcessState, logs.String())
	}
	checkCPUProfile(t, profile)
	if !strings.Contains(logs.String(), "CPU profile written") {
		t.Errorf("the log does not say the profile was written:\n%s", logs.String())
	}
}

func ready(addr string) bool {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// checkCPUProfile checks that path holds a CPU profile: gzipped protobuf
// whose strings name its sample type, as go tool pprof reads it.
func checkCPUProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzipped: %v", path, err)
	}
	raw, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("cpu")) || !bytes.Contains(raw, []byte("nanoseconds")) {
		t.Fatalf("%s (%d bytes) is not a CPU profile", path, len(raw))
	}
	if out, err := exec.Command("go", "tool", "pprof", "-top", path).CombinedOutput(); err == nil && !strings.Contains(string(out), "Type: cpu") {
		t.Errorf("go tool pprof -top %s:\n%s", path, out)
	}
}

// Package scripts holds the tests of the shell scripts beside it.
package scripts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stubMaven writes an mvn that logs each call and copies two jars (or, as
// STUB_MVN says, fails or copies no Kafka jar), and a java that says it is
// the version STUB_JAVA_VERSION; it returns their directory and the log.
func stubMaven(t *testing.T) (bin, calls string) {
	t.Helper()
	bin = t.TempDir()
	calls = filepath.Join(t.TempDir(), "calls")
	mvn := `#!/usr/bin/env bash
echo mvn >>"$STUB_CALLS"
case "${STUB_MVN:-}" in
  fail) echo "[ERROR] Could not resolve dependencies"; exit 1 ;;
esac
for a in "$@"; do
  case $a in
    -DoutputDirectory=*) out=${a#*=} ;;
    -Dkafka.version=*) version=${a#*=} ;;
  esac
done
touch "$out/kafka-clients-$version.jar"
[ "${STUB_MVN:-}" = nojar ] || touch "$out/kafka_2.13-$version.jar"
`
	java := `#!/usr/bin/env bash
echo "openjdk version \"$STUB_JAVA_VERSION\" 2024-01-16" >&2
`
	for name, body := range map[string]string{"mvn": mvn, "java": java} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin, calls
}

// runScript runs a script of this folder with env beside hermetic's; it
// returns stdout, stderr and the exit code.
func runScript(t *testing.T, env []string, script string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = append(hermetic(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// kafkaSh runs scripts/kafka.sh with env (the stubs first on PATH and a
// cache of the test's own).
func kafkaSh(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runScript(t, env, "kafka.sh", args...)
}

// lastCall is the last line of a stub's log that starts with prefix, ""
// when there is none.
func lastCall(path, prefix string) string {
	log, _ := os.ReadFile(path)
	last := ""
	for _, l := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(l, prefix) {
			last = l
		}
	}
	return last
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// CONTRIBUTING.md (Fetching and caching): the jars are fetched once a
// version and cached; a cache without the stamp of a complete fetch, or
// with another pom's, is fetched again; a failed fetch leaves nothing.
func TestKafkaFetchCaches(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin, calls := stubMaven(t)
	cache := t.TempDir()
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_KAFKA_CACHE=" + cache}
	libs := filepath.Join(cache, "4.4.0", "libs")
	stamp := filepath.Join(libs, ".fraudwatch-stamp")
	jar := filepath.Join(libs, "kafka_2.13-4.4.0.jar")
	runFetchSteps(t, fetchCache{
		script: "kafka.sh", args: []string{"fetch", "4.4.0"}, env: env,
		fetches: func(t *testing.T) int { return countLines(t, calls) },
		dir:     libs,
		// Complete, and without the jars of another pom.
		complete: func() bool { return exists(jar) && exists(stamp) && !exists(filepath.Join(libs, "stale.jar")) },
		leftover: filepath.Join(cache, "4.4.0", "libs.tmp.*"),
	}, []fetchStep{
		{name: "the first fetch", fetches: 1, stderr: "fetching Kafka 4.4.0", cached: true},
		{name: "the cache", fetches: 1, cached: true},
		{name: "an interrupted copy is fetched again", before: func(t *testing.T) { remove(t, stamp) }, fetches: 2, cached: true},
		{name: "another pom's cache is fetched again", before: func(t *testing.T) {
			write(t, stamp, "0000 4.4.0\n")
			write(t, filepath.Join(libs, "stale.jar"), "")
		}, fetches: 3, cached: true},
		{name: "Maven fails", before: func(t *testing.T) { removeAll(t, libs) }, env: []string{"STUB_MVN=fail"},
			code: 1, fetches: 4, stderr: "Could not resolve dependencies"},
		{name: "Maven leaves no Kafka jar", env: []string{"STUB_MVN=nojar"}, code: 1, fetches: 5, stderr: "kafka_2.13-4.4.0.jar is missing"},
	})
}

// Versions are checked before anything is fetched, and the broker's Java
// before it starts.
func TestKafkaRefuses(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin, calls := stubMaven(t)
	cache := t.TempDir()
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_KAFKA_CACHE=" + cache,
		"FRAUDWATCH_KAFKA_JAVA=" + filepath.Join(bin, "java")}
	tests := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stderr string
	}{
		{"not a version", nil, []string{"fetch", "4.4"}, 1, "not a Kafka release version: '4.4'"},
		{"an old major", nil, []string{"fetch", "2.8.2"}, 1, "only 3.x and 4.x are supported"},
		{"Java 11", []string{"STUB_JAVA_VERSION=11.0.22"}, []string{"start", "4.4.0", t.TempDir()}, 1, "is Java 11.0.22; the Kafka broker needs Java 17 or newer"},
		{"Java 8", []string{"STUB_JAVA_VERSION=1.8.0_402"}, []string{"start", "4.4.0", t.TempDir()}, 1, "is Java 1.8.0_402; the Kafka broker needs Java 17"},
		{"no arguments", nil, nil, 2, "scripts/kafka.sh fetch VERSION"},
		{"a missing argument", nil, []string{"start", "4.4.0"}, 2, "usage:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := countLines(t, calls)
			_, stderr, code := kafkaSh(t, append(slices.Clone(env), tt.env...), tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, want %d, with %q; stderr:\n%s", code, tt.code, tt.stderr, stderr)
			}
			if tt.args != nil && tt.args[0] == "fetch" && countLines(t, calls) != before {
				t.Error("Maven ran for a version refused")
			}
		})
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func removeAll(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// CONTRIBUTING.md: the broker kafka.sh starts is one KRaft node on
// loopback, tuned for tests: replication factor 1, no topic auto-creation
// (fraudwatch must never depend on it), no initial rebalance delay, a
// 512 MiB heap. A java that exits at once shows the configuration it was
// handed; stop, with nothing running, does nothing.
func TestKafkaStartConfiguresATestBroker(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin, calls := stubMaven(t)
	java := filepath.Join(bin, "java")
	stubJava(t, java, "java")
	state := t.TempDir()
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_KAFKA_CACHE=" + t.TempDir(),
		"FRAUDWATCH_KAFKA_JAVA=" + java}
	_, stderr, code := kafkaSh(t, env, "start", "4.4.0", state)
	if code != 1 || !strings.Contains(stderr, "exited during startup") {
		t.Fatalf("start with a java that exits: code %d, stderr:\n%s", code, stderr)
	}
	props, err := os.ReadFile(filepath.Join(state, "server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"process.roles=broker,controller", "default.replication.factor=1",
		"offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
		"share.coordinator.state.topic.replication.factor=1", "group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false", "listeners=PLAINTEXT://127.0.0.1:"} {
		if !strings.Contains(string(props), "\n"+want) {
			t.Errorf("server.properties lacks %s:\n%s", want, props)
		}
	}
	if broker := lastCall(calls, "java -Xmx512m"); !strings.Contains(broker, "kafka.Kafka "+state) {
		t.Errorf("the broker ran as %q, want a 512 MiB heap", broker)
	}
	if _, stderr, code := kafkaSh(t, env, "stop", state); code != 0 {
		t.Errorf("stop with nothing running: exit %d\n%s", code, stderr)
	}
}

// Without FRAUDWATCH_KAFKA_JAVA the broker runs on $JAVA_HOME's java
// before one on PATH; without FRAUDWATCH_KAFKA_CACHE the jars are cached
// under $XDG_CACHE_HOME (CONTRIBUTING.md).
func TestKafkaFindsJavaHomeAndTheUsersCache(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin, calls := stubMaven(t)
	javaHome := t.TempDir()
	stubJava(t, filepath.Join(bin, "java"), "path")
	stubJava(t, filepath.Join(javaHome, "bin", "java"), "java-home")
	cache := t.TempDir()
	// Go's build cache follows XDG_CACHE_HOME too: kafka.sh builds its
	// readiness probe, which should not start from nothing.
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "JAVA_HOME=" + javaHome, "XDG_CACHE_HOME=" + cache,
		"GOCACHE=" + strings.TrimSpace(string(gocache))}
	if _, stderr, code := kafkaSh(t, env, "start", "4.4.0", t.TempDir()); code != 1 || !strings.Contains(stderr, "exited during startup") {
		t.Fatalf("start: code %d, stderr:\n%s", code, stderr)
	}
	if lastCall(calls, "java-home") == "" || lastCall(calls, "path ") != "" {
		t.Errorf("java ran from PATH, or not from JAVA_HOME")
	}
	if _, err := os.Stat(filepath.Join(cache, "fraudwatch", "kafka", "4.4.0", "libs", "kafka_2.13-4.4.0.jar")); err != nil {
		t.Errorf("the jars are not in $XDG_CACHE_HOME: %v", err)
	}
}

// stubJava writes at path a Java 17 that logs each call as name and its
// arguments, and exits at once: a broker started with it exits during
// startup.
func stubJava(t *testing.T, path, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`#!/usr/bin/env bash
echo "`+name+` $*" >>"$STUB_CALLS"
echo "openjdk version \"17.0.2\" 2024-01-16" >&2
`), 0o755); err != nil {
		t.Fatal(err)
	}
}

// stop ends the broker its state directory names: with SIGTERM, then, if
// it is still running after FRAUDWATCH_KAFKA_STOP_TIMEOUT seconds, with
// SIGKILL; a pid file naming some other process stops nothing. Each way
// the pid and address files go. The brokers here are shells whose command
// lines look like kafka.sh's broker.
func TestKafkaStopsItsBroker(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, tc := range []struct {
		name    string
		script  string
		ours    bool
		signal  syscall.Signal // what ended it; 0: still running
		wantLog string
	}{
		{"a broker that stops on SIGTERM", "while :; do sleep 0.05; done", true, syscall.SIGTERM, ""},
		{"one that ignores it is killed", `trap "" TERM; while :; do sleep 0.05; done`, true, syscall.SIGKILL,
			"still running 1s after SIGTERM; killing it"},
		{"another process is left alone", "while :; do sleep 0.05; done", false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			props := filepath.Join(state, "server.properties")
			if !tc.ours {
				props = filepath.Join(t.TempDir(), "server.properties") // another broker's
			}
			broker := exec.Command("bash", "-c", tc.script, "kafka.Kafka", props)
			if err := broker.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() {
				_ = broker.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				_ = broker.Process.Kill()
				<-exited
			})
			write(t, filepath.Join(state, "kafka.pid"), fmt.Sprint(broker.Process.Pid))
			write(t, filepath.Join(state, "addr"), "127.0.0.1:9")
			_, stderr, code := kafkaSh(t, []string{"FRAUDWATCH_KAFKA_STOP_TIMEOUT=1"}, "stop", state)
			if code != 0 {
				t.Fatalf("stop: exit %d\n%s", code, stderr)
			}
			if tc.wantLog != "" && !strings.Contains(stderr, tc.wantLog) {
				t.Errorf("stop said %q, want %q", stderr, tc.wantLog)
			}
			for _, f := range []string{"kafka.pid", "addr"} {
				if _, err := os.Stat(filepath.Join(state, f)); !os.IsNotExist(err) {
					t.Errorf("%s is still there: %v", f, err)
				}
			}
			// The positive signal a negative check waits for: SIGPROF, sent
			// now, ends a broker that stop left running. A SIGTERM stop sent
			// would be pending already, and a lower-numbered pending signal
			// is delivered first.
			want := tc.signal
			if want == 0 {
				want = syscall.SIGPROF
			}
			_ = broker.Process.Signal(syscall.SIGPROF)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				t.Fatal("the broker is still running 10s after stop returned and SIGPROF")
			}
			if got := broker.ProcessState.Sys().(syscall.WaitStatus).Signal(); got != want {
				t.Errorf("the broker ended by %v, want %v", got, want)
			}
		})
	}
}

// Without Maven or Java, kafka.sh installs them from Debian's packages,
// running apt-get update once (CONTRIBUTING.md: a new machine). Here
// on a PATH without them, and an apt-get that logs its calls and
// "installs" stubs.
func TestKafkaInstallsMavenAndJava(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin, calls := stubMaven(t)
	stash := t.TempDir()
	stubJava(t, filepath.Join(stash, "java"), "java")
	if err := os.Rename(filepath.Join(bin, "mvn"), filepath.Join(stash, "mvn")); err != nil {
		t.Fatal(err)
	}
	remove(t, filepath.Join(bin, "java"))
	stubApt(t, bin, stash, map[string][]string{"maven": {"mvn"}, "openjdk-17-jre-headless": {"java"}})
	env := []string{"PATH=" + bin + ":" + pathWithout(t, "mvn", "java"), "STUB_CALLS=" + calls,
		"FRAUDWATCH_KAFKA_CACHE=" + t.TempDir(), "JAVA_HOME="}
	// The stub java exits at once: the start fails after the installs.
	if _, stderr, code := kafkaSh(t, env, "start", "4.4.0", t.TempDir()); code != 1 || !strings.Contains(stderr, "exited during startup") {
		t.Fatalf("start: code %d, stderr:\n%s", code, stderr)
	}
	log, _ := os.ReadFile(calls)
	if n := strings.Count(string(log), "apt-get update -qq\n"); n != 1 {
		t.Errorf("apt-get update ran %d times, want once:\n%s", n, log)
	}
	for _, want := range []string{"apt-get install -y -qq maven\n", "apt-get install -y -qq openjdk-17-jre-headless\n", "mvn\n"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("no %q in the calls:\n%s", strings.TrimSpace(want), log)
		}
	}
	if lastCall(calls, "java ") == "" {
		t.Errorf("the installed java never ran:\n%s", log)
	}
}

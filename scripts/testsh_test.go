package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// stubTools writes a go that logs each call with the test servers it was
// given (and fails `go test` when STUB_GO_TEST_EXIT says), a redis-server
// that idles until killed, a redis-cli that answers PONG, and the browser
// and promtool test.sh looks for; it returns their directory and go's log.
func stubTools(t *testing.T) (bin, calls string) {
	t.Helper()
	bin = t.TempDir()
	calls = filepath.Join(t.TempDir(), "calls")
	stubs := map[string]string{
		"go": `#!/usr/bin/env bash
echo "go $* | brokers=${FRAUDWATCH_TEST_KAFKA_BROKERS-unset} redis=${FRAUDWATCH_TEST_REDIS_ADDR-unset} bench_brokers=${FRAUDWATCH_BENCH_KAFKA_BROKERS-unset} chromium=${FRAUDWATCH_TEST_CHROMIUM##*/} promtool=${FRAUDWATCH_TEST_PROMTOOL##*/}" >>"$STUB_CALLS"
[ "$1" = test ] && exit "${STUB_GO_TEST_EXIT:-0}"
exit 0
`,
		"redis-server": `#!/usr/bin/env bash
[ "${1:-}" = --version ] && { echo "Redis server v=7.0.15 sha=00000000:0"; exit 0; }
echo "redis-server pid=$$" >>"$STUB_CALLS"
# Not holding the script's output open: one left running must not hang
# the test that looks for it.
exec sleep 300 </dev/null >/dev/null 2>&1
`,
		"gofmt":     "#!/usr/bin/env bash\necho \"gofmt $1\" >>\"$STUB_CALLS\"\n",
		"redis-cli": "#!/usr/bin/env bash\necho PONG\n",
		"chromium":  "#!/usr/bin/env bash\n",
		"promtool":  "#!/usr/bin/env bash\n",
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin, calls
}

// CONTRIBUTING.md (Tests): test.sh starts the servers the tests need and hands
// them over; the quick run with kfake says loudly, before and after, that no
// real Kafka was tested; a broker that does not start fails the run, with
// no fallback; a failing test fails it.
func TestTestScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	const banner = "NOT a real Apache Kafka"
	tests := []struct {
		name   string
		env    []string
		code   int
		goTest string // go test's line in go's log, "" when it must not run
		out    []string
		banner int // times the banner is printed
	}{
		{name: "the quick run", env: []string{"FRAUDWATCH_TEST_KAFKA=fake", "FRAUDWATCH_TEST_KAFKA_BROKERS=10.0.0.1:9092"},
			goTest: "go test -race -count=1 ./x | brokers=unset redis=127.0.0.1:", out: []string{"Redis 7.0.15 on 127.0.0.1:"}, banner: 2},
		{name: "a skip pattern", env: []string{"FRAUDWATCH_TEST_KAFKA=fake", "FRAUDWATCH_TEST_SKIP=^(TestA|TestB)$"},
			goTest: "go test -race -count=1 -skip ^(TestA|TestB)$ ./x |", banner: 2},
		{name: "a failing test fails the run", env: []string{"FRAUDWATCH_TEST_KAFKA=fake", "STUB_GO_TEST_EXIT=1"},
			code: 1, goTest: "go test -race -count=1 ./x", banner: 2},
		{name: "an unknown mode", env: []string{"FRAUDWATCH_TEST_KAFKA=fast"}, code: 2,
			out: []string{"FRAUDWATCH_TEST_KAFKA is 'fast'; it must be 'real' (the default) or 'fake'"}},
		{name: "a broker that does not start", env: []string{"FRAUDWATCH_KAFKA_VERSION=2.8.2", "FRAUDWATCH_TEST_KAFKA_BROKERS=10.0.0.1:9092"}, code: 1,
			out: []string{"ignoring FRAUDWATCH_TEST_KAFKA_BROKERS=10.0.0.1:9092", "Kafka 2.8.2 did not start, so the run fails"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, calls := stubTools(t)
			env := append([]string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls,
				"FRAUDWATCH_KAFKA_CACHE=" + t.TempDir()}, tt.env...)
			stdout, stderr, code := runScript(t, env, "test.sh", "./x")
			out := stdout + stderr
			if code != tt.code {
				t.Errorf("exit %d, want %d; output:\n%s", code, tt.code, out)
			}
			goTest := lastCall(calls, "go test")
			switch {
			case tt.goTest == "" && goTest != "":
				t.Errorf("go test ran: %s", goTest)
			case !strings.HasPrefix(goTest, tt.goTest):
				t.Errorf("go test ran as %q, want %q…", goTest, tt.goTest)
			case tt.goTest != "" && !strings.HasSuffix(goTest, "chromium=chromium promtool=promtool"):
				t.Errorf("go test was not given the browser and promtool: %s", goTest)
			}
			for _, want := range tt.out {
				if !strings.Contains(string(out), want) {
					t.Errorf("output does not say %q:\n%s", want, out)
				}
			}
			if n := strings.Count(string(out), banner); n != tt.banner {
				t.Errorf("the no-real-Kafka banner printed %d times, want %d:\n%s", n, tt.banner, out)
			}
		})
	}
}

// bench.sh starts a broker unless the bench is told -kafka fake (in any
// of the spellings Go's flag package takes, the last one winning): then it
// needs none, nor Java.
func TestBenchScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		bench string // go run's line in go's log, "" when it must not run
	}{
		{"-kafka fake", []string{"-kafka", "fake", "-events", "10"}, 0, "go run ./bench -kafka fake -events 10 | brokers=unset redis=unset bench_brokers=unset"},
		{"--kafka=fake", []string{"--kafka=fake"}, 0, "go run ./bench --kafka=fake | brokers=unset redis=unset bench_brokers=unset"},
		// A broker is started, and this version is refused: no bench.
		{"the last -kafka wins", []string{"-kafka=fake", "-kafka", "real"}, 1, ""},
		{"no -kafka", nil, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, calls := stubTools(t)
			env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls,
				"FRAUDWATCH_KAFKA_CACHE=" + t.TempDir(), "FRAUDWATCH_KAFKA_VERSION=2.8.2"}
			stdout, stderr, code := runScript(t, env, "bench.sh", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; output:\n%s%s", code, tt.code, stdout, stderr)
			}
			run := lastCall(calls, "go run")
			if !strings.HasPrefix(run, tt.bench) || (tt.bench == "") != (run == "") {
				t.Errorf("go ran as %q, want %q…", run, tt.bench)
			}
		})
	}
}

// hermetic is this process's environment without the project's own
// variables, which a suite run by test.sh has set: a script under test
// sees only what its case gives it.
func hermetic() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FRAUDWATCH_") {
			env = append(env, kv)
		}
	}
	return env
}

// With no package, test.sh runs the whole suite as README's test command:
// gofmt, go vet and go test -race over every package; and, pass or fail,
// it stops the Redis it started.
func TestTestScriptWholeSuite(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, exit := range []string{"0", "1"} {
		t.Run("go test exits "+exit, func(t *testing.T) {
			bin, calls := stubTools(t)
			env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_KAFKA_CACHE=" + t.TempDir(),
				"FRAUDWATCH_TEST_KAFKA=fake", "STUB_GO_TEST_EXIT=" + exit}
			stdout, stderr, code := runScript(t, env, "test.sh")
			if want, _ := strconv.Atoi(exit); code != min(want, 1) {
				t.Errorf("exit %d, want %s\n%s%s", code, exit, stdout, stderr)
			}
			for prefix, want := range map[string]string{"gofmt": "gofmt -l", "go vet": "go vet ./... |", "go test": "go test -race -count=1 ./... |"} {
				if got := lastCall(calls, prefix); !strings.HasPrefix(got, want) {
					t.Errorf("%s ran as %q, want %q…", prefix, got, want)
				}
			}
			pid, err := strconv.Atoi(strings.TrimPrefix(lastCall(calls, "redis-server pid="), "redis-server pid="))
			if err != nil {
				t.Fatalf("the stub Redis's pid: %v", err)
			}
			if err := syscall.Kill(pid, 0); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("the Redis test.sh started (pid %d) still runs after it exited", pid)
			}
		})
	}
}

// test.sh installs what the tests need and the machine lacks (README, Two
// commands: it runs on a new machine): redis-server and redis-cli,
// Chromium and promtool, from Debian's packages. Here on a PATH without
// them, and an apt-get that logs its calls and "installs" stubs.
func TestTestScriptInstallsWhatIsMissing(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin, calls := stubTools(t)
	missing := []string{"redis-server", "redis-cli", "chromium", "promtool"}
	stash := t.TempDir()
	for _, name := range missing {
		if err := os.Rename(filepath.Join(bin, name), filepath.Join(stash, name)); err != nil {
			t.Fatal(err)
		}
	}
	stubApt(t, bin, stash, map[string][]string{"redis-server": {"redis-server"}, "redis-tools": {"redis-cli"},
		"chromium": {"chromium"}, "prometheus": {"promtool"}})
	env := []string{"PATH=" + bin + ":" + pathWithout(t, missing...), "STUB_CALLS=" + calls,
		"FRAUDWATCH_KAFKA_CACHE=" + t.TempDir(), "FRAUDWATCH_TEST_KAFKA=fake"}
	stdout, stderr, code := runScript(t, env, "test.sh", "./x")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	log, _ := os.ReadFile(calls)
	for _, want := range []string{
		"apt-get update -qq",
		"apt-get install -y -qq redis-server redis-tools",
		"apt-get install -y -qq --no-install-recommends chromium",
		"apt-get install -y -qq --no-install-recommends prometheus",
	} {
		if !strings.Contains(string(log), want+"\n") {
			t.Errorf("no %q in the calls:\n%s", want, log)
		}
	}
	if goTest := lastCall(calls, "go test"); !strings.HasSuffix(goTest, "chromium=chromium promtool=promtool") {
		t.Errorf("go test ran as %q, without the installed browser and promtool", goTest)
	}
}

// stubApt writes into bin an apt-get that logs each call to $STUB_CALLS
// and, for install, copies each package's programs from stash into bin, as
// if installed; and a sudo that runs its command (for a test run by a user
// other than root).
func stubApt(t *testing.T, bin, stash string, programs map[string][]string) {
	t.Helper()
	var cases strings.Builder
	for pkg, progs := range programs {
		fmt.Fprintf(&cases, "    %s)", pkg)
		for _, p := range progs {
			fmt.Fprintf(&cases, " cp %q %q;", filepath.Join(stash, p), bin+"/")
		}
		cases.WriteString(" ;;\n")
	}
	aptGet := `#!/usr/bin/env bash
echo "apt-get $*" >>"$STUB_CALLS"
[ "$1" = install ] || exit 0
for arg in "$@"; do
  case "$arg" in
` + cases.String() + `  esac
done
`
	for name, body := range map[string]string{"apt-get": aptGet, "sudo": "#!/usr/bin/env bash\nexec \"$@\"\n"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// pathWithout is a PATH that finds what this process's PATH finds, but
// for the names given: a directory of links to everything else.
func pathWithout(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if slices.Contains(names, e.Name()) {
				continue
			}
			// The first on PATH wins, as it would.
			_ = os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	return dir
}

// stubValkey writes, outside PATH, a valkey-server that logs its start and
// idles until killed, and a valkey-cli that answers PONG once a server
// has started on the port asked, logs cluster creation and answers as a
// healthy cluster of six would; it returns their paths.
func stubValkey(t *testing.T) (server, cli string) {
	t.Helper()
	dir := t.TempDir()
	server, cli = filepath.Join(dir, "valkey-server"), filepath.Join(dir, "valkey-cli")
	write(t, server, `#!/usr/bin/env bash
[ "${1:-}" = --version ] && { echo "Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64"; exit 0; }
echo "valkey-server pid=$$ $*" >>"$STUB_CALLS"
exec sleep 300 </dev/null >/dev/null 2>&1
`)
	write(t, cli, `#!/usr/bin/env bash
case "$*" in
  --cluster\ create*) echo "valkey-cli $*" >>"$STUB_CALLS" ;;
  *cluster\ info) echo cluster_state:ok ;;
  *cluster\ nodes) for i in 1 2 3 4 5 6; do echo "id$i 127.0.0.1:1@2 master - 0 0 1 connected"; done ;;
  *ping)
    # PONG once the server on that port has started (logged its start).
    grep -q -- "^valkey-server pid=.* --port $2 " "$STUB_CALLS" 2>/dev/null && echo PONG ;;
esac
`)
	for _, p := range []string{server, cli} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return server, cli
}

// CONTRIBUTING.md: FRAUDWATCH_TEST_REDIS_SERVER and
// FRAUDWATCH_TEST_REDIS_CLI run other programs than redis-server and
// redis-cli, for the single server and the cluster alike, and test.sh
// says which server it started; a path that is no program fails the run.
func TestTestScriptRunsTheServerAsked(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	server, cli := stubValkey(t)
	tests := []struct {
		name    string
		env     []string
		code    int
		out     string
		started int // valkey-servers started
		create  bool
	}{
		{name: "one server", env: []string{"FRAUDWATCH_TEST_REDIS_SERVER=" + server, "FRAUDWATCH_TEST_REDIS_CLI=" + cli},
			out: "Valkey 8.1.8 on 127.0.0.1:", started: 1},
		{name: "a cluster", env: []string{"FRAUDWATCH_TEST_REDIS_SERVER=" + server, "FRAUDWATCH_TEST_REDIS_CLI=" + cli,
			"FRAUDWATCH_TEST_REDIS=cluster"}, out: "Valkey 8.1.8 cluster of 3 masters and 3 replicas on 127.0.0.1:", started: 7, create: true},
		{name: "no such program", env: []string{"FRAUDWATCH_TEST_REDIS_SERVER=" + server + ".missing"}, code: 1,
			out: server + ".missing is not a program"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, calls := stubTools(t)
			stubApt(t, bin, t.TempDir(), nil) // nothing is to be installed
			env := append([]string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls,
				"FRAUDWATCH_KAFKA_CACHE=" + t.TempDir(), "FRAUDWATCH_TEST_KAFKA=fake"}, tt.env...)
			stdout, stderr, code := runScript(t, env, "test.sh", "./x")
			out := stdout + stderr
			if code != tt.code || !strings.Contains(out, tt.out) {
				t.Errorf("exit %d, want %d, saying %q:\n%s", code, tt.code, tt.out, out)
			}
			log, _ := os.ReadFile(calls)
			if n := strings.Count(string(log), "valkey-server pid="); n != tt.started || strings.Contains(string(log), "redis-server pid=") {
				t.Errorf("%d valkey-servers started, want %d, and no redis-server:\n%s", n, tt.started, log)
			}
			if got := lastCall(calls, "valkey-cli --cluster create 127.0.0.1:") != ""; got != tt.create {
				t.Errorf("valkey-cli created a cluster: %v, want %v:\n%s", got, tt.create, log)
			}
		})
	}
}

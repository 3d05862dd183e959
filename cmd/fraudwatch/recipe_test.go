package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// recipeMarker precedes README's "Locally, without Docker" block.
const recipeMarker = "<!-- recipe: local."

// readmeRecipe returns the commands of the shell block after the marker.
func readmeRecipe(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	state := 0 // 0: before the marker, 1: before the block, 2: in it
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.HasPrefix(line, recipeMarker):
			state = 1
		case state == 1 && line == "```sh":
			state = 2
		case state == 2 && line == "```":
			return lines
		case state == 2:
			lines = append(lines, line)
		}
	}
	t.Fatalf("README has no shell block after %q", recipeMarker)
	return nil
}

var (
	recipeBroker = regexp.MustCompile(`^export FRAUDWATCH_KAFKA_BROKERS=\$\(scripts/kafka\.sh start (\S+) (\S+)\)$`)
	recipeRedis  = regexp.MustCompile(`^redis-server( .*)?$`)
)

// recipeScript is the recipe as the test runs it, in dir: the binary built
// there, and the recipe's own redis-server on a free port, its pid in
// dir/redis.pid. With ownBroker the broker lines run as written, the state
// directory moved to dir/kafka; without it (kfake, or the suite runs
// another Kafka version) the suite's brokers stand in and the command README
// gives is checked, not run.
func recipeScript(t *testing.T, lines []string, dir string, brokers []string, ownBroker bool, redisPort int) string {
	t.Helper()
	const build = "go build -o fraudwatch ./cmd/fraudwatch"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	version := recipeVersion(t)
	var out []string
	var stateDir string
	seen := map[string]bool{}
	for _, line := range lines {
		switch m := recipeBroker.FindStringSubmatch(line); {
		case line == build:
			seen["build"] = true
			line = "(cd " + strconv.Quote(root) + " && go build -o " + strconv.Quote(filepath.Join(dir, "fraudwatch")) + " ./cmd/fraudwatch)"
		case m != nil:
			seen["broker"] = true
			if m[1] != version {
				t.Errorf("the recipe starts Kafka %s, scripts/kafka.sh's default is %s", m[1], version)
			}
			stateDir = m[2]
			line = "export FRAUDWATCH_KAFKA_BROKERS=" + strings.Join(brokers, ",")
			if ownBroker {
				line = strings.Replace(m[0], " "+stateDir+")", " "+recipeKafkaDir(dir)+")", 1)
			}
		case stateDir != "" && line == "scripts/kafka.sh stop "+stateDir:
			seen["stop"] = true
			line = ": " + line
			if ownBroker {
				line = "scripts/kafka.sh stop " + recipeKafkaDir(dir)
			}
		case recipeRedis.MatchString(line):
			seen["redis"] = true
			// Later options win: the port and files are the test's.
			line += " --port " + strconv.Itoa(redisPort) + " --dir " + dir + " --pidfile " + dir + "/redis.pid --logfile " + dir + "/redis.log"
		}
		out = append(out, line)
	}
	for _, what := range []string{"build", "broker", "stop", "redis"} {
		if !seen[what] {
			t.Fatalf("README's recipe lacks its %s line (%q, scripts/kafka.sh start VERSION DIR, scripts/kafka.sh stop DIR, redis-server):\n%s",
				what, build, strings.Join(lines, "\n"))
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// recipeVersion is the Kafka version scripts/test.sh starts by default.
func recipeVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../scripts/kafka.sh", "default-version").Output()
	if err != nil {
		t.Fatalf("scripts/kafka.sh default-version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// recipeKafkaDir is the state directory of the recipe's own broker.
func recipeKafkaDir(dir string) string { return filepath.Join(dir, "kafka") }

func freePort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

// README's "Locally, without Docker" recipe, run as written but for the
// names the test makes its own (and, under kfake, the broker): it builds,
// starts a broker,
// creates the topics, runs, produces deploy/local-orders.jsonl, waits for
// the alert in run's log, and stops run with SIGTERM.
func TestREADMELocalRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fraudwatch and runs it against a broker")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH")
	}
	k := kafkatest.New(t)
	dir := t.TempDir()
	for _, name := range []string{"deploy", "scripts"} {
		abs, err := filepath.Abs(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	// Under scripts/test.sh (a real broker, of the version the recipe
	// starts, whose jars are cached by then) the recipe starts and stops
	// its own broker, as a user's machine would.
	v := os.Getenv("FRAUDWATCH_KAFKA_VERSION")
	own := k.Real && (v == "" || v == recipeVersion(t))
	script := recipeScript(t, readmeRecipe(t), dir, k.Brokers, own, port)
	t.Cleanup(func() { stopRecipeRedis(t, dir) })
	if own {
		t.Cleanup(func() {
			// The recipe's last line stops it; this is for a recipe that failed before.
			if out, err := exec.Command("../../scripts/kafka.sh", "stop", recipeKafkaDir(dir)).CombinedOutput(); err != nil {
				t.Errorf("scripts/kafka.sh stop: %v\n%s", err, out)
			}
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	// The topics, group and Redis are the test's own.
	cmd.Env = append(os.Environ(),
		"FRAUDWATCH_KAFKA_ORDERS_TOPIC="+kafkatest.Group(t, "orders"),
		"FRAUDWATCH_KAFKA_REFUNDS_TOPIC="+kafkatest.Group(t, "refunds"),
		"FRAUDWATCH_KAFKA_DEAD_LETTER_TOPIC="+kafkatest.Group(t, "dlq"),
		"FRAUDWATCH_KAFKA_ALERTS_TOPIC="+kafkatest.Group(t, "alerts"),
		"FRAUDWATCH_KAFKA_GROUP_ID="+kafkatest.Group(t, "fw"),
		"FRAUDWATCH_REDIS_ADDRS=127.0.0.1:"+strconv.Itoa(port),
		"FRAUDWATCH_REDIS_KEY_PREFIX="+redistest.Prefix(t),
		"FRAUDWATCH_METRICS_LISTEN="+freeAddr(t))
	// Its own process group, so that a run the script leaves behind (when
	// it fails before its kill) is killed with it; that run also holds the
	// output pipe open, which WaitDelay stops waiting for.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var output testkit.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	out := output.String()
	logs, _ := os.ReadFile(filepath.Join(dir, "fraudwatch.log"))
	if err != nil {
		t.Fatalf("the recipe failed: %v\n%s\nrun's log:\n%s", err, out, logs)
	}
	wants := []string{": created, 6 partitions, replication factor 1", "produced 4 orders to ",
		`msg="fraud alert: threshold crossed"`, "rule=orders-per-customer-1m"}
	if own {
		wants = append(wants, "kafka.sh: Kafka "+recipeVersion(t)+" ready on ")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("the recipe's output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"shutting down", "fraudwatch stopped"} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("run's log lacks %q after kill:\n%s", want, logs)
		}
	}
}

// stopRecipeRedis stops the redis-server the recipe started, by its pid.
func stopRecipeRedis(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "redis.pid"))
	if err != nil {
		return // it never started
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Errorf("redis.pid holds %q", b)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	// Wait until it is gone, so that TempDir can be removed.
	for range 100 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

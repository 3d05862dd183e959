package main

import (
	"bufio"
	"context"
	"errors"
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

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// The markers before README's "Locally, without Docker" block and before
// the lines that move its ports.
const (
	recipeMarker = "<!-- recipe: local."
	portsMarker  = "<!-- recipe: ports."
)

// readmeBlock returns the commands of the shell block after marker.
func readmeBlock(t *testing.T, marker string) []string {
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
		case state == 0 && strings.HasPrefix(line, marker):
			state = 1
		case state == 1 && line == "```sh":
			state = 2
		case state == 2 && line == "```":
			return lines
		case state == 2:
			lines = append(lines, line)
		}
	}
	t.Fatalf("README has no shell block after %q", marker)
	return nil
}

var (
	recipeBroker   = regexp.MustCompile(`^export FRAUDWATCH_KAFKA_BROKERS=\$\(scripts/kafka\.sh start (\S+) (\S+)\)$`)
	recipeRedis    = regexp.MustCompile(`^redis-server( .*)?$`)
	recipePort     = regexp.MustCompile(` --port (\d+)`)
	recipeLoopback = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)
)

// recipeWorld is what one run of the recipe gets from the test: its
// directory, the brokers, and the ports README's ports block is moved to.
type recipeWorld struct {
	dir       string
	brokers   []string
	ownBroker bool // the recipe starts and stops its own broker
	redisPort int
	metrics   int // metrics.listen's port
}

// recipeScript is the recipe as the test runs it, in w.dir: the binary
// built there, and its redis-server line replaced by README's ports block
// (its ports the test's, Redis's files in w.dir, its pid in w.dir/redis.pid),
// so that Redis and fraudwatch move as README says a user moves them. With
// ownBroker the broker lines run as written, the state directory moved to
// w.dir/kafka; without it (kfake, or the suite runs another Kafka version)
// the suite's brokers stand in and the command README gives is checked,
// not run.
func recipeScript(t *testing.T, w recipeWorld) string {
	t.Helper()
	const build = "go build -o fraudwatch ./cmd/fraudwatch"
	lines := readmeBlock(t, recipeMarker)
	version := recipeVersion(t)
	var out []string
	var stateDir string
	seen := map[string]bool{}
	for _, line := range lines {
		switch m := recipeBroker.FindStringSubmatch(line); {
		case line == build:
			seen["build"] = true
			line = recipeBuild(t, w.dir)
		case m != nil:
			seen["broker"] = true
			if m[1] != version {
				t.Errorf("the recipe starts Kafka %s, scripts/kafka.sh's default is %s", m[1], version)
			}
			stateDir = m[2]
			line = "export FRAUDWATCH_KAFKA_BROKERS=" + strings.Join(w.brokers, ",")
			if w.ownBroker {
				line = strings.Replace(m[0], " "+stateDir+")", " "+recipeKafkaDir(w.dir)+")", 1)
			}
		case stateDir != "" && line == "scripts/kafka.sh stop "+stateDir:
			seen["stop"] = true
			line = ": " + line
			if w.ownBroker {
				line = "scripts/kafka.sh stop " + recipeKafkaDir(w.dir)
			}
		case recipeRedis.MatchString(line):
			seen["redis"] = true
			line = recipePorts(t, line, w)
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

// recipeBuild is the recipe's build line as the test runs it: from the
// repository's root, the binary into dir.
func recipeBuild(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return "(cd " + strconv.Quote(root) + " && go build -o " + strconv.Quote(filepath.Join(dir, "fraudwatch")) + " ./cmd/fraudwatch)"
}

// recipePorts returns README's ports block, to run in place of the
// recipe's redis-server line, with its ports moved to w's. It checks that
// the recipe's Redis is on deploy/local.yaml's port, and that the ports
// block's redis-server line is the recipe's but for its port. Which
// variable is which is not the test's to say: the address on the Redis
// port becomes w.redisPort, any other w.metrics, so that a variable README
// misnames leaves a port unmoved, and the run fails on it.
func recipePorts(t *testing.T, recipeLine string, w recipeWorld) string {
	t.Helper()
	local := localConfig(t)
	m := recipePort.FindStringSubmatch(recipeLine)
	if m == nil || "127.0.0.1:"+m[1] != local.Redis.Addrs[0] {
		t.Fatalf("the recipe's %q does not start Redis on deploy/local.yaml's redis.addrs %v (its --port)", recipeLine, local.Redis.Addrs)
	}
	block := readmeBlock(t, portsMarker)
	var docRedis string
	for _, line := range block {
		if recipeRedis.MatchString(line) {
			pm := recipePort.FindStringSubmatch(line)
			if pm == nil || line != strings.Replace(recipeLine, m[0], pm[0], 1) {
				t.Fatalf("README's ports block starts Redis with %q, want the recipe's %q with another --port", line, recipeLine)
			}
			docRedis = pm[1]
		}
	}
	if docRedis == "" {
		t.Fatalf("README's ports block has no redis-server line:\n%s", strings.Join(block, "\n"))
	}
	var out []string
	for _, line := range block {
		if recipeRedis.MatchString(line) {
			// Later options win: the files are the test's.
			out = append(out, strings.Replace(line, " --port "+docRedis, " --port "+strconv.Itoa(w.redisPort), 1)+
				" --dir "+w.dir+" --pidfile "+w.dir+"/redis.pid --logfile "+w.dir+"/redis.log")
			continue
		}
		out = append(out, recipeLoopback.ReplaceAllStringFunc(line, func(addr string) string {
			if addr == "127.0.0.1:"+docRedis {
				return "127.0.0.1:" + strconv.Itoa(w.redisPort)
			}
			return "127.0.0.1:" + strconv.Itoa(w.metrics)
		}))
	}
	return strings.Join(out, "\n")
}

// localConfig is deploy/local.yaml as fraudwatch reads it.
func localConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load("../../deploy/local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Redis.Addrs) != 1 {
		t.Fatalf("deploy/local.yaml: redis.addrs is %v, want one address", cfg.Redis.Addrs)
	}
	return cfg
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
	return addrPort(t, freeAddr(t))
}

func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// holdPort makes sure addr is taken while the test runs: by the test when
// it is free, and otherwise by whatever holds it already (a Redis on 6379).
func holdPort(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return
	}
	if err != nil {
		t.Fatalf("taking %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = l.Close() })
}

// newRecipeWorld makes the recipe's directory (deploy/ and scripts/ linked
// into it) and picks its free ports. ownBroker asks for the recipe to start
// its own broker, which it does under scripts/test.sh (a real broker, of
// the version the recipe starts, whose jars are cached by then), as a
// user's machine would.
func newRecipeWorld(t *testing.T, ownBroker bool) recipeWorld {
	t.Helper()
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
	v := os.Getenv("FRAUDWATCH_KAFKA_VERSION")
	w := recipeWorld{dir: dir, brokers: k.Brokers, ownBroker: ownBroker && k.Real && (v == "" || v == recipeVersion(t)),
		redisPort: freePort(t), metrics: freePort(t)}
	t.Cleanup(func() { stopRecipeRedis(t, dir) })
	if w.ownBroker {
		t.Cleanup(func() {
			// The recipe's last line stops it; this is for a recipe that failed before.
			if out, err := exec.Command("../../scripts/kafka.sh", "stop", recipeKafkaDir(dir)).CombinedOutput(); err != nil {
				t.Errorf("scripts/kafka.sh stop: %v\n%s", err, out)
			}
		})
	}
	return w
}

// recipeResult is what a run of the recipe left.
type recipeResult struct {
	err    error
	output string // the script's stdout and stderr
	logs   string // fraudwatch.log, run's log
	ended  time.Time
}

// runRecipe runs script in w.dir under bash -e, for at most timeout.
func runRecipe(t *testing.T, w recipeWorld, script string, timeout time.Duration) recipeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = w.dir
	// The topics, group and key prefix are the test's own; the ports are
	// moved by the script, as README's ports block says.
	cmd.Env = append(os.Environ(),
		"FRAUDWATCH_KAFKA_ORDERS_TOPIC="+kafkatest.Group(t, "orders"),
		"FRAUDWATCH_KAFKA_REFUNDS_TOPIC="+kafkatest.Group(t, "refunds"),
		"FRAUDWATCH_KAFKA_DEAD_LETTER_TOPIC="+kafkatest.Group(t, "dlq"),
		"FRAUDWATCH_KAFKA_ALERTS_TOPIC="+kafkatest.Group(t, "alerts"),
		"FRAUDWATCH_KAFKA_GROUP_ID="+kafkatest.Group(t, "fw"),
		"FRAUDWATCH_REDIS_KEY_PREFIX="+redistest.Prefix(t))
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
	ended := time.Now()
	logs, _ := os.ReadFile(filepath.Join(w.dir, "fraudwatch.log"))
	return recipeResult{err: err, output: output.String(), logs: string(logs), ended: ended}
}

// README's "Locally, without Docker" recipe, run as written but for the
// names the test makes its own (and, under kfake, the broker): it builds,
// starts a broker, creates the topics, runs, produces
// deploy/local-orders.jsonl, waits for the alert in run's log, and stops
// run with SIGTERM. Redis's and the metrics' usual ports (6379, 9464) are
// taken meanwhile, and README's ports block moves both: its variables
// must be the ones that override redis.addrs and metrics.listen. The
// recipe's Redis must listen on loopback alone, in protected mode.
func TestREADMELocalRecipe(t *testing.T) {
	// Beside the other end-to-end tests, not before them: it waits on a
	// build, a broker's start and a run (28 s of CI's suite), they on
	// receivers kept down and processes killed.
	t.Parallel()
	w := newRecipeWorld(t, true)
	local := localConfig(t)
	holdPort(t, local.Redis.Addrs[0])
	holdPort(t, local.Metrics.Listen)
	r := runRecipe(t, w, recipeScript(t, w), 4*time.Minute)
	if r.err != nil {
		t.Fatalf("the recipe failed: %v\n%s\nrun's log:\n%s", r.err, r.output, r.logs)
	}
	wants := []string{": created, 6 partitions, replication factor 1", "produced 4 orders to ",
		`msg="fraud alert: threshold crossed"`, "rule=orders-per-customer-1m"}
	if w.ownBroker {
		wants = append(wants, "kafka.sh: Kafka "+recipeVersion(t)+" ready on ")
	}
	for _, want := range wants {
		if !strings.Contains(r.output, want) {
			t.Errorf("the recipe's output lacks %q:\n%s", want, r.output)
		}
	}
	for _, want := range []string{"shutting down", "fraudwatch stopped"} {
		if !strings.Contains(r.logs, want) {
			t.Errorf("run's log lacks %q after kill:\n%s", want, r.logs)
		}
	}
	checkRecipeRedisLoopback(t, w.redisPort)
}

// checkRecipeRedisLoopback checks that the recipe's Redis, still running,
// binds 127.0.0.1 alone in protected mode, and that no other address of
// this machine reaches it.
func checkRecipeRedisLoopback(t *testing.T, port int) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer rdb.Close()
	got, err := rdb.ConfigGet(context.Background(), "*").Result()
	if err != nil {
		t.Fatalf("CONFIG GET from the recipe's Redis: %v", err)
	}
	if got["bind"] != "127.0.0.1" || got["protected-mode"] != "yes" {
		t.Errorf("the recipe's Redis has bind %q and protected-mode %q, want 127.0.0.1 and yes", got["bind"], got["protected-mode"])
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ip, ok := a.(*net.IPNet)
		if !ok || ip.IP.IsLoopback() || ip.IP.IsLinkLocalUnicast() {
			continue
		}
		addr := net.JoinHostPort(ip.IP.String(), strconv.Itoa(port))
		if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			_ = c.Close()
			t.Errorf("the recipe's Redis answers on %s, not loopback alone", addr)
		}
	}
}

// The recipe stops waiting as soon as run has exited, and shows why: with
// metrics.listen's port taken, run exits at once, and the recipe fails
// within seconds of it (not after its wait's 60 s), its output ending with
// run's reason from fraudwatch.log.
func TestREADMELocalRecipeRunExits(t *testing.T) {
	w := newRecipeWorld(t, false)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	w.metrics = addrPort(t, taken.Addr().String())
	// The build first, so that the bound below is the recipe's, not the
	// compiler's: the recipe's own build then finds everything cached.
	if out, err := exec.Command("bash", "-c", recipeBuild(t, w.dir)).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runRecipe(t, w, recipeScript(t, w), 30*time.Second)
	if r.err == nil {
		t.Fatalf("the recipe succeeded with metrics.listen's port taken:\n%s", r.output)
	}
	reason := "listen on metrics.listen " + taken.Addr().String()
	if !strings.Contains(r.logs, reason) || !strings.Contains(r.logs, "address already in use") {
		t.Fatalf("run's log does not say it could not listen (%s…: address already in use): %v\n%s\nrun's log:\n%s", reason, r.err, r.output, r.logs)
	}
	if !strings.Contains(r.output, reason) || !strings.Contains(r.output, "address already in use") {
		t.Errorf("the recipe's output does not show why run exited (%s…: address already in use):\n%s", reason, r.output)
	}
	// run's last word is the log's last write.
	st, err := os.Stat(filepath.Join(w.dir, "fraudwatch.log"))
	if err != nil {
		t.Fatal(err)
	}
	if waited := r.ended.Sub(st.ModTime()); waited > 5*time.Second {
		t.Errorf("the recipe ended %v after run exited, want within 5s:\n%s", waited.Round(time.Millisecond), r.output)
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

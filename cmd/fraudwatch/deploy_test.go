package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/event"
)

// What this machine can check of deploy/ without Docker or Kubernetes: the
// files parse, the configurations they carry pass fraudwatch check where
// the containers would see them, and the image, compose file and manifests
// agree with the binary and with each other (docs/operations.md, Deploy).

const deployDir = "../../deploy"

// metricsPort is metrics.listen's port in every deploy file.
const metricsPort = "9464"

// checkConfig runs fraudwatch check on a configuration file, which must
// pass without a warning.
func checkConfig(t *testing.T, path string) {
	t.Helper()
	if out, err := command("check", "--config", path).CombinedOutput(); err != nil || bytes.Contains(out, []byte("warning: ")) {
		t.Errorf("fraudwatch check --config %s: %v\n%s", path, err, out)
	}
}

// checkMetricsListen checks that a container's configuration listens for
// metrics on every interface, on the port its image and manifests expose:
// the default, 127.0.0.1:9464, is unreachable from Prometheus and the
// probes outside the container.
func checkMetricsListen(t *testing.T, path string) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	host, port, err := net.SplitHostPort(cfg.Metrics.Listen)
	if err != nil || !slices.Contains([]string{"", "0.0.0.0", "::"}, host) || port != metricsPort {
		t.Errorf("%s: metrics.listen is %q, want \":%s\": Prometheus and the probes reach it from outside the container",
			path, cfg.Metrics.Listen, metricsPort)
	}
}

// The image: a build stage, then distroless static as a non-root user,
// version and commit stamped, the metrics port exposed, and an entrypoint
// and command the binary takes.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var froms, users, exposes, entry, cmd []string
	var ldflags, static bool
	goVersion := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "FROM":
			froms = append(froms, rest)
		case "USER":
			users = append(users, rest)
		case "ARG":
			if v, ok := strings.CutPrefix(rest, "GO_VERSION="); ok {
				goVersion = v
			}
		case "EXPOSE":
			exposes = append(exposes, rest)
		case "ENTRYPOINT":
			entry = jsonArgs(t, rest)
		case "CMD":
			cmd = jsonArgs(t, rest)
		}
		if strings.Contains(line, "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}") {
			ldflags = true
		}
		// distroless static has no C library: a binary that needs one
		// would not start.
		if strings.Contains(line, "CGO_ENABLED=0 go build -trimpath") {
			static = true
		}
	}
	switch {
	case len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:") || !strings.HasSuffix(froms[0], " AS build"):
		t.Errorf("stages %q: want a build stage and the image", froms)
	case froms[1] != "gcr.io/distroless/static-debian12:nonroot":
		t.Errorf("the image is FROM %s, want distroless static, non-root", froms[1])
	}
	// The image builds with the Go go.mod asks for (docs/operations.md: golang:1.26).
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if want == nil || len(froms) == 0 || goVersion != string(want[1]) || !strings.HasPrefix(froms[0], "golang:${GO_VERSION}") {
		t.Errorf("the build stage is %q with GO_VERSION %q, want golang:%s as go.mod says", froms[0], goVersion, want[1])
	}
	if !slices.Equal(users, []string{"65532:65532"}) {
		t.Errorf("USER %q, want 65532:65532 (distroless's nonroot)", users)
	}
	if !slices.Equal(exposes, []string{metricsPort}) {
		t.Errorf("EXPOSE %q, want %s", exposes, metricsPort)
	}
	// The configuration to start from, which the image's command expects
	// at /etc/fraudwatch/fraudwatch.yaml, opens the exposed port.
	checkMetricsListen(t, filepath.Join(deployDir, "fraudwatch.yaml"))
	if !ldflags {
		t.Error("the build does not strip the binary and stamp main.version and main.commit")
	}
	if !static {
		t.Error("the build is not CGO_ENABLED=0 go build -trimpath: distroless static needs a static binary")
	}
	if !slices.Equal(entry, []string{"/fraudwatch"}) || len(cmd) != 3 || cmd[0] != "run" || cmd[1] != "--config" {
		t.Fatalf("ENTRYPOINT %q CMD %q, want /fraudwatch run --config FILE", entry, cmd)
	}
	// The command's flags are the binary's.
	out, _ := command("run", "-h").CombinedOutput()
	if !strings.Contains(string(out), "-config string") {
		t.Errorf("fraudwatch run takes no --config:\n%s", out)
	}
	ignore, err := os.ReadFile(filepath.Join(deployDir, "..", ".dockerignore"))
	if err != nil || !strings.Contains(string(ignore), ".git") {
		t.Errorf(".dockerignore missing or keeps .git: %v", err)
	}
}

func jsonArgs(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Errorf("%s is not the exec form: %v", s, err)
	}
	return out
}

// compose.yaml parses, has every service docs/operations.md names, and the
// fraudwatch containers' mounts make a configuration that passes check.
func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image       string
			Command     any
			Volumes     []string
			Ports       []string
			Environment map[string]string
			DependsOn   any  `yaml:"depends_on"`
			ReadOnly    bool `yaml:"read_only"`
		}
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, name := range []string{"kafka", "topics", "redis", "fraudwatch-1", "fraudwatch-2", "traffic", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("compose.yaml has no service %s", name)
		}
	}
	// The official image, of the version the tests run against
	// (CONTRIBUTING.md): no other version is tested.
	tested, err := exec.Command("../../scripts/kafka.sh", "default-version").Output()
	if err != nil {
		t.Fatalf("scripts/kafka.sh default-version: %v", err)
	}
	if img, want := c.Services["kafka"].Image, "apache/kafka:"+strings.TrimSpace(string(tested)); img != want {
		t.Errorf("kafka is %s, want %s: the official image of the version scripts/test.sh runs", img, want)
	}
	if cmd, _ := c.Services["redis"].Command.([]any); !slices.Contains(cmd, any("noeviction")) || !slices.Contains(cmd, any("--appendonly")) {
		t.Errorf("redis runs %v, want AOF and noeviction", cmd)
	}
	for _, name := range []string{"fraudwatch-1", "fraudwatch-2", "traffic"} {
		s := c.Services[name]
		if !s.ReadOnly {
			t.Errorf("%s: want read_only", name)
		}
		// The files as the container sees them.
		root := t.TempDir()
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Fatalf("%s: volume %q", name, v)
			}
			copyFile(t, filepath.Join(deployDir, parts[0]), filepath.Join(root, parts[1]))
		}
		checkConfig(t, filepath.Join(root, "etc/fraudwatch/fraudwatch.yaml"))
		if name != "traffic" {
			checkMetricsListen(t, filepath.Join(root, "etc/fraudwatch/fraudwatch.yaml"))
		}
	}
	for name, host := range map[string]string{"fraudwatch-1": "19464", "fraudwatch-2": "29464"} {
		if p := c.Services[name].Ports; len(p) != 1 || p[0] != "127.0.0.1:"+host+":"+metricsPort {
			t.Errorf("%s publishes %q, want the metrics port %s on the host's 127.0.0.1:%s (docs/operations.md)", name, p, metricsPort, host)
		}
	}
	// Nothing is published beyond the host's loopback: the status pages show
	// the rules' thresholds, Grafana lets anyone view.
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q on every interface of the host, want 127.0.0.1 only", name, p)
			}
		}
	}
	if img := c.Services["redis"].Image; img != "redis:7" {
		t.Errorf("redis is %s, want redis:7", img)
	}
	// The topics service is fraudwatch's own topics command, with the
	// replicas' configuration, so it creates the topics they read.
	topics := c.Services["topics"]
	if topics.Image != c.Services["fraudwatch-1"].Image || !slices.Equal(topics.Volumes, c.Services["fraudwatch-1"].Volumes) {
		t.Errorf("the topics service runs %s with %q, want the replicas' image and files", topics.Image, topics.Volumes)
	}
	args, _ := topics.Command.([]any)
	strs := make([]string, len(args))
	for i, a := range args {
		strs[i] = fmt.Sprint(a)
	}
	if len(strs) == 0 || strs[0] != "topics" || !slices.Contains(strs, "/etc/fraudwatch/fraudwatch.yaml") {
		t.Errorf("the topics service runs %q, want fraudwatch topics --config /etc/fraudwatch/fraudwatch.yaml", strs)
	}
	// Its flags are the binary's: -h after them stops before any broker
	// is dialled, once every flag before it has parsed.
	if out, _ := command(append(strs, "-h")...).CombinedOutput(); strings.Contains(string(out), "flag provided but not defined") ||
		strings.Contains(string(out), "invalid value") || !strings.Contains(string(out), "-replication-factor") {
		t.Errorf("the topics service's command %q does not parse as fraudwatch topics' flags:\n%s", strs, out)
	}
	// The traffic service sends every line: each a JSON object with a type
	// produce routes, invalid events among them (the demo's, for the
	// dead-letter topic), but not so many that it shows little else.
	sc := bufio.NewScanner(mustOpen(t, filepath.Join(deployDir, "compose", "traffic.jsonl")))
	lines, invalid := 0, 0
	for sc.Scan() {
		lines++
		var head struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil || (head.Type != "order" && head.Type != "refund") {
			t.Errorf("traffic.jsonl line %d: produce would stop at it (%v, type %q)", lines, err, head.Type)
		}
		if _, err := event.Decode(sc.Bytes(), ""); err != nil {
			invalid++
		}
	}
	if lines == 0 || invalid == 0 || invalid > lines/20 {
		t.Errorf("traffic.jsonl holds %d events, %d of them invalid: want a few, for the dead-letter topic", lines, invalid)
	}
	if roles := c.Services["kafka"].Environment["KAFKA_PROCESS_ROLES"]; roles != "broker,controller" {
		t.Errorf("kafka's roles %q, want one KRaft node, broker and controller", roles)
	}
	// Alerts go to the replicas' logs: no Slack unless the user sets it.
	var fwSlack struct{ Slack map[string]any }
	readYAML(t, filepath.Join(deployDir, "compose", "fraudwatch.yaml"), &fwSlack)
	if len(fwSlack.Slack) > 0 {
		t.Errorf("compose/fraudwatch.yaml sets slack %v, want alerts to the logs", fwSlack.Slack)
	}
	// Prometheus and Grafana see what they are provisioned with: every
	// mounted file exists, the alert rules where prometheus.yml reads them,
	// the dashboard where the dashboards provider looks.
	mounts := map[string]string{}
	for _, name := range []string{"prometheus", "grafana"} {
		for _, v := range c.Services[name].Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Fatalf("%s: volume %q", name, v)
			}
			if _, err := os.Stat(filepath.Join(deployDir, parts[0])); err != nil {
				t.Errorf("%s mounts %s: %v", name, parts[0], err)
			}
			mounts[parts[1]] = filepath.Clean(parts[0])
		}
	}
	var provider struct {
		Providers []struct {
			Options struct{ Path string }
		}
	}
	readYAML(t, filepath.Join(deployDir, "compose", "grafana", "dashboards.yaml"), &provider)
	if len(provider.Providers) != 1 {
		t.Fatalf("dashboard providers %+v, want one", provider.Providers)
	}
	for target, source := range map[string]string{
		"/etc/prometheus/rules/fraudwatch-rules.yml":            "prometheus/fraudwatch-rules.yml",
		"/etc/prometheus/prometheus.yml":                        "compose/prometheus.yml",
		provider.Providers[0].Options.Path + "/fraudwatch.json": "grafana/fraudwatch.json",
		"/etc/grafana/provisioning/dashboards/fraudwatch.yaml":  "compose/grafana/dashboards.yaml",
		"/etc/grafana/provisioning/datasources/fraudwatch.yaml": "compose/grafana/datasources.yaml",
	} {
		if mounts[target] != source {
			t.Errorf("%s holds %q, want deploy/%s", target, mounts[target], source)
		}
	}
	prom, err := os.ReadFile(filepath.Join(deployDir, "compose", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"fraudwatch-1:" + metricsPort, "fraudwatch-2:" + metricsPort, "/etc/prometheus/rules/fraudwatch-rules.yml"} {
		if !strings.Contains(string(prom), target) {
			t.Errorf("compose/prometheus.yml lacks %s", target)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(data)
}

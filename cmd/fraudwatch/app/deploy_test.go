package app

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// deployDir holds the Prometheus rules and the Grafana dashboard.
const deployDir = "../../../deploy"

// EnvPromtool names the promtool the alert rules are tested with
// (scripts/test.sh installs Debian's prometheus package and sets it).
const EnvPromtool = "FRAUDWATCH_TEST_PROMTOOL"

func promtool(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvPromtool); p != "" {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the alert rules' tests need promtool: scripts/test.sh installs it and sets " + EnvPromtool)
	}
	t.Skip("no promtool: set " + EnvPromtool + " or run scripts/test.sh")
	return ""
}

// ruleTests are the alert rules' unit test files: fraudwatch-rules.test.yml,
// and files of their own for tests that need another evaluation_interval
// (fraudwatch-quality.test.yml: 31 days, evaluated every hour).
func ruleTests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "prometheus", "*.test.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests in %s: %v", filepath.Join(deployDir, "prometheus"), err)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	return files
}

// The alert rules are valid and do what their unit tests say.
func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	dir := filepath.Join(deployDir, "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "fraudwatch-rules.yml"},
		append([]string{"test", "rules"}, ruleTests(t)...),
	} {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every alert rule's unit tests see it fire and see it stay quiet: a
// rule tested only firing keeps passing when its "for:" or a condition
// that keeps it quiet is lost.
func TestEveryAlertRuleIsTestedBothWays(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert string }
		}
	}
	readYAMLFile(t, filepath.Join(deployDir, "prometheus", "fraudwatch-rules.yml"), &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string
				ExpAlerts []any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, f := range ruleTests(t) {
		tests.Tests = nil
		readYAMLFile(t, filepath.Join(deployDir, "prometheus", f), &tests)
		for _, tc := range tests.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: tested firing %v, quiet %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if n == 0 {
		t.Fatal("no alert rules read")
	}
}

// The dashboard has the panels docs/operations.md lists, in its order.
func TestDashboardPanels(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "grafana", "fraudwatch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title      string
			Datasource struct{ UID string }
		}
		Templating struct {
			List []struct{ Name, Query string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	// docs/operations.md: the dashboard "fraudwatch", imported with the data source
	// of one's choice: every panel asks the datasource variable.
	if dash.Title != "fraudwatch" {
		t.Errorf("dashboard titled %q, want fraudwatch", dash.Title)
	}
	if len(dash.Templating.List) == 0 || dash.Templating.List[0].Name != "datasource" || dash.Templating.List[0].Query != "prometheus" {
		t.Errorf("templating %+v, want a prometheus datasource variable", dash.Templating.List)
	}
	var got []string
	for _, p := range dash.Panels {
		got = append(got, p.Title)
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q asks the data source %q, not the dashboard's variable", p.Title, p.Datasource.UID)
		}
	}
	want := []string{"Ready replicas", "Rules in force", "Events/s", "Alerts sent (1h)", "Events by type",
		"Lag per partition", "Threshold crossings by rule", "Alerts by rule", "Suppressed alerts by rule and reason",
		"Dead letters by reason", "Latency from produce to processed", "Batch processing time", "Script errors",
		"Alert delivery", "Late, future and clamped events", "Skipped events by rule and reason",
		"Precision by rule", "Alert outcomes by rule", "Time from alert to outcome", "Outcomes recorded and refused",
		"Latency by stage, p99", "Latency by stage, mean"}
	if !slices.Equal(got, want) {
		t.Errorf("panels %q,\nwant %q", got, want)
	}
}

func readYAMLFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// queried lists the fraudwatch metrics the dashboard and the alert rules
// query, histogram series by their family's name.
func queried(t *testing.T) map[string][]string {
	t.Helper()
	var exprs []struct{ where, expr string }
	data, err := os.ReadFile(filepath.Join(deployDir, "grafana", "fraudwatch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, struct{ where, expr string }{"dashboard panel " + p.Title, tg.Expr})
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	readYAMLFile(t, filepath.Join(deployDir, "prometheus", "fraudwatch-rules.yml"), &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, struct{ where, expr string }{"alert " + r.Alert, r.Expr})
		}
	}
	name := regexp.MustCompile(`\bfraudwatch_[a-z_]+`)
	out := map[string][]string{}
	for _, e := range exprs {
		ms := name.FindAllString(e.expr, -1)
		if len(ms) == 0 {
			t.Errorf("%s queries no fraudwatch metric: %s", e.where, e.expr)
		}
		for _, m := range ms {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if strings.HasSuffix(m, "_seconds"+suffix) {
					m = strings.TrimSuffix(m, suffix)
				}
			}
			out[m] = append(out[m], e.where)
		}
	}
	return out
}

const deployRules = `
rules:
  - {name: orders-per-customer, metric: count, group_by: [customer_id], window: 1m, threshold: 3}
  - {name: amount-per-card, metric: amount, group_by: [card_fingerprint], window: 10m, threshold: 1000}
  - {name: sliding-orders, metric: count, group_by: [customer_id], window_type: sliding, window: 1m, threshold: 3}
  - {name: cards-per-customer, metric: distinct, field: card_fingerprint, group_by: [customer_id], window: 1m, threshold: 2}
`

// Every metric the dashboard and the alert rules query is one a running
// fraudwatch exports, with a series from the start: a panel or an alert on
// a name that is not there shows nothing and fires never.
func TestDashboardAndAlertRulesQueryExportedMetrics(t *testing.T) {
	want := queried(t)
	p := newPipeline(t, 2, deployRules)
	r := p.start()
	waitFor(t, 30*time.Second, "ready", func() bool { return r.ready(t) })
	// The lag of a partition has a series once its first refresh (5 s)
	// or message comes.
	exported := map[string]bool{}
	waitFor(t, 20*time.Second, "the lag's series", func() bool {
		mfs, err := r.app.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if len(mf.GetMetric()) > 0 {
				exported[mf.GetName()] = true
			}
		}
		return exported["fraudwatch_consumer_lag"]
	})
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range want {
			if !yield(n) {
				return
			}
		}
	}) {
		if !exported[name] {
			t.Errorf("%s, queried by %s, has no series in a fraudwatch that just started", name, strings.Join(want[name], ", "))
		}
	}
}

// endingTB records how a test would end, without ending this one.
type endingTB struct {
	testing.TB
	ended string
}

func (e *endingTB) Helper()           {}
func (e *endingTB) Fatal(args ...any) { e.end("failed") }
func (e *endingTB) Skip(args ...any)  { e.end("skipped") }
func (e *endingTB) end(how string) {
	if e.ended == "" {
		e.ended = how
	}
}

// Without the browser or promtool their tests skip on a developer's
// machine and fail under CI, where a skipped test would pass for nothing
// (CONTRIBUTING.md).
func TestMissingToolsFailUnderCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvChromium, "")
	t.Setenv(EnvPromtool, "")
	for _, tool := range []struct {
		name string
		find func(testing.TB) string
	}{{"chromium", chromium}, {"promtool", promtool}} {
		for ci, want := range map[string]string{"": "skipped", "true": "failed"} {
			t.Setenv("CI", ci)
			e := &endingTB{TB: t}
			tool.find(e)
			if e.ended != want {
				t.Errorf("%s missing, CI=%q: the test %s, want %s", tool.name, ci, e.ended, want)
			}
		}
	}
}

package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

func reloadRules(threshold string) string {
	return fmt.Sprintf(`rules:
  - name: burst
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: %s
`, threshold)
}

// syncLog is a log a replica writes while the test reads it.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// writeAtomically saves a file as editors do: a new file renamed over the
// old one.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// The rules file is read again when an editor saves it and on SIGHUP: a
// valid new set is in force for the next batches; an invalid one is
// refused, with the file, rule and field in the log, and the old set runs
// on. Every reading logs one line with its outcome.
func TestRulesReload(t *testing.T) {
	p := newPipeline(t, 1, reloadRules("3"))
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(reloadRules("3")), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cfg.RulesFile = path
	logs := &syncLog{}
	hup := make(chan os.Signal, 1)
	opts := p.options()
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	opts.Reload = hup
	r := p.startWith(opts)
	reloads := func(result string) float64 { return r.metric("fraudwatch_rules_reloads_total", "result", result) }
	// lines are the reload lines logged so far, after `seen`.
	seen := 0
	lines := func() []map[string]any {
		out := reloadLines(t, logs.String())[seen:]
		seen += len(out)
		return out
	}
	// outcome waits for a reading's result and checks that it logged one
	// line, its level and message, and returns the line.
	outcome := func(result string, n float64, level, msg string) map[string]any {
		t.Helper()
		waitFor(t, 10*time.Second, msg, func() bool { return reloads(result) == n })
		got := lines()
		if len(got) != 1 || got[0]["level"] != level || got[0]["msg"] != msg {
			t.Fatalf("reload lines %v; want one, %s %q", got, level, msg)
		}
		return got[0]
	}

	// Threshold 3: two orders do not alert.
	p.orders(0, ev{id: "a1", customer: "a", amount: 1}, ev{id: "a2", customer: "a", amount: 1})
	waitFor(t, 20*time.Second, "a's orders", func() bool { return p.counter("burst", "a") == 2 })

	writeAtomically(t, path, reloadRules("2"))
	line := outcome(reloadOK, 1, "INFO", "rules reloaded")
	if v, _ := line["version"].(string); v == "" || r.metric("fraudwatch_rules_version", "version", v) != 1 {
		t.Fatalf("version %q not exported as the one in force:\n%s", v, logs)
	}
	if c, _ := json.Marshal(line["changes"]); !strings.Contains(string(c), `"fields":{"threshold":{"new":"2","old":"3"}}`) {
		t.Errorf("the reload line's changes %s lack threshold 3 → 2", c)
	}
	// The threshold is not part of the definition: a's window counts on.
	p.orders(0, ev{id: "b1", customer: "b", amount: 1}, ev{id: "b2", customer: "b", amount: 1}, ev{id: "a3", customer: "a", amount: 1})
	waitFor(t, 20*time.Second, "b's alert at the new threshold", func() bool {
		return r.metric("fraudwatch_alerts_sent_total", "rule", "burst") == 1
	})
	if n := p.counter("burst", "a"); n != 3 {
		t.Errorf("a's window holds %d, want 3: a threshold change kept it", n)
	}

	writeAtomically(t, path, strings.Replace(reloadRules("2"), "window: 1m", "window: 90", 1))
	line = outcome(reloadInvalid, 1, "ERROR", "rules file invalid; the rules in force run on")
	if e, _ := line["err"].(string); line["file"] != path || !strings.Contains(e, `"burst"`) || !strings.Contains(e, "window") {
		t.Errorf("the refusal %v does not name file, rule and field", line)
	}
	p.orders(0, ev{id: "c1", customer: "c", amount: 1}, ev{id: "c2", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "c's alert under the rules still in force", func() bool {
		return r.metric("fraudwatch_alerts_sent_total", "rule", "burst") == 2
	})

	// SIGHUP reads the file again: still invalid. Restored, it is the
	// set in force: unchanged, and the line says the refusal is over.
	hup <- syscall.SIGHUP
	outcome(reloadInvalid, 2, "ERROR", "rules file invalid; the rules in force run on")
	writeAtomically(t, path, reloadRules("2"))
	outcome(reloadUnchanged, 1, "INFO", "rules reloaded: no change; previous edit was refused")
	// A SIGHUP that changes nothing says so.
	hup <- syscall.SIGHUP
	line = outcome(reloadUnchanged, 2, "INFO", "rules reloaded: no change")
	if line["reason"] != "signal" || line["version"] == nil {
		t.Errorf("the no-change line %v lacks its reason or version", line)
	}
	if reloads("ok") != 1 {
		t.Errorf("%v reloads put a set in force, want 1", reloads("ok"))
	}
}

// reloadLines are the lines of a JSON log that say a reading's outcome.
func reloadLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, `"msg":"rules `) {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %s: %v", l, err)
		}
		out = append(out, line)
	}
	return out
}

// A valid file after a refused one says that it ends the refusal, once.
func TestReloadAfterARefusal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	rs, err := config.ParseRules([]byte(reloadRules("3")), path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r, err := newReloader(path, rs, setterFunc(func() {}), alertSetterFunc(func() {}),
		slog.New(slog.NewJSONHandler(&logs, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		rules, result, msg string
	}{
		{"rules: nope", reloadInvalid, "rules file invalid; the rules in force run on"},
		{reloadRules("4"), reloadOK, "rules reloaded; previous edit was refused"},
		{reloadRules("5"), reloadOK, "rules reloaded"},
		{"", reloadUnreadable, "rules file unreadable; the rules in force run on"},
		{reloadRules("5"), reloadUnchanged, "rules reloaded: no change; previous edit was refused"},
		{reloadRules("5"), reloadUnchanged, "rules reloaded: no change"},
	}
	for _, s := range steps {
		logs.Reset()
		_ = os.Remove(path)
		if s.rules != "" {
			if err := os.WriteFile(path, []byte(s.rules), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got := r.reload("test"); got != s.result {
			t.Fatalf("reload = %s, want %s", got, s.result)
		}
		if line := oneLogLine(t, logs.String()); line["msg"] != s.msg {
			t.Errorf("after %s: %q, want %q", s.result, line["msg"], s.msg)
		}
	}
}

// A Kubernetes ConfigMap mounts rules.yaml as a symlink through "..data",
// itself a symlink to a timestamped directory, and updates it by swapping
// "..data": the file never changes in place.
func TestRulesReloadFollowsAConfigMapSwap(t *testing.T) {
	p := newPipeline(t, 1, reloadRules("3"))
	dir := t.TempDir()
	version := func(name, threshold string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "rules.yaml"), []byte(reloadRules(threshold)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_12_01_v1", "3")
	if err := os.Symlink("..2026_12_01_v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/rules.yaml", filepath.Join(dir, "rules.yaml")); err != nil {
		t.Fatal(err)
	}
	p.cfg.RulesFile = filepath.Join(dir, "rules.yaml")
	r := p.start()

	version("..2026_12_01_v2", "2")
	if err := os.Symlink("..2026_12_01_v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the reload", func() bool { return r.metric("fraudwatch_rules_reloads_total", "result", "ok") == 1 })
	p.orders(0, ev{id: "a1", customer: "a", amount: 1}, ev{id: "a2", customer: "a", amount: 1})
	waitFor(t, 20*time.Second, "the alert at the new threshold", func() bool {
		return r.metric("fraudwatch_alerts_sent_total", "rule", "burst") == 1
	})
}

type setterFunc func()

func (f setterFunc) SetRules([]rules.Rule) { f() }

type alertSetterFunc func()

func (f alertSetterFunc) SetRules(map[string]dispatch.RuleSettings) { f() }

// What each kind of rewrite of the rules file does: the result counted,
// the version in force, and the one log line that says the outcome, with
// each change's fields old → new and whether it starts the rule's windows
// afresh.
func TestReloadResults(t *testing.T) {
	const two = `rules:
  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 3}
  - {name: big, metric: amount, group_by: [card_fingerprint], window: 10m, threshold: 1000}
`
	tests := []struct {
		name    string
		rewrite string // "" removes the file
		result  string
		level   string
		msg     string
		changes string // the line's changes, as JSON
	}{
		{"layout and comments alone", "# the same rules\nrules:\n  - name: burst\n    metric: count\n    group_by: [customer_id]\n    window: 60s\n    threshold: 3\n" +
			"  - {threshold: 1000, name: big, metric: amount, window: 10m, group_by: [card_fingerprint]}\n", reloadUnchanged,
			"INFO", "rules reloaded: no change", ""},
		{"a threshold", strings.Replace(two, "threshold: 3", "threshold: 4", 1), reloadOK, "INFO", "rules reloaded",
			`[{"rule":"burst","change":"changed","fresh_windows":false,"fields":{"threshold":{"old":"3","new":"4"}}}]`},
		{"a window", strings.Replace(two, "window: 1m", "window: 2m", 1), reloadOK, "INFO", "rules reloaded",
			// the cooldown follows the window by default
			`[{"rule":"burst","change":"changed","fresh_windows":true,"fields":{"cooldown":{"old":"1m","new":"2m"},"window":{"old":"1m","new":"2m"}}}]`},
		{"a filter", strings.Replace(two, "threshold: 3}", "threshold: 3, where: {customer_id: {not: [cust-42]}}}", 1), reloadOK, "INFO", "rules reloaded",
			`[{"rule":"burst","change":"changed","fresh_windows":true,"fields":{"where":{"old":"(values not logged)","new":"(values not logged)"}}}]`},
		{"a rule removed and one added", strings.Replace(two, "name: big", "name: bigger", 1), reloadOK, "INFO", "rules reloaded",
			`[{"rule":"bigger","change":"added","fresh_windows":true},{"rule":"big","change":"removed","fresh_windows":false}]`},
		{"an invalid file", strings.Replace(two, "window: 1m", "window: 90", 1), reloadInvalid,
			"ERROR", "rules file invalid; the rules in force run on", ""},
		{"no file", "", reloadUnreadable, "ERROR", "rules file unreadable; the rules in force run on", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			rs, err := config.ParseRules([]byte(two), path)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			set := 0
			reg := prometheus.NewRegistry()
			r, err := newReloader(path, rs, setterFunc(func() { set++ }), alertSetterFunc(func() { set++ }),
				slog.New(slog.NewJSONHandler(&logs, nil)), reg)
			if err != nil {
				t.Fatal(err)
			}
			if tt.rewrite != "" {
				if err := os.WriteFile(path, []byte(tt.rewrite), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.reload("test"); got != tt.result {
				t.Fatalf("reload = %s, want %s\n%s", got, tt.result, logs.String())
			}
			if got := testutil.ToFloat64(r.reloads.WithLabelValues(tt.result)); got != 1 {
				t.Errorf("reloads{result=%s} = %v, want 1", tt.result, got)
			}
			inForce := rules.Version(r.inForce())
			if swapped := inForce != rules.Version(rs); swapped != (tt.result == reloadOK) || (set == 2) != swapped {
				t.Errorf("a new set in force: %v, handed on %d times; want it only for %s", swapped, set, reloadOK)
			}
			// One version series, the one in force.
			if n := testutil.CollectAndCount(r.version); n != 1 || testutil.ToFloat64(r.version.WithLabelValues(inForce)) != 1 {
				t.Errorf("%d version series; want 1, for %s", n, inForce)
			}
			line := oneLogLine(t, logs.String())
			if line["level"] != tt.level || line["msg"] != tt.msg || line["file"] != path || line["reason"] != "test" {
				t.Errorf("log line %v; want %s %q naming the file and the reason", line, tt.level, tt.msg)
			}
			if tt.changes != "" {
				var raw struct{ Changes json.RawMessage }
				if err := json.Unmarshal(logs.Bytes(), &raw); err != nil || string(raw.Changes) != tt.changes {
					got := raw.Changes
					t.Errorf("changes %s (%v)\nwant    %s", got, err, tt.changes)
				}
			}
		})
	}
}

// oneLogLine is the only line of a JSON log, decoded.
func oneLogLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(lines), logs)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatalf("log line %s: %v", lines[0], err)
	}
	return line
}

// With --log-format text the changes are one readable value.
func TestReloadChangesText(t *testing.T) {
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("rules reloaded", "changes", reloadChanges{
		{Rule: "burst", Kind: "changed", Fields: []rules.FieldChange{{Field: "threshold", Old: "3", New: "4"}}},
		{Rule: "cards", Kind: "changed", Resets: true, Fields: []rules.FieldChange{{Field: "where", Old: "currency in [KRW]", New: "none"}}},
		{Rule: "big", Kind: "removed"},
	})
	want := `changes="burst: threshold 3 → 4; cards: where (values not logged) → (values not logged) (fresh windows); big: removed"`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log %s lacks %s", logs.String(), want)
	}
}

// recordingRules keeps the last settings a dispatcher was handed.
type recordingRules struct {
	mu   sync.Mutex
	last map[string]dispatch.RuleSettings
	sets int
}

func (r *recordingRules) SetRules(m map[string]dispatch.RuleSettings) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.sets = m, r.sets+1
}

// Routes reload with the rules: a file whose routes alone changed is a
// new set, handed to every receiver's dispatcher with each rule's
// receivers and links (the rule's own, then the receiver's that its
// alerts fill); a route naming a receiver the configuration lacks, or
// leaving one unreached, is refused and the set in force runs on.
func TestReloadRoutes(t *testing.T) {
	const base = `rules:
  - name: burst
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 3
    links: [{text: Customer, url: "https://bo.test/c/{customer_id}"}]
  - {name: big, metric: amount, group_by: [card_fingerprint], window: 10m, threshold: 1000, severity: critical}
`
	routes := func(big, burst string) string {
		return base + fmt.Sprintf("routes:\n  - {match: {rules: [big]}, receivers: [%s]}\n  - {match: {rules: [burst]}, receivers: [%s]}\n", big, burst)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	set, err := config.ParseRuleSet([]byte(routes("pager", "slack")), path)
	if err != nil {
		t.Fatal(err)
	}
	cardLink := alert.LinkTemplate{Text: "Card", URL: "https://pd.test/k/{card_fingerprint}"}
	recvs := []config.Receiver{
		{Name: "slack", Kind: config.KindSlack},
		{Name: "pager", Kind: config.KindPagerDuty, Links: []alert.LinkTemplate{cardLink}},
	}
	slackD, pagerD := &recordingRules{}, &recordingRules{}
	var logs bytes.Buffer
	ds := dispatchers{{Receiver: recvs[0], Rules: slackD}, {Receiver: recvs[1], Rules: pagerD}}
	// The app hands the set read at start to its dispatchers.
	ds.setRules(set)
	r, err := newRoutedReloader(path, set, recvs, setterFunc(func() {}), ds,
		slog.New(slog.NewJSONHandler(&logs, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name, rules, result string
		// big and burst are the receivers in force after the step.
		big, burst []string
	}{
		{"the same routes", routes("pager", "slack"), reloadUnchanged, []string{"pager"}, []string{"slack"}},
		{"routes alone changed", routes("pager, slack", "pager"), reloadOK, []string{"pager", "slack"}, []string{"pager"}},
		{"an unknown receiver", routes("pager, cases", "slack"), reloadInvalid, []string{"pager", "slack"}, []string{"pager"}},
		{"a receiver unreached", routes("pager", "pager"), reloadInvalid, []string{"pager", "slack"}, []string{"pager"}},
		{"no routes: every receiver", base, reloadOK, nil, nil},
	}
	for _, s := range steps {
		logs.Reset()
		if err := os.WriteFile(path, []byte(s.rules), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := r.reload("test"); got != s.result {
			t.Fatalf("%s: reload = %s, want %s\n%s", s.name, got, s.result, logs.String())
		}
		if s.result == reloadOK && !strings.Contains(logs.String(), `"routes_changed":true`) {
			t.Errorf("%s: the reload line does not say the routes changed: %s", s.name, logs.String())
		}
		if s.result == reloadInvalid && !strings.Contains(logs.String(), "routes") {
			t.Errorf("%s: the refusal does not name the routes: %s", s.name, logs.String())
		}
		for _, d := range []*recordingRules{slackD, pagerD} {
			if d.last == nil {
				t.Fatalf("%s: a dispatcher was handed no rules", s.name)
			}
			if got := d.last["big"].Receivers; !slices.Equal(got, s.big) || (got == nil) != (s.big == nil) {
				t.Errorf("%s: big goes to %q, want %q", s.name, got, s.big)
			}
			if got := d.last["burst"].Receivers; !slices.Equal(got, s.burst) || (got == nil) != (s.burst == nil) {
				t.Errorf("%s: burst goes to %q, want %q", s.name, got, s.burst)
			}
		}
		if slackD.sets != pagerD.sets {
			t.Errorf("%s: the dispatchers were handed %d and %d sets", s.name, slackD.sets, pagerD.sets)
		}
	}
	// Links: the rule's own to every receiver; the pager's own card link
	// only to its dispatcher, and only for the rule whose alerts fill it.
	customer := alert.LinkTemplate{Text: "Customer", URL: "https://bo.test/c/{customer_id}"}
	for _, c := range []struct {
		d          *recordingRules
		rule       string
		want       []alert.LinkTemplate
		receiverOf string
	}{
		{slackD, "burst", []alert.LinkTemplate{customer}, "slack"},
		{pagerD, "burst", []alert.LinkTemplate{customer}, "pager"},
		{slackD, "big", nil, "slack"},
		{pagerD, "big", []alert.LinkTemplate{cardLink}, "pager"},
	} {
		if got := c.d.last[c.rule].Links; !slices.Equal(got, c.want) {
			t.Errorf("%s's dispatcher: %s's links %v, want %v", c.receiverOf, c.rule, got, c.want)
		}
	}
}

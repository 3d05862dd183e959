package app

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fraudwatch/fraudwatch/alert"
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
// on.
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
	version := func() string {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"msg":"rules reloaded"`) {
				_, v, _ := strings.Cut(line, `"version":"`)
				v, _, _ = strings.Cut(v, `"`)
				return v
			}
		}
		return ""
	}

	// Threshold 3: two orders do not alert.
	p.orders(0, ev{id: "a1", customer: "a", amount: 1}, ev{id: "a2", customer: "a", amount: 1})
	waitFor(t, 20*time.Second, "a's orders", func() bool { return p.counter("burst", "a") == 2 })

	writeAtomically(t, path, reloadRules("2"))
	waitFor(t, 10*time.Second, "the reload", func() bool { return reloads("ok") == 1 })
	if v := version(); v == "" || r.metric("fraudwatch_rules_version", "version", v) != 1 {
		t.Fatalf("version %q not exported as the one in force:\n%s", v, logs)
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
	waitFor(t, 10*time.Second, "the refusal", func() bool { return reloads("invalid") == 1 })
	if l := logs.String(); !strings.Contains(l, "rules file invalid; the rules in force run on") ||
		!strings.Contains(l, path) || !strings.Contains(l, `\"burst\"`) || !strings.Contains(l, "window") {
		t.Errorf("the refusal does not name file, rule and field:\n%s", l)
	}
	p.orders(0, ev{id: "c1", customer: "c", amount: 1}, ev{id: "c2", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "c's alert under the rules still in force", func() bool {
		return r.metric("fraudwatch_alerts_sent_total", "rule", "burst") == 2
	})

	// SIGHUP reads the file again: still invalid. Restored, it is the
	// set in force: unchanged.
	hup <- syscall.SIGHUP
	waitFor(t, 10*time.Second, "the signal's reload", func() bool { return reloads("invalid") == 2 })
	if err := os.WriteFile(path, []byte(reloadRules("2")), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the unchanged set", func() bool { return reloads("unchanged") >= 1 })
	if reloads("ok") != 1 {
		t.Errorf("%v reloads put a set in force, want 1", reloads("ok"))
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

func (f alertSetterFunc) SetRules(map[string]alert.RuleSettings) { f() }

// What each kind of rewrite of the rules file does: the result counted,
// the version in force, and the log lines naming each change and whether
// it starts the rule's windows afresh.
func TestReloadResults(t *testing.T) {
	const two = `rules:
  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 3}
  - {name: big, metric: amount, group_by: [card_fingerprint], window: 10m, threshold: 1000}
`
	tests := []struct {
		name    string
		rewrite string // "" removes the file
		result  string
		logs    []string // substrings of the log
	}{
		{"layout and comments alone", "# the same rules\nrules:\n  - name: burst\n    metric: count\n    group_by: [customer_id]\n    window: 60s\n    threshold: 3\n" +
			"  - {threshold: 1000, name: big, metric: amount, window: 10m, group_by: [card_fingerprint]}\n", reloadUnchanged, nil},
		{"a threshold", strings.Replace(two, "threshold: 3", "threshold: 4", 1), reloadOK,
			[]string{`"msg":"rule changed","rule":"burst","fields":"threshold","fresh_windows":false`}},
		{"a window", strings.Replace(two, "window: 1m", "window: 2m", 1), reloadOK,
			[]string{`"msg":"rule changed","rule":"burst","fields":"window,cooldown","fresh_windows":true`}}, // the cooldown follows the window by default
		{"a rule removed and one added", strings.Replace(two, "name: big", "name: bigger", 1), reloadOK,
			[]string{`"msg":"rule removed","rule":"big"`, `"msg":"rule added","rule":"bigger","fields":"","fresh_windows":true`}},
		{"an invalid file", strings.Replace(two, "window: 1m", "window: 90", 1), reloadInvalid,
			[]string{`"msg":"rules file invalid; the rules in force run on"`}},
		{"no file", "", reloadUnreadable, []string{`"msg":"rules file unreadable; the rules in force run on"`}},
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
			for _, want := range tt.logs {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %s:\n%s", want, logs.String())
				}
			}
		})
	}
}

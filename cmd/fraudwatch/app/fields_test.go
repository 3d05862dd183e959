package app

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/config"
)

// fieldWarnings are the WARN lines of a JSON log that name a field no
// event is known to carry, as "rule key field did_you_mean".
func fieldWarnings(t *testing.T, logs string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, `"msg":"rule names a field no event is known to carry"`) {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %s: %v", l, err)
		}
		if line["level"] != "WARN" || line["file"] == "" {
			t.Errorf("line %s is no WARN naming the file", l)
		}
		out = append(out, strings.Join([]string{line["rule"].(string), line["key"].(string), line["field"].(string),
			line["did_you_mean"].(string)}, " "))
	}
	return out
}

// Each reading of the rules file that logs its outcome warns once of each
// field its rules name that is neither documented nor declared in its
// event_fields; a refused one does not (its rules are not in force).
func TestReloadWarnsOfUnknownFields(t *testing.T) {
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
	typo := strings.Replace(reloadRules("3"), "[customer_id]", "[custmer_id]", 1)
	own := strings.Replace(reloadRules("3"), "[customer_id]", "[customer_id, merchant_id]", 1)
	steps := []struct {
		name, rules, result string
		want                []string
	}{
		{"a typo", typo, reloadOK, []string{"burst group_by[0] custmer_id customer_id"}},
		{"the same file again", typo, reloadUnchanged, []string{"burst group_by[0] custmer_id customer_id"}},
		{"a field of the events' own", own, reloadOK, []string{"burst group_by[1] merchant_id "}},
		{"declared", own + "event_fields: [merchant_id]\n", reloadUnchanged, nil},
		{"refused", own + "event_fields: [customer_id]\n", reloadInvalid, nil},
		{"undeclared again", own, reloadUnchanged, []string{"burst group_by[1] merchant_id "}},
	}
	for _, s := range steps {
		logs.Reset()
		if err := os.WriteFile(path, []byte(s.rules), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := r.reload("test"); got != s.result {
			t.Fatalf("%s: reload = %s, want %s\n%s", s.name, got, s.result, logs.String())
		}
		if len(reloadLines(t, logs.String())) != 1 {
			t.Fatalf("%s: no line of the outcome:\n%s", s.name, logs.String())
		}
		if got := fieldWarnings(t, logs.String()); !slices.Equal(got, s.want) {
			t.Errorf("%s: warnings %q, want %q", s.name, got, s.want)
		}
	}
}

// run warns at start of each field its rules name that no event is known
// to carry, once: the watch's first reading of an unchanged file adds
// none, and a reload adds its own.
func TestRunWarnsOfUnknownFieldsAtStart(t *testing.T) {
	typo := strings.Replace(reloadRules("3"), "[customer_id]", "[custmer_id]", 1)
	p := newPipeline(t, 1, typo)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cfg.RulesFile = path
	logs := &syncLog{}
	opts := p.options()
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	r := p.startWith(opts)
	want := []string{"burst group_by[0] custmer_id customer_id"}
	waitFor(t, 10*time.Second, "the warning at start", func() bool { return len(fieldWarnings(t, logs.String())) > 0 })
	if got := fieldWarnings(t, logs.String()); !slices.Equal(got, want) {
		t.Errorf("warnings at start %q, want %q", got, want)
	}

	// A reload's line is the positive signal that the watch has read the
	// file at its start, which must have added nothing.
	writeAtomically(t, path, strings.Replace(typo, "threshold: 3", "threshold: 2", 1))
	waitFor(t, 10*time.Second, "the reload", func() bool { return r.metric("fraudwatch_rules_reloads_total", "result", reloadOK) == 1 })
	if got := fieldWarnings(t, logs.String()); !slices.Equal(got, append(want, want...)) {
		t.Errorf("warnings after a reload %q, want the start's and the reload's", got)
	}
}

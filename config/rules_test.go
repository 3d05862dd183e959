package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// oneRule returns a rules file holding one valid count rule, changed by
// edits: "field: value" sets a field (YAML as written), "field:" alone
// removes it.
func oneRule(edits ...string) string {
	fields := [][2]string{
		{"name", "orders-per-customer-1m"},
		{"metric", "count"},
		{"group_by", "[customer_id]"},
		{"window", "1m"},
		{"threshold", "3"},
	}
	for _, e := range edits {
		k, v, _ := strings.Cut(e, ":")
		v = strings.TrimSpace(v)
		i := -1
		for j, f := range fields {
			if f[0] == k {
				i = j
			}
		}
		switch {
		case v == "" && i >= 0:
			fields = append(fields[:i], fields[i+1:]...)
		case i >= 0:
			fields[i][1] = v
		default:
			fields = append(fields, [2]string{k, v})
		}
	}
	var b strings.Builder
	b.WriteString("rules:\n")
	for i, f := range fields {
		if i == 0 {
			b.WriteString("  - ")
		} else {
			b.WriteString("    ")
		}
		b.WriteString(f[0] + ": " + f[1] + "\n")
	}
	return b.String()
}

func TestParseRulesValid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []rules.Rule
	}{
		{
			name: "defaults",
			yaml: oneRule(),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Fixed, Window: time.Minute, Threshold: 3, Cooldown: time.Minute,
				// docs/configuration.md: evidence defaults to 10.
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: 10,
			}},
		},
		{
			name: "every field",
			yaml: `rules:
  - name: card-amount-10m
    description: More than 1,000,000 won paid by one card within 10 minutes
    metric: amount
    group_by: [card_fingerprint, currency]
    window: 10m
    threshold: 1000000
    cooldown: 1h
    severity: critical
    mode: shadow
    channel: "#fraud-risk"
    enabled: false
    evidence: 3
`,
			want: []rules.Rule{{
				Name: "card-amount-10m", Description: "More than 1,000,000 won paid by one card within 10 minutes",
				Metric: alert.Amount, GroupBy: []string{"card_fingerprint", "currency"},
				WindowType: alert.Fixed, Window: 10 * time.Minute, Threshold: 1_000_000, Cooldown: time.Hour,
				Severity: alert.SeverityCritical, Mode: alert.ModeShadow, Channel: "#fraud-risk", Enabled: false, Evidence: 3,
			}},
		},
		{
			name: "cooldown 0 disables, as an integer",
			yaml: oneRule("cooldown: 0"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Fixed, Window: time.Minute, Threshold: 3, Cooldown: 0,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "cooldown 0s disables",
			yaml: oneRule("cooldown: 0s", "severity: info", "mode: alert", "enabled: true"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Fixed, Window: time.Minute, Threshold: 3, Cooldown: 0,
				Severity: alert.SeverityInfo, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "cooldown null takes the window",
			yaml: oneRule("cooldown: ~", "window: 1h30m", "severity: high", "threshold: 9007199254740991"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Fixed, Window: 90 * time.Minute, Threshold: rules.MaxThreshold, Cooldown: 90 * time.Minute,
				Severity: alert.SeverityHigh, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "window 1s, threshold 1, extra group_by field, 64-character name",
			yaml: oneRule("name: "+strings.Repeat("a", 62)+"_9", "window: 1s", "threshold: 1", "group_by: [merchant_id, ip]"),
			want: []rules.Rule{{
				Name: strings.Repeat("a", 62) + "_9", Metric: alert.Count, GroupBy: []string{"merchant_id", "ip"},
				WindowType: alert.Fixed, Window: time.Second, Threshold: 1, Cooldown: time.Second,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "window_type fixed is the default",
			yaml: oneRule("window_type: fixed"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Fixed, Window: time.Minute, Threshold: 3, Cooldown: time.Minute,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "sliding takes allowed_lateness 1m",
			yaml: oneRule("window_type: sliding"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Sliding, Window: time.Minute, Lateness: time.Minute, Threshold: 3, Cooldown: time.Minute,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "sliding with allowed_lateness null takes 1m",
			yaml: oneRule("window_type: sliding", "allowed_lateness: ~"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Sliding, Window: time.Minute, Lateness: time.Minute, Threshold: 3, Cooldown: time.Minute,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "sliding with allowed_lateness 0",
			yaml: oneRule("window_type: sliding", "allowed_lateness: 0"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Sliding, Window: time.Minute, Lateness: 0, Threshold: 3, Cooldown: time.Minute,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "sliding with allowed_lateness longer than the window",
			yaml: oneRule("window_type: sliding", "allowed_lateness: 2m30s", "metric: amount"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Amount, GroupBy: []string{"customer_id"},
				WindowType: alert.Sliding, Window: time.Minute, Lateness: 150 * time.Second, Threshold: 3, Cooldown: time.Minute,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "distinct, threshold at its maximum",
			yaml: oneRule("metric: distinct", "field: card_fingerprint", "threshold: 10000"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Distinct, Field: "card_fingerprint", GroupBy: []string{"customer_id"},
				WindowType: alert.Fixed, Window: time.Minute, Threshold: rules.MaxDistinctThreshold, Cooldown: time.Minute,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "count threshold above the distinct maximum",
			yaml: oneRule("threshold: 10001"),
			want: []rules.Rule{{
				Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
				WindowType: alert.Fixed, Window: time.Minute, Threshold: 10001, Cooldown: time.Minute,
				Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
			}},
		},
		{
			name: "several rules keep their order",
			yaml: `rules:
  - {name: b, metric: count, group_by: [email], window: 30s, threshold: 2}
  - {name: a, metric: amount, group_by: [ip], window: 2m, threshold: 500, cooldown: 5m}
`,
			want: []rules.Rule{
				{Name: "b", Metric: alert.Count, GroupBy: []string{"email"}, WindowType: alert.Fixed, Window: 30 * time.Second, Threshold: 2,
					Cooldown: 30 * time.Second, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence},
				{Name: "a", Metric: alert.Amount, GroupBy: []string{"ip"}, WindowType: alert.Fixed, Window: 2 * time.Minute, Threshold: 500,
					Cooldown: 5 * time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.ParseRules([]byte(tt.yaml), "rules.yaml")
			if err != nil {
				t.Fatalf("ParseRules:\n%s\nerror: %v", tt.yaml, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseRules:\n%s\ngot  %+v\nwant %+v", tt.yaml, got, tt.want)
			}
		})
	}
}

func TestParseRulesInvalid(t *testing.T) {
	const rule = `"orders-per-customer-1m"`
	tests := []struct {
		name string
		yaml string
		// want are substrings the error must hold: the rule and the field
		// at fault (the file is checked for every case).
		want []string
	}{
		{"not YAML", "rules: [\n", []string{"not valid YAML"}},
		{"empty file", "", []string{"rules", "must be a list"}},
		{"rules not a list", "rules: {name: a}\n", []string{"rules", "must be a list"}},
		{"no rules", "rules: []\n", []string{"rules", "no rules"}},
		{"unknown top-level key", oneRule() + "settings: 1\n", []string{"settings", "unknown key"}},
		{"unknown top-level nested key", oneRule() + "defaults:\n  window: 1m\n", []string{"defaults", "unknown key"}},
		{"empty unknown top-level mapping", oneRule() + "defaults: {}\n", []string{"defaults", "unknown key"}},
		{"top-level keys are exact", strings.Replace(oneRule(), "rules:", "Rules:", 1), []string{"Rules", "unknown key"}},
		{"top level a list", "- name: a\n", []string{"must be a mapping"}},
		{"evidence below 0", oneRule() + "    evidence: -1\n", []string{rule, "evidence", "0 to 20"}},
		{"evidence above 20", oneRule() + "    evidence: 21\n", []string{rule, "evidence", "0 to 20"}},
		{"evidence not a number", oneRule() + "    evidence: many\n", []string{rule, "evidence"}},
		{"duplicate key in a rule", oneRule() + "    window: 5m\n", []string{"not valid YAML", "window"}},
		{"rule not a mapping", "rules:\n  - just-a-name\n", []string{"rule #1", "mapping"}},
		{"unknown field", oneRule("windw: 1m"), []string{rule, "windw", "unknown key (did you mean window?)"}},
		{"unknown placeholder", oneRule(`description: "{treshold} orders within {window} by {field}"`),
			[]string{rule, "description", "unknown placeholder {treshold}, {field}: a description may name {threshold}, {window}, {group_by}"}},
		{"field names are exact", oneRule("Window: 5m"), []string{rule, "Window", "unknown key (did you mean window?)"}},
		{"name field is exact", oneRule("Name: other"), []string{rule, "Name", "unknown key (did you mean name?)"}},
		{"name missing", oneRule("name:"), []string{"rule #1", "name", "required"}},
		{"name empty", oneRule(`name: ""`), []string{"rule #1", "name", "required"}},
		{"name upper case", oneRule("name: Orders"), []string{`"Orders"`, "name", "a-z"}},
		{"name with a space", oneRule(`name: "orders 1m"`), []string{`"orders 1m"`, "name"}},
		{"name with a dot", oneRule("name: orders.1m"), []string{`"orders.1m"`, "name"}},
		{"name with a colon", oneRule(`name: "orders:1m"`), []string{`"orders:1m"`, "name"}},
		{"name with a brace", oneRule(`name: "orders{1m}"`), []string{`"orders{1m}"`, "name"}},
		{"name with a newline", oneRule(`name: "orders\n"`), []string{`"orders\n"`, "name"}},
		{"name not ASCII", oneRule("name: 주문"), []string{"name"}},
		{"name 65 characters", oneRule("name: " + strings.Repeat("a", 65)), []string{"name", "64"}},
		{"name a number", oneRule("name: 5"), []string{"rule #1", "name", "string"}},
		{"metric missing", oneRule("metric:"), []string{rule, "metric", "required"}},
		{"metric unknown", oneRule("metric: sum"), []string{rule, "metric", `"sum"`}},
		{"metric upper case", oneRule("metric: Count"), []string{rule, "metric", `"Count"`}},
		{"metric names distinct", oneRule("metric: unique"), []string{rule, "metric", `must be count, amount or distinct, not "unique"`}},
		{"metric missing names distinct", oneRule("metric:"), []string{rule, "metric", "(count, amount or distinct)"}},
		{"distinct without field", oneRule("metric: distinct"), []string{rule, "field", "is required for metric distinct"}},
		{"distinct with field null", oneRule("metric: distinct", "field: ~"), []string{rule, "field", "is required for metric distinct"}},
		{"distinct with field empty", oneRule("metric: distinct", `field: ""`), []string{rule, "field: is empty"}},
		{"distinct with field blank", oneRule("metric: distinct", `field: " "`), []string{rule, "field: is empty"}},
		{"distinct field in group_by", oneRule("metric: distinct", "field: ip", "group_by: [customer_id, ip]"),
			[]string{rule, "field", `"ip" is in group_by`, "always 1"}},
		{"distinct field a list", oneRule("metric: distinct", "field: [ip]"), []string{rule, "field", "expected a string, got a list"}},
		{"field on a count rule", oneRule("field: ip"), []string{rule, "field", "only distinct rules have a field"}},
		{"field on an amount rule", oneRule("metric: amount", "field: ip"), []string{rule, "field", "only distinct rules have a field"}},
		{"distinct threshold above 10000", oneRule("metric: distinct", "field: ip", "threshold: 10001"),
			[]string{rule, "threshold", "between 1 and 10000 for metric distinct"}},
		{"distinct threshold 0", oneRule("metric: distinct", "field: ip", "threshold: 0"),
			[]string{rule, "threshold", "between 1 and 10000 for metric distinct"}},
		{"distinct threshold a string", oneRule("metric: distinct", "field: ip", `threshold: "5"`), []string{rule, "threshold", `string "5"`}},
		{"window_type unknown", oneRule("window_type: tumbling"), []string{rule, "window_type", `must be fixed or sliding, not "tumbling"`}},
		{"window_type upper case", oneRule("window_type: Sliding"), []string{rule, "window_type", `"Sliding"`}},
		{"window_type a number", oneRule("window_type: 1"), []string{rule, "window_type", "expected a string, got an integer"}},
		{"window_type misspelt key", oneRule("window_typ: sliding"), []string{rule, "window_typ", "did you mean window_type?"}},
		{"allowed_lateness on an implicitly fixed rule", oneRule("allowed_lateness: 30s"),
			[]string{rule, "allowed_lateness", "only sliding rules have allowed_lateness"}},
		{"allowed_lateness 0 on a fixed rule", oneRule("window_type: fixed", "allowed_lateness: 0s"),
			[]string{rule, "allowed_lateness", "only sliding rules have allowed_lateness"}},
		{"allowed_lateness negative", oneRule("window_type: sliding", "allowed_lateness: -1s"), []string{rule, "allowed_lateness", "negative"}},
		{"allowed_lateness fractional seconds", oneRule("window_type: sliding", "allowed_lateness: 1500ms"),
			[]string{rule, "allowed_lateness", "whole number of seconds, got 1.5s"}},
		{"allowed_lateness above 100 windows", oneRule("window_type: sliding", "window: 10s", "allowed_lateness: 1001s"),
			[]string{rule, "allowed_lateness", "at most 100 × the window (16m40s), got 16m41s"}},
		{"allowed_lateness bare number", oneRule("window_type: sliding", "allowed_lateness: 60"), []string{rule, "allowed_lateness", "unit"}},
		{"allowed_lateness not a duration", oneRule("window_type: sliding", "allowed_lateness: late"),
			[]string{rule, "allowed_lateness", "not a duration"}},
		{"allowed_lateness misspelt key", oneRule("window_type: sliding", "allowed_latenes: 1m"),
			[]string{rule, "allowed_latenes", "did you mean allowed_lateness?"}},
		{"where misspelt key", oneRule("wher: {ip: [a]}"), []string{rule, "wher", "did you mean where?"}},
		{"where error names its field", oneRule("where: {currency: [KRW, 5]}"), []string{rule, "where.currency[1]", "three-letter"}},
		{"group_by missing", oneRule("group_by:"), []string{rule, "group_by", "at least one"}},
		{"group_by empty list", oneRule("group_by: []"), []string{rule, "group_by", "at least one"}},
		{"group_by a string", oneRule("group_by: customer_id"), []string{rule, "group_by"}},
		{"group_by empty entry", oneRule(`group_by: [customer_id, ""]`), []string{rule, "group_by[1]", "empty"}},
		{"group_by blank entry", oneRule(`group_by: [" "]`), []string{rule, "group_by[0]", "empty"}},
		{"group_by repeated entry", oneRule("group_by: [customer_id, ip, customer_id]"), []string{rule, "group_by[2]", "repeats"}},
		{"group_by a number", oneRule("group_by: [customer_id, 5]"), []string{rule, "group_by[1]"}},
		// Its alerts would name more fields than the dispatcher takes.
		{"group_by of 65 fields", oneRule("group_by: [" + manyFields(65) + "]"), []string{rule, "group_by", "has 65 fields, at most 64"}},
		{"window missing", oneRule("window:"), []string{rule, "window", "required"}},
		{"window bare number", oneRule("window: 60"), []string{rule, "window", "unit"}},
		{"window bare zero", oneRule("window: 0"), []string{rule, "window", "at least 1s"}},
		{"window float", oneRule("window: 1.5"), []string{rule, "window", "unit"}},
		{"window not a duration", oneRule("window: a minute"), []string{rule, "window", "not a duration"}},
		{"window days", oneRule("window: 1d"), []string{rule, "window", "not a duration"}},
		{"window sub-second", oneRule("window: 500ms"), []string{rule, "window", "at least 1s"}},
		{"window fractional seconds", oneRule("window: 1.5s"), []string{rule, "window", "whole number of seconds"}},
		{"window 1m0.5s", oneRule("window: 1m0.5s"), []string{rule, "window", "whole number of seconds"}},
		{"window negative", oneRule("window: -1m"), []string{rule, "window", "at least 1s"}},
		{"threshold missing", oneRule("threshold:"), []string{rule, "threshold", "required"}},
		{"threshold zero", oneRule("threshold: 0"), []string{rule, "threshold", "between 1 and"}},
		{"threshold negative", oneRule("threshold: -3"), []string{rule, "threshold", "between 1 and"}},
		{"threshold float", oneRule("threshold: 3.5"), []string{rule, "threshold", "integer"}},
		{"threshold float with zero fraction", oneRule("threshold: 3.0"), []string{rule, "threshold", "integer"}},
		{"threshold string", oneRule(`threshold: "3"`), []string{rule, "threshold", `string "3"`}},
		{"threshold 2^53", oneRule("threshold: 9007199254740992"), []string{rule, "threshold", "between 1 and 9007199254740991"}},
		{"threshold beyond int64", oneRule("threshold: 18446744073709551615"), []string{rule, "threshold", "between 1 and"}},
		{"threshold beyond uint64", oneRule("threshold: 99999999999999999999999"), []string{rule, "threshold", "integer"}},
		{"cooldown bare number", oneRule("cooldown: 600"), []string{rule, "cooldown", "unit"}},
		{"cooldown negative", oneRule("cooldown: -1m"), []string{rule, "cooldown", "negative"}},
		{"cooldown fractional seconds", oneRule("cooldown: 2500ms"), []string{rule, "cooldown", "whole number of seconds"}},
		{"cooldown not a duration", oneRule("cooldown: soon"), []string{rule, "cooldown", "not a duration"}},
		{"severity unknown", oneRule("severity: urgent"), []string{rule, "severity", `"urgent"`}},
		{"severity upper case", oneRule("severity: HIGH"), []string{rule, "severity", `"HIGH"`}},
		{"mode unknown", oneRule("mode: notify"), []string{rule, "mode", `"notify"`}},
		{"enabled not a bool", oneRule(`enabled: "no"`), []string{rule, "enabled"}},
		{"description not a string", oneRule("description: [a]"), []string{rule, "description"}},
		{"duplicate names", oneRule() + "  - {name: orders-per-customer-1m, metric: amount, group_by: [ip], window: 1m, threshold: 1}\n",
			[]string{`"orders-per-customer-1m" (#2)`, "name", "duplicate of rule #1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.ParseRules([]byte(tt.yaml), "conf/rules.yaml")
			if err == nil {
				t.Fatalf("ParseRules:\n%s\n= %+v, want an error", tt.yaml, got)
			}
			if got != nil {
				t.Errorf("ParseRules returned rules with its error: %+v", got)
			}
			msg := err.Error()
			for _, line := range strings.Split(msg, "\n") {
				if !strings.HasPrefix(line, "conf/rules.yaml: ") {
					t.Errorf("error line %q does not start with the file", line)
					break
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// fieldErrors flattens the errors Parse joined.
func fieldErrors(t *testing.T, err error) []*config.FieldError {
	t.Helper()
	var out []*config.FieldError
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *config.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v (%T) is not a *FieldError", err, err)
		}
		out = append(out, fe)
	}
	walk(err)
	return out
}

func TestParseRulesReportsEveryError(t *testing.T) {
	yaml := `rules:
  - name: ok-rule
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 3
  - metric: volume
    group_by: [ip, ip]
    window: 60
    threshold: 0
    severity: loud
    mode: maybe
    colour: red
  - name: second-bad
    metric: amount
    group_by: [email]
    window: 500ms
    threshold: 2.5
    cooldown: -1s
  - name: 5
    metric: count
    group_by: [ip, 7]
    enabled: "no"
    window: 1h
    threshold: 0
extra: true
`
	_, err := config.ParseRules([]byte(yaml), "r.yaml")
	if err == nil {
		t.Fatal("ParseRules accepted a file with errors")
	}
	type key struct{ rule, field string }
	// Each problem is reported exactly once: a float threshold is not also
	// out of range, and a name of the wrong type is not also missing.
	got := map[key]int{}
	for _, fe := range fieldErrors(t, err) {
		if fe.File != "r.yaml" {
			t.Errorf("FieldError.File = %q", fe.File)
		}
		if strings.Contains(fe.Error(), "\n") {
			t.Errorf("FieldError spans lines: %q", fe.Error())
		}
		got[key{fe.Rule, fe.Field}]++
	}
	want := map[key]int{
		{"", "extra"}:  1,
		{"#2", "name"}: 1, {"#2", "metric"}: 1, {"#2", "group_by[1]"}: 1, {"#2", "window"}: 1,
		{"#2", "threshold"}: 1, {"#2", "severity"}: 1, {"#2", "mode"}: 1, {"#2", "colour"}: 1,
		{`"second-bad"`, "window"}: 1, {`"second-bad"`, "threshold"}: 1, {`"second-bad"`, "cooldown"}: 1,
		{"#4", "name"}: 1, {"#4", "group_by[1]"}: 1, {"#4", "enabled"}: 1, {"#4", "threshold"}: 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors by (rule, field):\ngot  %v\nwant %v\n%v", got, want, err)
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(oneRule()), 0o600); err != nil {
		t.Fatal(err)
	}
	rs, err := config.LoadRules(path)
	if err != nil || len(rs) != 1 || rs[0].Name != "orders-per-customer-1m" {
		t.Fatalf("LoadRules = %+v, %v", rs, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(oneRule("threshold: 0")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadRules(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadRules(bad) error %v does not name %s", err, bad)
	}

	_, err = config.LoadRules(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadRules(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestParseRulesReportsEveryErrorOfNewKeys(t *testing.T) {
	yaml := `rules:
  - name: distinct-bad
    metric: distinct
    field: [ip]
    group_by: [customer_id]
    window_type: 5
    allowed_lateness: 30s
    window: 1m
    threshold: 20000
    where: {currency: [KRW, usd1], amount: {gte: 5, gt: 1}}
  - name: count-bad
    metric: count
    field: ip
    group_by: [ip]
    window_type: sliding
    allowed_lateness: 1.5s
    window: 1m
    threshold: 3
    where: {a: {}, b: []}
  - name: fixed-bad
    metric: amount
    group_by: [ip]
    window: 1m
    threshold: 3
    window_type: fixed
    allowed_lateness: 1m
    where: [x]
  - name: bad-metric
    metric: sum
    field: ip
    group_by: [ip]
    window: 1m
    threshold: 20000
`
	_, err := config.ParseRules([]byte(yaml), "r.yaml")
	if err == nil {
		t.Fatal("ParseRules accepted a file with errors")
	}
	type key struct{ rule, field string }
	// A field that failed to decode gets no second error (a field of the
	// wrong type is not also missing, a window_type of the wrong type does
	// not make allowed_lateness wrong), and a field's place depends on the
	// metric only when the metric is known.
	got := map[key]int{}
	for _, fe := range fieldErrors(t, err) {
		got[key{fe.Rule, fe.Field}]++
	}
	want := map[key]int{
		{`"distinct-bad"`, "field"}: 1, {`"distinct-bad"`, "window_type"}: 1, {`"distinct-bad"`, "threshold"}: 1,
		{`"distinct-bad"`, "where.currency[1]"}: 1, {`"distinct-bad"`, "where.amount"}: 1,
		{`"count-bad"`, "field"}: 1, {`"count-bad"`, "allowed_lateness"}: 1,
		{`"count-bad"`, "where.a"}: 1, {`"count-bad"`, "where.b"}: 1,
		{`"fixed-bad"`, "allowed_lateness"}: 1, {`"fixed-bad"`, "where"}: 1,
		{`"bad-metric"`, "metric"}: 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors by (rule, field):\ngot  %v\nwant %v\n%v", got, want, err)
	}
}

func TestLoadRulesFeatures(t *testing.T) {
	set, err := config.LoadRuleSet("testdata/rules-features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := set.Rules
	// Every field its rules name beyond the schema is declared.
	if want := []string{"payment_method", "channel", "is_test", "risk_score"}; !slices.Equal(set.EventFields, want) {
		t.Errorf("EventFields = %q, want %q", set.EventFields, want)
	}
	if ws := config.FieldWarnings("testdata/rules-features.yaml", got, set.EventFields); len(ws) > 0 {
		t.Errorf("field warnings %q, want none", ws)
	}
	want := []rules.Rule{
		{
			Name: "orders-per-customer-1m", Metric: alert.Count, GroupBy: []string{"customer_id"},
			WindowType: alert.Fixed, Window: time.Minute, Threshold: 3, Cooldown: time.Minute,
			Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
		},
		{
			Name:        "cards-per-customer-10m",
			Description: "Four or more cards used by one customer within ten minutes, card payments only",
			Metric:      alert.Distinct, Field: "card_fingerprint", GroupBy: []string{"customer_id"},
			WindowType: alert.Sliding, Window: 10 * time.Minute, Lateness: time.Minute, Threshold: 4,
			Where: []rules.Condition{
				{Field: "currency", In: []string{"KRW", "USD"}},
				{Field: "payment_method", In: []string{"card"}},
			},
			Cooldown: 10 * time.Minute, Severity: alert.SeverityHigh, Mode: alert.ModeAlert, Enabled: true, Evidence: rules.DefaultEvidence,
		},
		{
			Name: "big-amount-per-ip-1h", Metric: alert.Amount, GroupBy: []string{"ip"},
			WindowType: alert.Sliding, Window: time.Hour, Lateness: 5 * time.Minute, Threshold: 50_000_000,
			Where: []rules.Condition{
				{Field: "amount", GTE: i64(10000), LT: i64(5000000)},
				{Field: "channel", In: []string{"web", "app"}, NotIn: []string{"kiosk"}, LTE: i64(9)},
				{Field: "payment_method", NotIn: []string{"gift_card", "points"}},
			},
			Cooldown: 0, Severity: alert.SeverityWarning, Mode: alert.ModeShadow, Enabled: true, Evidence: rules.DefaultEvidence,
		},
		{
			Name: "emails-per-device-1d", Metric: alert.Distinct, Field: "email", GroupBy: []string{"device_id"},
			WindowType: alert.Fixed, Window: 24 * time.Hour, Threshold: rules.MaxDistinctThreshold,
			Where: []rules.Condition{
				{Field: "is_test", NotIn: []string{"true"}},
				{Field: "risk_score", GT: i64(80)},
			},
			Cooldown: 24 * time.Hour, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: false, Evidence: rules.DefaultEvidence,
		},
	}
	if len(got) != len(want) {
		t.Fatalf("LoadRules gave %d rules, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("rule %d:\ngot  %+v where %s\nwant %+v where %s", i, got[i], conditions(got[i].Where), want[i], conditions(want[i].Where))
		}
	}
}

// manyFields is n distinct field names, comma-separated.
func manyFields(n int) string {
	fields := make([]string, n)
	for i := range fields {
		fields[i] = fmt.Sprintf("f%d", i)
	}
	return strings.Join(fields, ", ")
}

// The hint for a bare number is a value the field takes: the fix it
// suggests is not refused next (it suggested 500ms, below a window's 1s).
func TestBareNumberHintIsAccepted(t *testing.T) {
	hint := regexp.MustCompile(`needs a unit: (\S+) for seconds`)
	tests := []struct {
		name  string
		edits []string // the last one is the bare number
	}{
		{"window", []string{"window: 60"}},
		{"cooldown", []string{"cooldown: 600"}},
		{"allowed_lateness", []string{"window_type: sliding", "allowed_lateness: 60"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.ParseRules([]byte(oneRule(tt.edits...)), "rules.yaml")
			m := hint.FindStringSubmatch(fmt.Sprint(err))
			if m == nil {
				t.Fatalf("error %v suggests no value", err)
			}
			edits := slices.Clone(tt.edits)
			key, _, _ := strings.Cut(edits[len(edits)-1], ":")
			edits[len(edits)-1] = key + ": " + m[1]
			if _, err := config.ParseRules([]byte(oneRule(edits...)), "rules.yaml"); err != nil {
				t.Errorf("the suggested %s is refused: %v", m[1], err)
			}
		})
	}
}

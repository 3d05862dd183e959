package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
)

// check warns of a field a rule names that no documented event carries
// and the rules file does not declare, with the field it is most likely
// meant to be, and exits 0 as for every warning (docs/configuration.md,
// Event fields).
func TestCheckWarnsOfUnknownFields(t *testing.T) {
	typo := strings.Replace(testRules, "group_by: [customer_id]", "group_by: [custmer_id]", 1)
	own := strings.Replace(testRules, "group_by: [card_fingerprint]", "group_by: [merchant_id]\n    where: {payment_method: [card]}", 1)
	const not = " is neither a documented event field (docs/events.md) nor declared in event_fields: "
	tests := []struct {
		name, rules string
		// want are the warning lines, each after "warning: <rules file>: ".
		want []string
	}{
		{"documented fields", testRules, nil},
		{"a typo", typo, []string{`rule "orders-per-customer": group_by[0]: "custmer_id"` + not +
			"events lacking it skip the rule (did you mean customer_id?)"}},
		{"fields of the deployment's own", own, []string{
			`rule "amount-per-card": group_by[0]: "merchant_id"` + not + "events lacking it skip the rule",
			`rule "amount-per-card": where.payment_method: "payment_method"` + not + "events lacking it do not meet the condition, and skip the rule",
		}},
		{"declared", own + "event_fields: [merchant_id, payment_method]\n", nil},
		{"declared, and a typo", typo + "event_fields: [merchant_id]\n", []string{`rule "orders-per-customer": group_by[0]: "custmer_id"` + not +
			"events lacking it skip the rule (did you mean customer_id?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, "rules_file: rules.yaml\n", tt.rules)
			var stdout, stderr bytes.Buffer
			if code := run([]string{"check", "--config", path}, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit code %d, want 0\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "ok: 2 rules") {
				t.Fatalf("stdout lacks the summary: %s", stdout.String())
			}
			prefix := "warning: " + filepath.Join(filepath.Dir(path), "rules.yaml") + ": "
			var got []string
			for line := range strings.SplitSeq(stdout.String(), "\n") {
				if w, ok := strings.CutPrefix(line, "warning: "); ok {
					if !strings.HasPrefix(line, prefix) {
						t.Errorf("warning %q does not name the rules file", w)
					}
					got = append(got, strings.TrimPrefix(line, prefix))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// The rules fraudwatch ships name only fields of the schema: they warn of
// none.
func TestShippedRulesNameKnownFields(t *testing.T) {
	for _, path := range []string{deployDir + "/rules.yaml", "demo/rules.yaml"} {
		s, err := config.LoadRuleSet(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range config.FieldWarnings(path, s.Rules, s.EventFields) {
			t.Error(w)
		}
	}
}

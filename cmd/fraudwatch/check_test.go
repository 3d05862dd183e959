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

// check prints, a rule a line, the receivers its alerts reach, the routes
// that took them there and its links; a route naming a receiver the
// configuration lacks, a receiver no rule reaches and a route that
// matches no rule each fail it, named (docs/configuration.md, Routes).
func TestCheckShowsRoutes(t *testing.T) {
	const receivers = `rules_file: rules.yaml
receivers:
  - {name: slack, slack: {webhook_url: "https://hooks.slack.test/x"}}
  - {name: pager, pagerduty: {routing_key: pdkeysecret4711pdkeysecret4711ab}}
`
	const routes = `routes:
  - match: {rules: [amount-per-card]}
    receivers: [pager, slack]
default_receivers: [slack]
`
	linked := strings.Replace(testRules, "group_by: [card_fingerprint]",
		"group_by: [card_fingerprint]\n    links: [{text: Card, url: 'https://bo.test/cards/{card_fingerprint}'}]", 1)
	tests := []struct {
		name, config, rules string
		code                int
		want                []string // lines of stdout (code 0) or stderr
	}{
		{"routes", receivers, linked + routes, exitOK, []string{
			"RULE                 RECEIVERS     BY                 LINKS",
			"orders-per-customer  slack         default_receivers  -",
			"amount-per-card      pager, slack  routes[0]          Card https://bo.test/cards/{card_fingerprint}",
		}},
		{"no routes", "rules_file: rules.yaml\n", testRules, exitOK, []string{
			"orders-per-customer  log        every receiver (no routes)  -",
		}},
		{"an unknown receiver", receivers, testRules + strings.Replace(routes, "[pager, slack]", "[pager, slack, cases]", 1), exitUsage, []string{
			`rules.yaml: routes[0].receivers[2]: no receiver is named "cases" (the configuration's are slack, pager)`,
		}},
		{"a receiver no rule reaches", receivers, testRules + strings.Replace(routes, "[pager, slack]", "[slack]", 1), exitUsage, []string{
			`rules.yaml: routes: no rule's alerts reach receiver "pager": route a rule to it, or remove it from the configuration's receivers`,
		}},
		{"a route that matches no rule", receivers, testRules + strings.Replace(routes, "default_receivers",
			"  - {match: {severities: [info]}, receivers: [pager]}\ndefault_receivers", 1), exitUsage, []string{
			"rules.yaml: routes[1]: matches no rule",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.config, tt.rules)
			var stdout, stderr bytes.Buffer
			code := run([]string{"check", "--config", path}, &stdout, &stderr)
			out := stdout.String()
			if tt.code != exitOK {
				out = stderr.String()
			}
			if code != tt.code {
				t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w+"\n") {
					t.Errorf("output lacks the line %q:\n%s", w, out)
				}
			}
			if strings.Contains(stdout.String()+stderr.String(), "pdkeysecret4711pdkeysecret4711ab") {
				t.Errorf("check shows the routing key")
			}
		})
	}
}

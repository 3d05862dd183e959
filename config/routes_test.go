package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

// threeReceivers are a Slack, a PagerDuty and a webhook receiver.
const threeReceivers = `slack: {token: xoxb-1}
receivers:
  - {name: slack, slack: {}}
  - {name: pager, pagerduty: {routing_key: pdkeypdkeypdkeypdkeypdkeypdkey12}}
  - {name: cases, webhook: {url: "https://cases.test/", secrets: [` + whsec + `]}}
`

// threeRules adds a shadow rule to twoRules.
const threeRules = twoRules + `  - {name: quiet, metric: count, group_by: [ip], window: 1m, threshold: 9, mode: shadow}
`

// Routes are tried in order; the first that matches a rule stops the
// search unless it says continue: true; a rule no route matches goes to
// default_receivers; without routes every rule reaches every receiver.
func TestRouting(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name, routes string
		want         map[string][]string // rule -> receivers; nil: every receiver
	}{
		{"no routes", "", map[string][]string{"card-amount": nil, "burst": nil, "quiet": nil}},
		{"default only", "default_receivers: [slack, pager, cases]\n",
			map[string][]string{"card-amount": {"slack", "pager", "cases"}, "burst": {"slack", "pager", "cases"}, "quiet": {"slack", "pager", "cases"}}},
		{"continue", `routes:
  - match: {rules: [card-amount], severities: [critical], mode: alert}
    receivers: [pager, slack]
    continue: true
  - match: {severities: [warning, critical]}
    receivers: [slack, cases]
default_receivers: [slack]
`, map[string][]string{"card-amount": {"pager", "slack", "cases"}, "burst": {"slack", "cases"}, "quiet": {"slack", "cases"}}},
		{"the first match stops", `routes:
  - match: {severities: [critical]}
    receivers: [pager]
  - match: {mode: alert}
    receivers: [cases]
default_receivers: [slack]
`, map[string][]string{"card-amount": {"pager"}, "burst": {"cases"}, "quiet": {"slack"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadWith(t, threeReceivers, threeRules+tt.routes)
			if err != nil {
				t.Fatal(err)
			}
			for rule, want := range tt.want {
				if got := c.Routing[rule].Receivers; !reflect.DeepEqual(got, want) {
					t.Errorf("%s reaches %q, want %q", rule, got, want)
				}
			}
		})
	}
}

// Each mistake in routes fails Load (and so check and a reload) with one
// message naming the rules file's key.
func TestRouteErrors(t *testing.T) {
	const rest = "default_receivers: [slack]\n"
	tests := []struct {
		name, rules string
		want        []string
	}{
		{"an unknown receiver", "routes:\n  - {match: {rules: [card-amount]}, receivers: [pager, nobody]}\n  - {receivers: [cases, slack]}\n" + rest,
			[]string{`routes[0].receivers[1]: no receiver is named "nobody" (the configuration's are slack, pager, cases)`}},
		{"an unknown default", "routes:\n  - {receivers: [slack, pager, cases]}\ndefault_receivers: [slak]\n",
			[]string{`default_receivers[0]: no receiver is named "slak"`}},
		{"a receiver no route reaches", "routes:\n  - {match: {rules: [card-amount]}, receivers: [pager]}\n" + rest,
			[]string{`routes: no rule's alerts reach receiver "cases": route a rule to it, or remove it from the configuration's receivers`}},
		{"an unknown rule", "routes:\n  - {match: {rules: [card-amount, nope]}, receivers: [pager, cases]}\n" + rest,
			[]string{`routes[0].match.rules[1]: no rule is named "nope"`}},
		{"a route that matches no rule", "routes:\n  - {match: {severities: [info]}, receivers: [pager, cases]}\n" + rest,
			[]string{"routes[0]: matches no rule"}},
		{"a route never reached", "routes:\n  - {receivers: [pager, cases]}\n  - {match: {rules: [burst]}, receivers: [slack]}\n" + rest,
			[]string{"routes[1]: is never reached: the rules it matches (burst) stop at earlier routes, which have no continue: true"}},
		{"an alert rule that reaches nothing", "routes:\n  - {match: {rules: [card-amount]}, receivers: [slack, pager, cases]}\n",
			[]string{`rule "burst": no route matches it and there are no default_receivers: its alerts would reach no receiver`}},
		{"an unknown key", "routes:\n  - {receivers: [slack, pager, cases], continu: true}\n",
			[]string{"routes[0].continu: unknown key (did you mean routes[0].continue?)"}},
		{"a bad severity and mode", "routes:\n  - {match: {severities: [urgent], mode: loud}, receivers: [slack, pager, cases]}\n" + rest,
			[]string{`routes[0].match.severities[0]: must be info, warning, high or critical, not "urgent"`,
				`routes[0].match.mode: must be alert or shadow, not "loud"`}},
		{"no receivers", "routes:\n  - {match: {rules: [burst]}}\n" + rest, []string{"routes[0].receivers: names no receiver"}},
		{"a receiver twice", "routes:\n  - {receivers: [slack, pager, cases, slack]}\n",
			[]string{`routes[0].receivers[3]: repeats "slack"`}},
		{"a rule's link naming a field its alerts lack", strings.Replace(threeRules, "severity: critical}",
			"severity: critical, links: [{text: Customer, url: 'https://bo.test/c/{customer_id}'}]}", 1),
			[]string{`rule "card-amount": links[0]: link "Customer": {customer_id} is not a field its alerts carry`}},
		{"a rule's link with an unknown key", strings.Replace(threeRules, "severity: critical}",
			"severity: critical, links: [{text: Card, url: 'https://bo.test/c/{card_fingerprint}', urll: x}]}", 1),
			[]string{`rule "card-amount": links[0].urll: unknown key (did you mean links[0].url?)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			rules := tt.rules
			if !strings.HasPrefix(rules, "rules:") {
				rules = threeRules + rules
			}
			_, err := loadWith(t, threeReceivers, rules)
			wantMessages(t, err, tt.want...)
		})
	}
}

// A rule's links come with its routing; the version of a rules file
// changes with its routes and links, and stays rules.Version's without
// them.
func TestRoutingLinksAndVersion(t *testing.T) {
	clearEnv(t)
	withLinks := strings.Replace(threeRules, "severity: critical}",
		"severity: critical, links: [{text: 'Card {card_fingerprint}', url: 'https://bo.test/c/{card_fingerprint}'}]}", 1)
	c, err := loadWith(t, threeReceivers, withLinks)
	if err != nil {
		t.Fatal(err)
	}
	want := []alert.LinkTemplate{{Text: "Card {card_fingerprint}", URL: "https://bo.test/c/{card_fingerprint}"}}
	if got := c.Routing["card-amount"]; !reflect.DeepEqual(got.Links, want) || got.Receivers != nil {
		t.Errorf("card-amount's route %+v, want every receiver and links %v", got, want)
	}
	versions := map[string]string{}
	for name, rules := range map[string]string{
		"plain": threeRules, "links": withLinks, "routes": threeRules + "default_receivers: [slack, pager, cases]\n",
		"other routes": threeRules + "default_receivers: [cases, slack, pager]\n",
	} {
		s, err := ParseRuleSet([]byte(rules), "rules.yaml")
		if err != nil {
			t.Fatal(err)
		}
		versions[name] = s.Version()
		if name == "plain" && s.Version() != rulesVersion(s) {
			t.Errorf("a file without routes has version %s, want its rules' %s", s.Version(), rulesVersion(s))
		}
	}
	seen := map[string]string{}
	for name, v := range versions {
		if other, dup := seen[v]; dup {
			t.Errorf("%s and %s share version %s", name, other, v)
		}
		seen[v] = name
	}
}

// The route table shows, a rule a line, the receivers it reaches, the
// routes that took it there and its links, each receiver's after its
// name.
func TestRouteTable(t *testing.T) {
	clearEnv(t)
	cfg := strings.Replace(threeReceivers, "secrets: ["+whsec+"]}}",
		"secrets: ["+whsec+"]}, links: [{text: Customer, url: 'https://bo.test/c/{customer_id}'}]}", 1)
	rules := strings.Replace(threeRules, "severity: critical}",
		"severity: critical, links: [{text: Card, url: 'https://bo.test/k/{card_fingerprint}'}]}", 1) + `routes:
  - match: {severities: [critical]}
    receivers: [pager, slack]
    continue: true
  - match: {mode: alert}
    receivers: [cases]
default_receivers: [slack]
`
	c, err := loadWith(t, cfg, rules)
	if err != nil {
		t.Fatal(err)
	}
	want := `RULE         RECEIVERS            BY                    LINKS
card-amount  pager, slack, cases  routes[0], routes[1]  Card https://bo.test/k/{card_fingerprint}
burst        cases                routes[1]             cases: Customer https://bo.test/c/{customer_id}
quiet        slack                default_receivers     -
`
	if got := c.RouteTable(); got != want {
		t.Errorf("RouteTable()\n got:\n%s\nwant:\n%s", got, want)
	}
}

func rulesVersion(s RuleSet) string { return rules.Version(s.Rules) }

package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// whsec is a Standard Webhooks secret: whsec_ and the base64 of 32 bytes.
const whsec = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// twoRules is a rules file of a critical card rule and a warning customer
// rule, for receivers and routes to work with.
const twoRules = `rules:
  - {name: card-amount, metric: amount, group_by: [card_fingerprint], window: 10m, threshold: 1000, severity: critical}
  - {name: burst, metric: count, group_by: [customer_id], window: 1m, threshold: 3}
`

// loadWith loads a config file holding cfg (after rules_file:) beside a
// rules file holding rules.
func loadWith(t *testing.T, cfg, rules string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.yaml"), rules)
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, "rules_file: rules.yaml\n"+cfg)
	return Load(path)
}

// Without receivers:, the slack: section is the one receiver, named
// slack, or the log without a webhook or token: existing configurations
// deliver as before.
func TestReceiverListWithoutReceivers(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name, cfg string
		want      []Receiver
	}{
		{"no slack", "", []Receiver{{Name: "log", Kind: KindLog}}},
		{"a webhook", "slack: {webhook_url: https://hooks.slack.test/x}\n", []Receiver{{Name: "slack", Kind: KindSlack}}},
		{"a token", "slack: {token: xoxb-1, channel: '#risk'}\n", []Receiver{{Name: "slack", Kind: KindSlack}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadWith(t, tt.cfg, twoRules)
			if err != nil {
				t.Fatal(err)
			}
			got := c.ReceiverList()
			if len(got) != 1 || got[0].Name != tt.want[0].Name || got[0].Kind != tt.want[0].Kind {
				t.Fatalf("receivers %+v, want %+v", got, tt.want)
			}
			if got[0].Kind == KindSlack && !reflect.DeepEqual(*got[0].Slack, c.Slack) {
				t.Errorf("the slack receiver's settings %+v, want the section's %+v", *got[0].Slack, c.Slack)
			}
		})
	}
}

// receivers: with each kind, its secrets from the file, a variable or a
// file, the defaults of each kind, and a Slack receiver taking the
// section's token, channel and budgets where it gives none.
func TestReceiverListResolves(t *testing.T) {
	clearEnv(t)
	t.Setenv("TEST_PD_KEY", "pdroutingkey1pdroutingkey1pdrout")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.yaml"), twoRules)
	writeFile(t, filepath.Join(dir, "secrets", "hook"), whsec+"\n")
	writeFile(t, filepath.Join(dir, "body.tmpl"), `{"rule": "{{.Alert.Rule}}"}`)
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, fmt.Sprintf(`rules_file: rules.yaml
slack:
  token: xoxb-shared
  channel: "#fraud"
  rate: 2
receivers:
  - name: slack
    slack: {}
  - name: risk
    slack: {webhook_url: "https://hooks.slack.test/risk", burst: 7}
  - name: cases
    webhook:
      url: https://cases.example/hook
      secrets: [%s]
      secrets_file: [secrets/hook]
      template_file: body.tmpl
    links: [{text: Customer, url: "https://bo.example/customers/{customer_id}"}]
  - name: pager
    pagerduty: {routing_key_env: TEST_PD_KEY, url: "https://events.eu.pagerduty.com/v2/enqueue"}
`, whsec))
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := c.ReceiverList()
	shared := c.Slack
	risk := c.Slack
	risk.Token, risk.WebhookURL, risk.Burst = "", "https://hooks.slack.test/risk", 7
	want := []Receiver{
		{Name: "slack", Kind: KindSlack, Slack: &shared},
		{Name: "risk", Kind: KindSlack, Slack: &risk},
		{Name: "cases", Kind: KindWebhook, Webhook: &Webhook{URL: "https://cases.example/hook", Secrets: []Secret{whsec, whsec},
			Template: `{"rule": "{{.Alert.Rule}}"}`, TemplateFile: filepath.Join(dir, "body.tmpl"), ContentType: "application/json",
			Timeout: 10 * time.Second, Rate: 10, Burst: 20},
			Links: []alert.LinkTemplate{{Text: "Customer", URL: "https://bo.example/customers/{customer_id}"}}},
		{Name: "pager", Kind: KindPagerDuty, PagerDuty: &PagerDuty{RoutingKey: "pdroutingkey1pdroutingkey1pdrout",
			URL: "https://events.eu.pagerduty.com/v2/enqueue", Timeout: 10 * time.Second, Rate: 1.5, Burst: 10}},
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			t.Errorf("got  %#v %+v %+v %+v", got[i], got[i].Slack, got[i].Webhook, got[i].PagerDuty)
		}
		for i := range want {
			t.Errorf("want %#v %+v %+v %+v", want[i], want[i].Slack, want[i].Webhook, want[i].PagerDuty)
		}
	}
	if got[0].Slack.Mode() != SlackToken || got[1].Slack.Mode() != SlackWebhook {
		t.Errorf("modes %s, %s; want token, webhook", got[0].Slack.Mode(), got[1].Slack.Mode())
	}
	if l := got[2].LinksFor([]string{"card_fingerprint"}); l != nil {
		t.Errorf("a card rule's alerts fill the customer link: %v", l)
	}
	if l := got[2].LinksFor([]string{"customer_id"}); len(l) != 1 {
		t.Errorf("a customer rule's alerts lack the customer link: %v", l)
	}
	if s := c.Summary(); !strings.HasSuffix(s, "alerts to 4 receivers: slack (slack bot token to #fraud), risk (slack webhook), cases (webhook), pager (pagerduty)") {
		t.Errorf("summary %q does not list the receivers", s)
	}
}

// Each problem of receivers: fails Load with one message naming the key,
// never the secret.
func TestReceiverErrors(t *testing.T) {
	const pd = "pagerduty: {routing_key: pdkeysecretpdkeysecretpdkeysecre}"
	tests := []struct {
		name, cfg string
		env       map[string]string
		want      []string
	}{
		{"duplicate names", "receivers:\n  - {name: a, " + pd + "}\n  - {name: a, " + pd + "}\n",
			nil, []string{`receivers[1].name: "a" is the name of receivers[0] too: names must be unique`}},
		{"no name", "receivers:\n  - {" + pd + "}\n", nil, []string{"receivers[0].name: is required"}},
		{"a bad name", "receivers:\n  - {name: 1st, " + pd + "}\n", nil,
			[]string{`receivers[0].name: receiver name "1st": must be 1 to 32 of a-z, 0-9, - and _, a letter first`}},
		{"no kind", "receivers:\n  - {name: a}\n", nil, []string{"receivers[0]: needs one of slack:, webhook: or pagerduty:"}},
		{"two kinds", "receivers:\n  - {name: a, " + pd + ", slack: {token: xoxb-1}}\n", nil,
			[]string{"receivers[0]: has 2 of slack:, webhook: and pagerduty:: a receiver is one kind"}},
		{"an empty list", "receivers: []\n", nil, []string{"receivers: lists no receivers: remove it to deliver through the slack: section"}},
		{"an unknown key", "receivers:\n  - {name: a, webhook: {urll: https://x.test}}\n", nil,
			[]string{"receivers[0].webhook.urll: unknown key (did you mean receivers[0].webhook.url?)"}},
		{"a webhook without url or secret", "receivers:\n  - {name: a, webhook: {}}\n", nil, []string{
			"receivers[0].webhook.url: is required",
			"receivers[0].webhook.secrets: is required: at least one Standard Webhooks secret"}},
		{"a webhook secret that is none", "receivers:\n  - {name: a, webhook: {url: https://x.test, secrets: [hunter2-secret]}}\n", nil,
			[]string{"receivers[0].webhook.secrets[0]: is not a Standard Webhooks secret: whsec_ and the base64 of 24 to 64 random bytes"}},
		{"a template that does not parse", "receivers:\n  - {name: a, webhook: {url: https://x.test, secrets: [" + whsec + "], template: '{{.Rule'}}\n", nil,
			[]string{"receivers[0].webhook.template: template does not parse: template: body:1: unclosed action"}},
		{"a template twice", "receivers:\n  - {name: a, webhook: {url: https://x.test, secrets: [" + whsec + "], template: x, template_file: y}}\n", nil,
			[]string{"receivers[0].webhook.template_file: template and template_file are both set",
				"receivers[0].webhook.template_file: open"}},
		{"no routing key", "receivers:\n  - {name: a, pagerduty: {}}\n", nil,
			[]string{"receivers[0].pagerduty.routing_key: is required (or routing_key_env, routing_key_file)"}},
		{"a routing key's variable unset", "receivers:\n  - {name: a, pagerduty: {routing_key_env: TEST_UNSET_KEY}}\n", nil,
			[]string{"receivers[0].pagerduty.routing_key_env: the environment variable TEST_UNSET_KEY is not set"}},
		{"a routing key's file missing", "receivers:\n  - {name: a, pagerduty: {routing_key_file: nope/key}}\n", nil,
			[]string{"receivers[0].pagerduty.routing_key_file: open "}},
		{"a routing key two ways", "receivers:\n  - {name: a, pagerduty: {routing_key: pd-key-secret, routing_key_env: TEST_PD}}\n",
			map[string]string{"TEST_PD": "pd-key-secret"},
			[]string{"receivers[0].pagerduty.routing_key: is given more than one way (routing_key, routing_key_env, routing_key_file): give one"}},
		{"a key with white space from a variable", "receivers:\n  - {name: a, pagerduty: {routing_key_env: TEST_PD}}\n",
			map[string]string{"TEST_PD": "pd-key-secret "},
			[]string{"receivers[0].pagerduty.routing_key: has leading or trailing white space (set by TEST_PD)"}},
		{"a budget past PagerDuty's", "receivers:\n  - {name: a, pagerduty: {routing_key: pdkeysecretpdkeysecretpdkeysecre, rate: 3, burst: 500}}\n", nil,
			[]string{"receivers[0].pagerduty.rate: must be a number of messages a second above 0 and at most 2, got 3",
				"receivers[0].pagerduty.burst: must be 1 to 120 messages, got 500"}},
		{"a slack receiver with no way to post", "receivers:\n  - {name: a, slack: {channel: '#x'}}\n", nil,
			[]string{"receivers[0].slack: needs webhook_url or token (or slack.token, which receivers without either take)"}},
		{"a slack receiver with both", "receivers:\n  - {name: a, slack: {webhook_url: https://h.test/x, token: xoxb-1}}\n", nil,
			[]string{"receivers[0].slack.token: webhook_url and token are both set"}},
		{"the section's webhook with receivers", "slack: {webhook_url: https://h.test/x}\nreceivers:\n  - {name: a, " + pd + "}\n", nil,
			[]string{"slack.webhook_url: with receivers:, a Slack incoming webhook belongs to a receiver"}},
		{"the section's token unused", "slack: {token: xoxb-1}\nreceivers:\n  - {name: a, " + pd + "}\n", nil,
			[]string{"slack.token: no receiver takes it"}},
		{"buttons without a bot", "slack: {signing_secret: s, interactions_listen: '127.0.0.1:9591'}\nreceivers:\n  - {name: a, " + pd + "}\n", nil,
			[]string{"slack.interactions_listen: needs a slack receiver in bot-token mode"}},
		{"a receiver's link", "receivers:\n  - {name: a, " + pd + ", links: [{text: Order, url: 'ftp://bo.test/{order_id}'}]}\n", nil,
			[]string{`receivers[0].links[0]: link "Order": url "ftp://bo.test/{order_id}" is not an absolute http(s) URL`}},
		{"receivers from the environment", "", map[string]string{"FRAUDWATCH_RECEIVERS": "a,b"},
			[]string{"receivers: is a list the environment cannot set: write it in the file, and its secrets' variables in its …_env keys (set by FRAUDWATCH_RECEIVERS)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := loadWith(t, tt.cfg, twoRules)
			wantMessages(t, err, tt.want...)
			if err != nil && (strings.Contains(err.Error(), "pd-key-secret") || strings.Contains(err.Error(), "pdkeysecret")) {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

// What a receiver itself refuses at run, Load (and so check) refuses:
// the receiver's own check runs on settings that read well.
func TestReceiversOwnChecks(t *testing.T) {
	five := strings.Repeat(whsec+", ", 4) + whsec
	tests := []struct{ name, cfg, want string }{
		{"a routing key not 32 letters and digits", "receivers:\n  - {name: pager, pagerduty: {routing_key: pdkeysecretpdkeysecretpdkeysec}}\n",
			"receivers[0]: pagerduty pager: routing_key must be an integration key of 32 letters and digits (it is 30 characters)"},
		{"five webhook secrets", "receivers:\n  - {name: cases, webhook: {url: https://x.test, secrets: [" + five + "]}}\n",
			"receivers[0]: webhook cases:"},
		{"credentials in a webhook's URL", "receivers:\n  - {name: cases, webhook: {url: \"https://u:p@x.test/h\", secrets: [" + whsec + "]}}\n",
			"receivers[0]: webhook cases:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			_, err := loadWith(t, tt.cfg, twoRules)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, want an error with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pdkeysecret") || strings.Contains(err.Error(), whsec[6:]) {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

// A Config with receivers, printed or logged whole, shows no secret of
// theirs, nor does its resolved list.
func TestReceiverSecretsNeverPrinted(t *testing.T) {
	clearEnv(t)
	t.Setenv("TEST_PD_KEY", "pdroutingkeysecretpdroutingkeyse")
	c, err := loadWith(t, `slack: {token: xoxb-shared-secret}
receivers:
  - {name: slack, slack: {channel: "#x"}}
  - {name: hook, slack: {webhook_url: "https://hooks.slack.test/hook-secret"}}
  - {name: cases, webhook: {url: "https://cases.test/", secrets: [`+whsec+`]}}
  - {name: pager, pagerduty: {routing_key_env: TEST_PD_KEY}}
`, twoRules)
	if err != nil {
		t.Fatal(err)
	}
	list := c.ReceiverList()
	for _, v := range []any{c, *c, list, list[1], list[2].Webhook, list[3].PagerDuty} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			out := fmt.Sprintf(verb, v)
			for _, secret := range []string{"xoxb-shared-secret", "hook-secret", whsec[6:], "pdroutingkeysecretpdroutingkeyse"} {
				if strings.Contains(out, secret) {
					t.Errorf("%s of %T shows %q", verb, v, secret)
				}
			}
		}
	}
}

// A template that parses but cannot render an alert (a field the body
// does not have) is refused by config as the webhook receiver would refuse
// it: config checks with the receiver's own check.
func TestWebhookTemplateCheckedAsTheReceiverDoes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, "receivers:\n  - {name: a, webhook: {url: https://x.test, secrets: ["+whsec+"], template: '{{.Rule}}'}}\n")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "receivers[0].webhook.template: template does not render an alert") {
		t.Fatalf("Load = %v, want the template refused: the body has no .Rule", err)
	}
}

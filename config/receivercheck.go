package config

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/pagerduty"
	"github.com/fraudwatch/fraudwatch/alert/webhook"
	"github.com/fraudwatch/fraudwatch/lua"
)

// This file checks and resolves the receivers: list (receivers.go).

// webhookSecretPrefix starts a Standard Webhooks secret; base64 of the key
// follows it.
const webhookSecretPrefix = "whsec_"

// receivers checks the receivers: list and how the slack: section goes
// with it.
func (k *checker) receivers() {
	c := k.c
	if c.Receivers == nil {
		return
	}
	list := k.receiverList()
	if len(c.Receivers) == 0 {
		k.bad("receivers", "lists no receivers: remove it to deliver through the slack: section")
	}
	seen := map[string]int{}
	for i, r := range c.Receivers {
		if prev, dup := seen[r.Name]; dup && r.Name != "" {
			k.bad(fmt.Sprintf("receivers[%d].name", i), "%q is the name of receivers[%d] too: names must be unique", r.Name, prev)
			continue
		}
		seen[r.Name] = i
	}
	// With receivers:, the slack: section is their defaults: a webhook
	// there would be nobody's, and so would a token no receiver takes.
	if c.Slack.WebhookURL != "" {
		k.bad("slack.webhook_url", "with receivers:, a Slack incoming webhook belongs to a receiver (receivers[].slack.webhook_url): move it there")
	}
	tokenUsed, buttons := false, false
	for _, r := range c.Receivers {
		if r.Slack != nil && r.Slack.WebhookURL == "" && r.Slack.WebhookURLEnv == "" && r.Slack.WebhookURLFile == "" &&
			r.Slack.Token == "" && r.Slack.TokenEnv == "" && r.Slack.TokenFile == "" {
			tokenUsed = true
		}
	}
	for _, r := range list {
		if r.Kind == KindSlack && r.Slack.Mode() == SlackToken {
			buttons = true
		}
	}
	if c.Slack.Token != "" && !tokenUsed {
		k.bad("slack.token", "no receiver takes it: with receivers:, it is the bot token of each slack receiver that sets no token or webhook_url of its own")
	}
	if c.Slack.InteractionsListen != "" && !buttons {
		k.bad("slack.interactions_listen", "needs a slack receiver in bot-token mode: buttons update their messages in bot-token mode only")
	}
}

// receiver resolves receivers[i]; ok is false when it has a problem,
// reported to k.
func (k *checker) receiver(i int, spec *ReceiverSpec) (_ Receiver, ok bool) {
	before := len(k.errs)
	at := fmt.Sprintf("receivers[%d]", i)
	r := Receiver{Name: spec.Name, Links: spec.Links}
	if spec.Name == "" {
		k.bad(at+".name", "is required")
	} else if err := lua.ValidReceiver(spec.Name); err != nil {
		k.bad(at+".name", "%v", err)
	}
	kinds := 0
	if spec.Slack != nil {
		kinds++
		r.Kind, r.Slack = KindSlack, k.slackReceiver(at+".slack", spec.Slack)
	}
	if spec.Webhook != nil {
		kinds++
		r.Kind, r.Webhook = KindWebhook, k.webhook(at+".webhook", spec.Webhook)
	}
	if spec.PagerDuty != nil {
		kinds++
		r.Kind, r.PagerDuty = KindPagerDuty, k.pagerDuty(at+".pagerduty", spec.PagerDuty)
	}
	switch {
	case kinds == 0:
		k.bad(at, "needs one of slack:, webhook: or pagerduty:")
	case kinds > 1:
		k.bad(at, "has %d of slack:, webhook: and pagerduty:: a receiver is one kind; make one receiver of each", kinds)
	case len(k.errs) == before:
		// Read well: the receiver's own check, so that check refuses what
		// run would (one rule, the receiver's).
		if err := ownCheck(r); err != nil {
			k.bad(at, "%v", err)
		}
	}
	for j, l := range spec.Links {
		// Its form only: whether a rule's alerts fill its placeholders
		// is a matter of the rule (LinksFor leaves it out of the others).
		if err := l.Check(placeholders(l)); err != nil {
			k.bad(fmt.Sprintf("%s.links[%d]", at, j), "%v", err)
		}
	}
	return r, len(k.errs) == before
}

// placeholderRE is alert.LinkTemplate's {field}.
var placeholderRE = regexp.MustCompile(`\{([a-z][a-z0-9_]{0,63})\}`)

// placeholders are the fields a link template names.
func placeholders(l alert.LinkTemplate) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(l.URL+l.Text, -1) {
		out = append(out, m[1])
	}
	return out
}

func (k *checker) slackReceiver(at string, s *SlackSpec) *Slack {
	out := k.c.Slack // the section's keys are the defaults
	out.WebhookURL = k.secret(at+".webhook_url", s.WebhookURL, s.WebhookURLEnv, s.WebhookURLFile)
	if tok := k.secret(at+".token", s.Token, s.TokenEnv, s.TokenFile); tok != "" || out.WebhookURL != "" {
		out.Token = tok
	}
	if s.Channel != "" {
		out.Channel = s.Channel
	}
	if s.APIURL != "" {
		out.APIURL = s.APIURL
	}
	set(&out.Timeout, s.Timeout)
	set(&out.Rate, s.Rate)
	set(&out.Burst, s.Burst)
	set(&out.OverallRate, s.OverallRate)
	set(&out.OverallBurst, s.OverallBurst)
	set(&out.DigestSize, s.DigestSize)
	switch {
	case out.WebhookURL != "" && out.Token != "":
		k.bad(at+".token", "webhook_url and token are both set: a receiver posts through one of them, remove the other")
	case out.WebhookURL == "" && out.Token == "":
		k.bad(at, "needs webhook_url or token (or slack.token, which receivers without either take)")
	}
	k.slackSettings(at+".", &out)
	return &out
}

// ownCheck is the receiver's own Validate, on the settings read.
func ownCheck(r Receiver) error {
	switch {
	case r.Webhook != nil:
		w := r.Webhook
		secrets := make([]string, len(w.Secrets))
		for i, s := range w.Secrets {
			secrets[i] = s.Value()
		}
		return webhook.Config{Name: r.Name, URL: w.URL, Secrets: secrets, Template: w.Template,
			ContentType: w.ContentType, Timeout: w.Timeout}.Validate()
	case r.PagerDuty != nil:
		p := r.PagerDuty
		return pagerduty.Config{Name: r.Name, RoutingKey: p.RoutingKey.Value(), URL: p.URL, Timeout: p.Timeout}.Validate()
	}
	return nil
}

func (k *checker) webhook(at string, s *WebhookSpec) *Webhook {
	w := &Webhook{URL: s.URL, Template: s.Template, ContentType: s.ContentType, Timeout: defaultReceiverTimeout,
		Rate: DefaultWebhookRate, Burst: DefaultWebhookBurst}
	set(&w.Timeout, s.Timeout)
	set(&w.Rate, s.Rate)
	set(&w.Burst, s.Burst)
	if w.ContentType == "" {
		w.ContentType = DefaultWebhookContentType
	}
	switch {
	case s.URL == "":
		k.bad(at+".url", "is required")
	case !httpURL(s.URL):
		k.bad(at+".url", "is not an http(s) URL")
	}
	w.Secrets = append(w.Secrets, s.Secrets...)
	for j, name := range s.SecretsEnv {
		w.Secrets = append(w.Secrets, k.secret(fmt.Sprintf("%s.secrets_env[%d]", at, j), "", name, ""))
	}
	for j, path := range s.SecretsFile {
		w.Secrets = append(w.Secrets, k.secret(fmt.Sprintf("%s.secrets_file[%d]", at, j), "", "", path))
	}
	if len(w.Secrets) == 0 {
		k.bad(at+".secrets", "is required: at least one Standard Webhooks secret (whsec_…), in secrets, secrets_env or secrets_file")
	}
	for j, sec := range w.Secrets {
		if sec != "" && !webhookSecret(sec) {
			// Never quoted: it is the secret.
			k.bad(fmt.Sprintf("%s.secrets[%d]", at, j), "is not a Standard Webhooks secret: whsec_ and the base64 of 24 to 64 random bytes")
		}
	}
	if s.Template != "" && s.TemplateFile != "" {
		k.bad(at+".template_file", "template and template_file are both set: give the body's template one way")
	}
	if s.TemplateFile != "" {
		w.TemplateFile = k.path(s.TemplateFile)
		if b, err := os.ReadFile(w.TemplateFile); err != nil {
			k.bad(at+".template_file", "%v", err)
		} else {
			w.Template = string(b)
		}
	}
	if w.Template != "" {
		if err := webhook.CheckTemplate(w.Template); err != nil {
			k.bad(at+".template", "%v", err)
		}
	}
	k.positive(at+".timeout", w.Timeout)
	k.budget(at, w.Rate, w.Burst, 1000, 100000)
	return w
}

func (k *checker) pagerDuty(at string, s *PagerDutySpec) *PagerDuty {
	p := &PagerDuty{URL: s.URL, Timeout: defaultReceiverTimeout, Rate: DefaultPagerDutyRate, Burst: DefaultPagerDutyBurst}
	set(&p.Timeout, s.Timeout)
	set(&p.Rate, s.Rate)
	set(&p.Burst, s.Burst)
	if p.URL == "" {
		p.URL = DefaultPagerDutyURL
	} else if !httpURL(p.URL) {
		k.bad(at+".url", "is not an http(s) URL")
	}
	p.RoutingKey = k.secret(at+".routing_key", s.RoutingKey, s.RoutingKeyEnv, s.RoutingKeyFile)
	if p.RoutingKey == "" && s.RoutingKeyEnv == "" && s.RoutingKeyFile == "" {
		k.bad(at+".routing_key", "is required (or routing_key_env, routing_key_file): the integration key of an Events API v2 service")
	}
	k.positive(at+".timeout", p.Timeout)
	// Past PagerDuty's 120 events a minute a key, its 429s would hold the
	// receiver's alerts back rather than speed them up.
	k.budget(at, p.Rate, p.Burst, MaxPagerDutyRate, 120)
	return p
}

// budget checks a receiver's rate (messages a second) and burst.
func (k *checker) budget(at string, rate float64, burst int, maxRate float64, maxBurst int) {
	if !(rate > 0 && rate <= maxRate) {
		k.bad(at+".rate", "must be a number of messages a second above 0 and at most %v, got %v", maxRate, rate)
	}
	if burst < 1 || burst > maxBurst {
		k.bad(at+".burst", "must be 1 to %d messages, got %d", maxBurst, burst)
	}
}

// secret resolves a secret written inline, named by an environment
// variable (env) or by a file holding it (file, a trailing line break
// dropped): at most one of them. Problems name field, never the value.
func (k *checker) secret(field string, inline Secret, env, file string) Secret {
	given := 0
	for _, s := range []string{inline.Value(), env, file} {
		if s != "" {
			given++
		}
	}
	if given > 1 {
		k.bad(field, "is given more than one way (%s, %s_env, %s_file): give one", last(field), last(field), last(field))
		return ""
	}
	v, from := inline, ""
	switch {
	case env != "":
		from = env
		v = Secret(os.Getenv(env))
		if v == "" {
			k.bad(field+"_env", "the environment variable %s is not set", env)
			return ""
		}
	case file != "":
		b, err := os.ReadFile(k.path(file))
		if err != nil {
			k.bad(field+"_file", "%v", err)
			return ""
		}
		v = Secret(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
		if v == "" {
			k.bad(field+"_file", "%s is empty", file)
			return ""
		}
	}
	if trimmed(v) {
		e := &FieldError{File: k.c.displayName(), Field: field, Env: from, Msg: "has leading or trailing white space"}
		k.errs = append(k.errs, e)
	}
	return v
}

// path resolves a path against the config file's directory.
func (k *checker) path(p string) string {
	if filepath.IsAbs(p) || k.c.File == "" {
		return p
	}
	return filepath.Join(filepath.Dir(k.c.File), p)
}

func webhookSecret(s Secret) bool {
	b64, ok := strings.CutPrefix(s.Value(), webhookSecretPrefix)
	if !ok {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	return err == nil && len(key) >= 24 && len(key) <= 64
}

// set copies *v over *dst when the file gave it.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func last(field string) string {
	return field[strings.LastIndexByte(field, '.')+1:]
}

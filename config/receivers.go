package config

import (
	"fmt"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/pagerduty"
)

// ReceiverKind is what a receiver delivers alerts through.
type ReceiverKind string

// Receiver kinds. KindLog is the receiver of a configuration that sets
// none: the log.
const (
	KindSlack     ReceiverKind = "slack"
	KindWebhook   ReceiverKind = "webhook"
	KindPagerDuty ReceiverKind = "pagerduty"
	KindLog       ReceiverKind = "log"
)

// Names of the one receiver a configuration without receivers: has.
const (
	LegacySlackReceiver = "slack"
	LegacyLogReceiver   = "log"
)

// Defaults of the webhook and PagerDuty receivers.
const (
	DefaultPagerDutyURL = pagerduty.DefaultURL
	// PagerDuty takes about 120 events a minute per integration key and
	// answers 429 past it: 1.5 a second with 10 at once stays under it
	// (at most 100 in any minute), with room for the acknowledge and
	// resolve events of the same key.
	DefaultPagerDutyRate  = pagerduty.BudgetRate
	DefaultPagerDutyBurst = pagerduty.BudgetBurst
	// MaxPagerDutyRate is PagerDuty's 120 events a minute.
	MaxPagerDutyRate = 2.0

	DefaultWebhookContentType = "application/json"
	DefaultWebhookRate        = 10
	DefaultWebhookBurst       = 20

	defaultReceiverTimeout = 10 * time.Second
)

// ReceiverSpec is one item of the config file's receivers: list, as
// written: a name and exactly one of slack, webhook and pagerduty. A
// secret is written inline, or named by an environment variable (…_env)
// or a file (…_file) that holds it. ReceiverList gives them resolved.
type ReceiverSpec struct {
	Name      string               `mapstructure:"name"`
	Slack     *SlackSpec           `mapstructure:"slack"`
	Webhook   *WebhookSpec         `mapstructure:"webhook"`
	PagerDuty *PagerDutySpec       `mapstructure:"pagerduty"`
	Links     []alert.LinkTemplate `mapstructure:"links"`
}

// SlackSpec is a Slack receiver as written. A key it does not set takes
// the slack: section's value (its default channel, API URL, timeout,
// budgets and bot token), except webhook_url: an incoming webhook posts
// to one channel, so each receiver names its own.
type SlackSpec struct {
	WebhookURL     Secret         `mapstructure:"webhook_url"`
	WebhookURLEnv  string         `mapstructure:"webhook_url_env"`
	WebhookURLFile string         `mapstructure:"webhook_url_file"`
	Token          Secret         `mapstructure:"token"`
	TokenEnv       string         `mapstructure:"token_env"`
	TokenFile      string         `mapstructure:"token_file"`
	Channel        string         `mapstructure:"channel"`
	APIURL         string         `mapstructure:"api_url"`
	Timeout        *time.Duration `mapstructure:"timeout"`
	Rate           *float64       `mapstructure:"rate"`
	Burst          *int           `mapstructure:"burst"`
	OverallRate    *float64       `mapstructure:"overall_rate"`
	OverallBurst   *int           `mapstructure:"overall_burst"`
	DigestSize     *int           `mapstructure:"digest_size"`
}

// WebhookSpec is a webhook receiver as written.
type WebhookSpec struct {
	URL string `mapstructure:"url"`
	// Secrets are Standard Webhooks secrets ("whsec_" and base64): each
	// signs every request, so that a receiver can take the new one while
	// a secret rotates. Secrets, SecretsEnv and SecretsFile add up.
	Secrets      []Secret       `mapstructure:"secrets"`
	SecretsEnv   []string       `mapstructure:"secrets_env"`
	SecretsFile  []string       `mapstructure:"secrets_file"`
	Template     string         `mapstructure:"template"`
	TemplateFile string         `mapstructure:"template_file"`
	ContentType  string         `mapstructure:"content_type"`
	Timeout      *time.Duration `mapstructure:"timeout"`
	Rate         *float64       `mapstructure:"rate"`
	Burst        *int           `mapstructure:"burst"`
}

// PagerDutySpec is a PagerDuty receiver as written.
type PagerDutySpec struct {
	RoutingKey     Secret         `mapstructure:"routing_key"`
	RoutingKeyEnv  string         `mapstructure:"routing_key_env"`
	RoutingKeyFile string         `mapstructure:"routing_key_file"`
	URL            string         `mapstructure:"url"`
	Timeout        *time.Duration `mapstructure:"timeout"`
	Rate           *float64       `mapstructure:"rate"`
	Burst          *int           `mapstructure:"burst"`
}

// Receiver is a receiver resolved: its secrets read, its defaults
// applied. The field of its Kind is set, the others are nil.
type Receiver struct {
	Name string
	Kind ReceiverKind
	// Links are the receiver's own link templates; LinksFor gives those
	// a rule's alerts fill.
	Links []alert.LinkTemplate
	// Slack is the whole slack: section as this receiver sees it: its own
	// keys over the section's, with the section's signing_secret and
	// interactions_listen. Mode says webhook or token.
	Slack     *Slack
	Webhook   *Webhook
	PagerDuty *PagerDuty
}

// Webhook is a webhook receiver's settings.
type Webhook struct {
	URL     string
	Secrets []Secret
	// Template is the body's text/template ("" for the documented JSON
	// body), read from TemplateFile when the file named one.
	Template     string
	TemplateFile string
	ContentType  string
	Timeout      time.Duration
	Rate         float64
	Burst        int
}

// PagerDuty is a PagerDuty Events API v2 receiver's settings.
type PagerDuty struct {
	RoutingKey Secret
	URL        string
	Timeout    time.Duration
	Rate       float64
	Burst      int
}

// LinksFor are the receiver's links that the alerts of a rule grouping by
// groupBy fill: a link naming a field they lack is left out.
func (r Receiver) LinksFor(groupBy []string) []alert.LinkTemplate {
	var out []alert.LinkTemplate
	for _, l := range r.Links {
		if l.Check(groupBy) == nil {
			out = append(out, l)
		}
	}
	return out
}

// ReceiverList is where alerts go: the receivers: list resolved, in its
// order, or, without one, the one receiver of the slack: section
// (LegacySlackReceiver), or the log (LegacyLogReceiver) when that sets no
// webhook or token. It reads the secrets' variables and files at each
// call (Load checked them): call it once, at start. A receiver with a
// problem (which Validate reports) is left out.
//
// The Config keeps no resolved copy: printed, a secret in an unexported
// field would escape Secret's redaction.
func (c *Config) ReceiverList() []Receiver {
	k := &checker{c: c}
	return k.receiverList()
}

// receiverList resolves the receivers, reporting each problem to k.
func (k *checker) receiverList() []Receiver {
	c := k.c
	if c.Receivers == nil {
		if c.Slack.Mode() == SlackOff {
			return []Receiver{{Name: LegacyLogReceiver, Kind: KindLog}}
		}
		s := c.Slack
		return []Receiver{{Name: LegacySlackReceiver, Kind: KindSlack, Slack: &s}}
	}
	out := make([]Receiver, 0, len(c.Receivers))
	for i := range c.Receivers {
		if r, ok := k.receiver(i, &c.Receivers[i]); ok {
			out = append(out, r)
		}
	}
	return out
}

// Format implements fmt.Formatter. Printed with a verb that does not fit
// a pointer (%s), fmt would show the settings a receiver points to
// without the redaction of their Secrets: here they are printed as the
// values they are, whatever the verb.
func (r Receiver) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "{Name:%s Kind:%s Links:%v Slack:%s Webhook:%s PagerDuty:%s}",
		r.Name, r.Kind, r.Links, deref(r.Slack), deref(r.Webhook), deref(r.PagerDuty))
}

// Format implements fmt.Formatter, as Receiver's does.
func (r ReceiverSpec) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "{Name:%s Links:%v Slack:%s Webhook:%s PagerDuty:%s}",
		r.Name, r.Links, deref(r.Slack), deref(r.Webhook), deref(r.PagerDuty))
}

// deref renders what p points to, <nil> for nil.
func deref[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%+v", *p)
}

// Package slack delivers alerts to Slack, through an incoming webhook or a
// bot token posting with chat.postMessage (slack-go), as Block Kit messages
// with a plain-text fallback (Format). Its errors tell the dispatcher what
// to do (alert.RetryPolicy): a message Slack refuses as such is given up, a
// rate limit waits for its Retry-After, everything else is retried.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Config selects one of Slack's two ways in: an incoming webhook, or a bot
// token posting with chat.postMessage. Its values come checked from package
// config (slack.*); Validate only catches a notifier wired without a way
// in, a channel or a timeout, or with a URL New could not use.
type Config struct {
	// WebhookURL is an incoming-webhook URL. It is a secret: whoever holds
	// it can post to the channel.
	WebhookURL string
	// Token is a bot token (xoxb-…), used with Channel.
	Token string
	// Channel is the default channel of token mode; a rule's channel
	// overrides it. Webhooks post to the channel they were created for.
	Channel string
	// APIURL overrides the Web API base URL (a proxy, a test server); ""
	// is slack-go's, Slack's own.
	APIURL string
	// Timeout bounds one HTTP request when HTTPClient is not given.
	Timeout time.Duration
	// HTTPClient, when set, is used as is.
	HTTPClient *http.Client
	// Buttons adds "Snooze … 1 h", "… 24 h" and "Acknowledge" to each
	// alert: token mode with interactivity set up (Interactions).
	Buttons bool
	// Name is the receiver's name (alert.Notifier), ReceiverName unless
	// set: a configuration with several Slack receivers names each.
	Name string
}

func (c *Config) setDefaults() {
	c.Channel = strings.TrimSpace(c.Channel)
	if c.Token != "" {
		if c.APIURL == "" {
			c.APIURL = slack.APIURL
		}
		// slack-go appends the method name to the base URL as is.
		if !strings.HasSuffix(c.APIURL, "/") {
			c.APIURL += "/"
		}
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.Timeout}
	}
}

// Validate reports a notifier that cannot post. Messages name the setting,
// never its value: the webhook URL and the token are secrets.
func (c *Config) Validate() error {
	switch {
	case (c.WebhookURL == "") == (c.Token == ""):
		return errors.New("slack: set exactly one of webhook_url and token")
	case c.Token != "" && strings.TrimSpace(c.Channel) == "":
		return errors.New("slack: token mode needs a channel")
	case c.HTTPClient == nil && c.Timeout <= 0:
		return errors.New("slack: a request timeout is required")
	}
	if _, err := url.Parse(c.WebhookURL); err != nil {
		return errors.New("slack: webhook_url is not a URL")
	}
	if _, err := url.Parse(c.APIURL); err != nil {
		return errors.New("slack: api_url is not a URL")
	}
	return nil
}

// Notifier posts alerts to a Slack channel.
type Notifier struct {
	cfg Config
	api *slack.Client // nil in webhook mode
	// target names where requests go, safe for error messages; base is
	// the Web API's (token mode), to which a method's name is added.
	target, base string
	// secrets must never appear in an error message.
	secrets []string
}

// New returns a Slack notifier. It makes no request: a bad token or an
// unknown channel shows on the first alert.
func New(cfg Config) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	n := &Notifier{cfg: cfg}
	if cfg.WebhookURL != "" {
		u, _ := url.Parse(cfg.WebhookURL) // Validate parsed it
		// The path of a webhook URL is its secret.
		n.target = u.Scheme + "://" + u.Host + "/[redacted]"
		n.secrets = []string{cfg.WebhookURL, u.Path, u.RawQuery}
		return n, nil
	}
	u, _ := url.Parse(cfg.APIURL) // Validate parsed it
	n.base = u.Redacted()
	n.target = n.base + "chat.postMessage"
	n.secrets = []string{cfg.Token}
	if p, ok := u.User.Password(); ok {
		n.secrets = append(n.secrets, p)
	}
	// slack-go's own retries stay off: the dispatcher retries, so that its
	// attempt limit counts every request.
	n.api = slack.New(cfg.Token, slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(cfg.HTTPClient))
	return n, nil
}

// DefaultDestination is the channel an alert without one goes to:
// slack.channel in token mode; "" for a webhook, which posts where it was
// made for.
func (n *Notifier) DefaultDestination() string {
	if n.api == nil {
		return ""
	}
	return n.cfg.Channel
}

// ReceiverName is the Slack notifier's receiver name: the name its
// alerts' records are kept under (alert.Notifier), and where an
// Acknowledge click writes.
const ReceiverName = "slack"

// Name is the receiver's name: Config.Name, ReceiverName by default.
func (n *Notifier) Name() string {
	if n.cfg.Name == "" {
		return ReceiverName
	}
	return n.cfg.Name
}

// Notify posts the alert and, in bot-token mode, returns where the message
// is: the channel's id and the message's ts, as chat.postMessage answers
// them (an incoming webhook answers neither: its receipt is zero). A
// message Slack refuses as such (bad blocks, too long, a bad payload) is
// marked alert.Permanent; a 429 carries its Retry-After
// (alert.RetryAfter); every other failure is worth retrying, a revoked
// token or an unknown channel included (see refused).
func (n *Notifier) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	fallback, blocks := Format(a)
	if n.cfg.Buttons {
		if b := buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a)); b != nil {
			blocks = append(blocks, b)
		}
	}
	return n.post(ctx, a.Rule, a.Channel, fallback, blocks)
}

// NotifyDigest posts the alerts of one rule past the budget as one
// message (FormatDigest), with the receipt and the errors Notify gives.
func (n *Notifier) NotifyDigest(ctx context.Context, d alert.Digest) (alert.Receipt, error) {
	fallback, blocks := FormatDigest(d)
	r, err := n.post(ctx, d.Rule, d.Channel, fallback, blocks)
	if !r.IsZero() {
		// Its alerts share it: an update of one replies in its thread.
		r.Digest = true
	}
	return r, err
}

// post sends one message of rule's to channel (token mode; "" is the
// default channel), or to the webhook.
func (n *Notifier) post(ctx context.Context, rule, channel, fallback string, blocks []slack.Block) (alert.Receipt, error) {
	a := alert.Alert{Rule: rule, Channel: channel}
	var receipt alert.Receipt
	var err error
	if n.api == nil {
		err = slack.PostWebhookCustomHTTPContext(ctx, n.cfg.WebhookURL, n.cfg.HTTPClient, &slack.WebhookMessage{
			Text:   fallback,
			Blocks: &slack.Blocks{BlockSet: blocks},
		})
	} else {
		channel := a.Channel
		if channel == "" {
			channel = n.cfg.Channel
		}
		receipt.Channel, receipt.TS, err = n.api.PostMessageContext(ctx, channel,
			slack.MsgOptionText(fallback, false), // already escaped by Format
			slack.MsgOptionBlocks(blocks...))
	}
	if err == nil {
		return receipt, nil
	}
	return alert.Receipt{}, n.failed(fmt.Errorf("slack: post %s alert to %s: %w", a.Rule, n.target, n.redact(err)), err, a.Channel, nil)
}

// failed classifies err, a request's failure, wrapped as wrapped, for the
// dispatcher (alert.RetryPolicy): a message Slack refuses as such, or one
// of final's errors, is given up; a channel it refuses is a ChannelError
// (channel, "" for the default one); a 429 waits for its Retry-After;
// everything else is retried.
func (n *Notifier) failed(wrapped, err error, channel string, final map[string]bool) error {
	if refused(err) {
		return alert.Permanent(wrapped)
	}
	if se, ok := errors.AsType[slack.SlackErrorResponse](err); ok && final[se.Err] {
		return alert.Permanent(wrapped)
	}
	if ch, ok := channelRefused(err, channel, n.cfg.Channel); ok {
		return &alert.ChannelError{Channel: ch, Err: wrapped}
	}
	if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
		return alert.RetryAfter(wrapped, rl.RetryAfter)
	}
	return &transientError{err: wrapped}
}

// transientError marks a failure worth another attempt, overriding what
// the error inside says: slack-go calls every HTTP 4xx final, but a 403 or
// 404 from a webhook is a configuration problem that an operator fixes.
type transientError struct{ err error }

func (e *transientError) Error() string   { return e.err.Error() }
func (e *transientError) Unwrap() error   { return e.err }
func (e *transientError) Retryable() bool { return true }

// messageErrors are the ok:false answers about the message itself: sent
// again, it would be refused again.
var messageErrors = map[string]bool{
	"invalid_blocks":          true,
	"invalid_blocks_format":   true,
	"msg_too_long":            true,
	"too_many_attachments":    true,
	"invalid_attachments":     true,
	"no_text":                 true,
	"invalid_arguments":       true,
	"markdown_text_conflict":  true,
	"invalid_metadata_format": true,
	"metadata_too_large":      true,
}

// refused reports a failure that no retry can fix: a message Slack
// refuses as such. A refusal of the sender (invalid_auth, token_revoked,
// channel_not_found, not_in_channel, a webhook's 403, 404 or 410) is a
// configuration problem: the alert is kept and retried with backoff until
// an operator fixes it, rather than given up while nobody is watching; the
// errors show in fraudwatch_alert_delivery_errors_total and the log.
// Unknown answers are retried too: a late alert beats a lost one.
func refused(err error) bool {
	if se, ok := errors.AsType[slack.SlackErrorResponse](err); ok {
		return messageErrors[se.Err]
	}
	if sc, ok := errors.AsType[slack.StatusCodeError](err); ok {
		switch sc.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
			return true // the webhook refused the payload
		}
	}
	return false
}

// channelErrors are Slack's refusals of a channel rather than of a
// message or of the app.
var channelErrors = map[string]bool{"channel_not_found": true, "not_in_channel": true, "is_archived": true}

// channelRefused reports whether err is Slack refusing the channel the
// alert went to (token mode), and names it.
func channelRefused(err error, channel, fallback string) (string, bool) {
	se, ok := errors.AsType[slack.SlackErrorResponse](err)
	if !ok || !channelErrors[se.Err] {
		return "", false
	}
	if channel == "" {
		channel = fallback
	}
	return channel, true
}

// redact removes the webhook URL and the token from err. Go's HTTP client
// puts the request URL in its *url.Error, and a webhook URL's path is its
// secret; the rest is kept so that alert.RetryPolicy still sees timeouts
// and cancellations.
func (n *Notifier) redact(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = &url.Error{Op: ue.Op, URL: n.target, Err: ue.Err}
	}
	msg := err.Error()
	leaked := false
	for _, secret := range n.secrets {
		if secret != "" && secret != "/" && strings.Contains(msg, secret) {
			msg = strings.ReplaceAll(msg, secret, "[redacted]")
			leaked = true
		}
	}
	if !leaked {
		return err
	}
	retry, _ := alert.RetryPolicy(err)
	return &redactedError{msg: msg, retryable: retry}
}

// redactedError stands in for an error whose text held a secret. It does
// not unwrap, so that the original text cannot be reached; it keeps only
// whether the original was worth a retry.
type redactedError struct {
	msg       string
	retryable bool
}

func (e *redactedError) Error() string   { return e.msg }
func (e *redactedError) Retryable() bool { return e.retryable }

package alert

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// SlackConfig selects one of Slack's two ways in: an incoming webhook, or a
// bot token posting with chat.postMessage.
type SlackConfig struct {
	// WebhookURL is an incoming-webhook URL. It is a secret: whoever holds
	// it can post to the channel.
	WebhookURL string
	// Token is a bot token (xoxb-…), used with Channel.
	Token string
	// Channel is the default channel of token mode; a rule's channel
	// overrides it. Webhooks post to the channel they were created for.
	Channel string
	// APIURL overrides the Web API base URL (a proxy, a test server).
	APIURL string
	// Timeout bounds one HTTP request when HTTPClient is not given.
	Timeout time.Duration
	// HTTPClient, when set, is used as is.
	HTTPClient *http.Client
}

func (c *SlackConfig) setDefaults() {
	c.WebhookURL = strings.TrimSpace(c.WebhookURL)
	c.Token = strings.TrimSpace(c.Token)
	c.Channel = strings.TrimSpace(c.Channel)
	c.APIURL = strings.TrimSpace(c.APIURL)
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
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

// Validate reports settings that cannot work. Messages name the setting,
// never its value: the webhook URL and the token are secrets.
func (c *SlackConfig) Validate() error {
	hasWebhook, hasToken := strings.TrimSpace(c.WebhookURL) != "", strings.TrimSpace(c.Token) != ""
	switch {
	case hasWebhook == hasToken:
		return errors.New("alert: slack: set exactly one of webhook_url and token")
	case c.Timeout < 0:
		return errors.New("alert: slack: timeout must not be negative")
	}
	if hasWebhook && !isHTTPURL(strings.TrimSpace(c.WebhookURL)) {
		return errors.New("alert: slack: webhook_url must be an http or https URL")
	}
	if hasToken {
		if strings.TrimSpace(c.Channel) == "" {
			return errors.New("alert: slack: token mode needs a channel")
		}
		if u := strings.TrimSpace(c.APIURL); u != "" && !isHTTPURL(u) {
			return errors.New("alert: slack: api_url must be an http or https URL")
		}
	}
	return nil
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Slack notifies a Slack channel.
type Slack struct {
	cfg SlackConfig
	api *slack.Client // nil in webhook mode
	// target names where requests go, safe for error messages.
	target string
	// secrets must never appear in an error message.
	secrets []string
}

// NewSlack returns a Slack notifier. It makes no request: a bad token or
// an unknown channel shows on the first alert, as a permanent failure.
func NewSlack(cfg SlackConfig) (*Slack, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Slack{cfg: cfg}
	if cfg.WebhookURL != "" {
		u, _ := url.Parse(cfg.WebhookURL) // Validate parsed it
		// The path of a webhook URL is its secret.
		s.target = u.Scheme + "://" + u.Host + "/[redacted]"
		s.secrets = []string{cfg.WebhookURL, u.Path, u.RawQuery}
		return s, nil
	}
	u, _ := url.Parse(cfg.APIURL)
	s.target = u.Redacted() + "chat.postMessage"
	s.secrets = []string{cfg.Token}
	if p, ok := u.User.Password(); ok {
		s.secrets = append(s.secrets, p)
	}
	// slack-go's own retries stay off: the dispatcher retries, so that
	// MaxAttempts counts every request.
	s.api = slack.New(cfg.Token, slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(cfg.HTTPClient))
	return s, nil
}

// Notify posts the alert. A message Slack refuses as such (bad blocks, too
// long, a bad payload) is marked Permanent; every other failure is worth
// retrying, a revoked token or an unknown channel included (see refused).
func (s *Slack) Notify(ctx context.Context, a Alert) error {
	fallback, blocks := Format(a)
	var err error
	if s.api == nil {
		err = slack.PostWebhookCustomHTTPContext(ctx, s.cfg.WebhookURL, s.cfg.HTTPClient, &slack.WebhookMessage{
			Text:   fallback,
			Blocks: &slack.Blocks{BlockSet: blocks},
		})
	} else {
		channel := a.Channel
		if channel == "" {
			channel = s.cfg.Channel
		}
		_, _, err = s.api.PostMessageContext(ctx, channel,
			slack.MsgOptionText(fallback, false), // already escaped by Format
			slack.MsgOptionBlocks(blocks...))
	}
	if err == nil {
		return nil
	}
	permanent := refused(err)
	err = fmt.Errorf("alert: slack: post %s alert to %s: %w", a.Rule, s.target, s.redact(err))
	if permanent {
		return Permanent(err)
	}
	return &transientError{err: err}
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

// redact removes the webhook URL and the token from err. Go's HTTP client
// puts the request URL in its *url.Error, and a webhook URL's path is its
// secret; the rest is kept so that retryPolicy still sees timeouts and
// cancellations.
func (s *Slack) redact(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = &url.Error{Op: ue.Op, URL: s.target, Err: ue.Err}
	}
	msg := err.Error()
	leaked := false
	for _, secret := range s.secrets {
		if secret != "" && secret != "/" && strings.Contains(msg, secret) {
			msg = strings.ReplaceAll(msg, secret, "[redacted]")
			leaked = true
		}
	}
	if !leaked {
		return err
	}
	retry, _ := retryPolicy(err)
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

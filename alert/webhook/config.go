// Package webhook delivers alerts as signed HTTP POSTs: a documented,
// versioned JSON body (Message), or a body from a Go text/template, signed
// as the Standard Webhooks specification says (webhook-id,
// webhook-timestamp, webhook-signature), so that a receiver verifies it
// with that specification's libraries. docs/receivers.md is the contract.
//
// Its errors tell the dispatcher what to do (alert.RetryPolicy): 429 and
// 5xx are retried (after their Retry-After), a network failure too; any
// other refusal of the endpoint (3xx, 4xx) is an *alert.ChannelError,
// parked and then dead-lettered as a refused Slack channel is.
package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"text/template"
	"time"
)

// Defaults.
const (
	// DefaultTimeout bounds one request when Config.Timeout is unset: the
	// specification suggests 15 to 30 s for the receiver to answer; the
	// dispatcher's attempt timeout (15 s) bounds it too.
	DefaultTimeout = 10 * time.Second
	// ContentTypeJSON is the content type of the JSON body, and the
	// default of a template's.
	ContentTypeJSON = "application/json"
	// MaxSecrets bounds the secrets that sign at once: the current one and
	// those being rotated out.
	MaxSecrets = 4
	// MaxBodyBytes bounds a body a template renders; a bigger one is
	// refused for good (alert.Permanent). The JSON body is bounded by
	// construction, far below it.
	MaxBodyBytes = 256 << 10
)

// Config is one webhook receiver.
type Config struct {
	// Name names the receiver (1 to 32 of a-z, 0-9, '-' and '_', a letter
	// first): alert.Notifier's Name.
	Name string
	// URL is where the POSTs go: absolute http(s). Its path and query are
	// treated as secrets (a token in the URL is common) and never shown.
	URL string
	// Secrets sign each message, "whsec_" and the base64 of 24 to 64
	// random bytes, as the specification serialises them. Each gives one
	// signature; more than one while a secret rotates. At least one.
	Secrets []string
	// Template, when set, renders the body instead of the JSON Message
	// (text/template, given a Message; the func json writes any value as
	// JSON). It must parse and render a sample alert.
	Template string
	// ContentType is the body's content type: a template's (default
	// application/json); the JSON body is always application/json.
	ContentType string
	// Timeout bounds one request when HTTPClient is not given (default
	// DefaultTimeout).
	Timeout time.Duration
	// HTTPClient, when set, sends the requests (its redirects are not
	// followed either).
	HTTPClient *http.Client
}

// receiverName is alert.Notifier's rule for a receiver's name.
var receiverName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// secretPrefix starts a symmetric secret as the specification serialises it.
const secretPrefix = "whsec_"

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ContentType == "" {
		c.ContentType = ContentTypeJSON
	}
}

// Validate reports a receiver that cannot send: a bad name or URL, a
// missing or malformed secret, a template that does not parse or cannot
// render an alert. Messages name the setting, never a secret's value nor
// the URL's path.
func (c Config) Validate() error {
	c.setDefaults()
	if !receiverName.MatchString(c.Name) {
		return fmt.Errorf("webhook: name %q is not 1 to 32 of a-z, 0-9, '-' and '_', a letter first", c.Name)
	}
	if err := checkURL(c.URL); err != nil {
		return fmt.Errorf("webhook %s: %w", c.Name, err)
	}
	if _, err := parseSecrets(c.Secrets); err != nil {
		return fmt.Errorf("webhook %s: %w", c.Name, err)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("webhook %s: timeout %s is negative", c.Name, c.Timeout)
	}
	if strings.ContainsAny(c.ContentType, "\r\n") {
		return fmt.Errorf("webhook %s: content_type holds a line break", c.Name)
	}
	if c.Template == "" {
		if c.ContentType != ContentTypeJSON {
			return fmt.Errorf("webhook %s: content_type %q is a template's; the JSON body is %s", c.Name, c.ContentType, ContentTypeJSON)
		}
		return nil
	}
	if _, err := parseTemplate(c.Template); err != nil {
		return fmt.Errorf("webhook %s: %w", c.Name, err)
	}
	return nil
}

// checkURL reports a URL that is not absolute http(s), naming only its
// scheme and host.
func checkURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("url does not parse")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url is not an absolute http(s) URL (scheme %q)", u.Scheme)
	}
	if u.User != nil {
		return errors.New("url carries credentials (user:password@); not supported")
	}
	return nil
}

// parseSecrets decodes each "whsec_<base64>" secret into its key. The
// specification's secrets are 24 to 64 random bytes.
func parseSecrets(secrets []string) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, errors.New("at least one secret is required (whsec_ and base64)")
	}
	if len(secrets) > MaxSecrets {
		return nil, fmt.Errorf("%d secrets; at most %d sign at once", len(secrets), MaxSecrets)
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		b64, ok := strings.CutPrefix(strings.TrimSpace(s), secretPrefix)
		if !ok {
			return nil, fmt.Errorf("secrets[%d] does not start with %s", i, secretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d] is not %s and standard base64", i, secretPrefix)
		}
		if len(key) < 24 || len(key) > 64 {
			return nil, fmt.Errorf("secrets[%d] is %d bytes; the specification asks for 24 to 64", i, len(key))
		}
		keys[i] = key
	}
	return keys, nil
}

// parseTemplate parses a body template and renders a sample alert with
// it, so that a field that does not exist fails here, not at 3 a.m.
// CheckTemplate reports a body template the receiver would refuse: one
// that does not parse, or does not render a sample alert. config checks
// templates with it, so that `check` and the receiver agree.
func CheckTemplate(text string) error {
	_, err := parseTemplate(text)
	return err
}

func parseTemplate(text string) (*template.Template, error) {
	t, err := template.New("body").Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template does not parse: %w", err)
	}
	var b limitedBuffer
	if err := t.Execute(&b, sampleMessage()); err != nil {
		return nil, fmt.Errorf("template does not render an alert: %w", err)
	}
	return t, nil
}

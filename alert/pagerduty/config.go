// Package pagerduty delivers alerts to PagerDuty's Events API v2: a
// trigger event per alert, keyed by a dedup_key derived from the alert's
// ID, and acknowledge and resolve events with the same key when the alert
// is acknowledged or resolved in fraudwatch. docs/receivers.md is the
// contract.
//
// Its errors tell the dispatcher what to do (alert.RetryPolicy): 429 and
// 5xx are retried, a network failure too; a refused routing key or
// endpoint is an *alert.ChannelError (parked, then dead-lettered); an
// event PagerDuty calls invalid is given up (alert.Permanent).
package pagerduty

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Endpoints of the Events API v2.
const (
	DefaultURL = "https://events.pagerduty.com/v2/enqueue"
	EUURL      = "https://events.eu.pagerduty.com/v2/enqueue"
)

// DefaultTimeout bounds one request when Config.Timeout is unset.
const DefaultTimeout = 10 * time.Second

// The budget the dispatcher should keep this receiver to: PagerDuty takes
// about 120 events a minute per integration key, over a sliding 60 s. A
// token bucket of BudgetRate a second and BudgetBurst sends at most
// BudgetBurst + 60 × BudgetRate = 100 in any minute, leaving room for the
// acknowledge and resolve events, which count against the same limit.
// config takes them as a pagerduty receiver's default rate and burst.
const (
	BudgetRate  = 1.5
	BudgetBurst = 10
)

// RateLimitWait is how long a 429 without Retry-After waits: PagerDuty's
// documentation suggests retrying 30 s apart.
const RateLimitWait = 30 * time.Second

// Config is one PagerDuty receiver: one integration (routing) key.
type Config struct {
	// Name names the receiver (1 to 32 of a-z, 0-9, '-' and '_', a letter
	// first): alert.Notifier's Name.
	Name string
	// RoutingKey is the integration key of an Events API v2 integration
	// (32 characters). It is a secret: whoever holds it can page.
	RoutingKey string
	// URL is the Events API's enqueue endpoint (default DefaultURL; EUURL
	// for an EU account; a stand-in for tests).
	URL string
	// Source is payload.source, the system having the problem (default
	// "fraudwatch").
	Source string
	// ClientURL, when set, is the event's client_url: where on-call finds
	// fraudwatch (its status page).
	ClientURL string
	// Timeout bounds one request when HTTPClient is not given (default
	// DefaultTimeout).
	Timeout time.Duration
	// HTTPClient, when set, sends the requests (its redirects are not
	// followed either).
	HTTPClient *http.Client
}

// receiverName is alert.Notifier's rule for a receiver's name.
var receiverName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// routingKey is what an integration key looks like: 32 letters and
// digits.
var routingKey = regexp.MustCompile(`^[A-Za-z0-9]{32}$`)

func (c *Config) setDefaults() {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Source == "" {
		c.Source = "fraudwatch"
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
}

// Validate reports a receiver that cannot send. Messages name the
// setting, never the routing key.
func (c Config) Validate() error {
	c.setDefaults()
	if !receiverName.MatchString(c.Name) {
		return fmt.Errorf("pagerduty: name %q is not 1 to 32 of a-z, 0-9, '-' and '_', a letter first", c.Name)
	}
	if !routingKey.MatchString(c.RoutingKey) {
		return fmt.Errorf("pagerduty %s: routing_key must be an integration key of 32 letters and digits (it is %d characters)",
			c.Name, len(c.RoutingKey))
	}
	if err := checkURL(c.URL, "url"); err != nil {
		return fmt.Errorf("pagerduty %s: %w", c.Name, err)
	}
	if c.ClientURL != "" {
		if err := checkURL(c.ClientURL, "client_url"); err != nil {
			return fmt.Errorf("pagerduty %s: %w", c.Name, err)
		}
	}
	if len(c.Source) > 255 || strings.TrimSpace(c.Source) == "" {
		return fmt.Errorf("pagerduty %s: source must be 1 to 255 characters", c.Name)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("pagerduty %s: timeout %s is negative", c.Name, c.Timeout)
	}
	return nil
}

func checkURL(raw, key string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New(key + " does not parse")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q is not an absolute http(s) URL", key, u.Redacted())
	}
	return nil
}

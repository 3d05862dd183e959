package pagerduty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Notifier sends alerts to one PagerDuty integration.
type Notifier struct {
	cfg    Config
	client *http.Client
	// target names the endpoint in errors.
	target string
	now    func() time.Time
}

// New returns a PagerDuty notifier. It makes no request: a routing key
// PagerDuty does not know shows on the first alert.
func New(cfg Config) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	u, _ := url.Parse(cfg.URL) // Validate parsed it
	n := &Notifier{cfg: cfg, target: u.Scheme + "://" + u.Host + u.EscapedPath(), now: time.Now}
	client := http.Client{Timeout: cfg.Timeout}
	if cfg.HTTPClient != nil {
		client = *cfg.HTTPClient
	}
	// A redirect would carry the routing key elsewhere: not followed.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	n.client = &client
	return n, nil
}

// Name is Config.Name.
func (n *Notifier) Name() string { return n.cfg.Name }

// Notify sends the alert's trigger event. Its receipt is zero: the
// dedup_key is derived from the alert's ID (DedupKey).
func (n *Notifier) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	return alert.Receipt{}, n.send(ctx, a.ID, n.trigger(a))
}

// Update acknowledges or resolves the alert's incident with its
// dedup_key. An assignment sends nothing: the Events API has no
// assignee, and who is on call is PagerDuty's to say.
func (n *Notifier) Update(ctx context.Context, a alert.Alert, st alert.State, _ alert.Receipt) error {
	var action string
	switch st.Status {
	case alert.StatusAcknowledged:
		action = ActionAcknowledge
	case alert.StatusResolved:
		action = ActionResolve
	case alert.StatusOpen, "":
		return nil
	default:
		return alert.Permanent(fmt.Errorf("pagerduty %s: update of alert %s: a status it does not know: %s",
			n.cfg.Name, safe(a.ID, 200), safe(string(st.Status), 32)))
	}
	return n.send(ctx, a.ID, event{RoutingKey: n.cfg.RoutingKey, EventAction: action, DedupKey: DedupKey(a.ID)})
}

// send posts one event.
func (n *Notifier) send(ctx context.Context, alertID string, ev event) error {
	what := fmt.Sprintf("pagerduty %s: %s alert %s at %s", n.cfg.Name, ev.EventAction, safe(alertID, 200), n.target)
	body, err := json.Marshal(ev)
	if err != nil {
		return alert.Permanent(fmt.Errorf("%s: encode: %w", what, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return alert.Permanent(fmt.Errorf("%s: a request could not be made", what))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "fraudwatch-pagerduty")
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, n.redact(err))
	}
	defer func() { _ = resp.Body.Close() }()
	// PagerDuty's answer is small; only its status and, when refused, its
	// reasons are read, at most 16 KiB of it.
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	return n.classify(what, resp, data)
}

// answer is what PagerDuty's body says when it refuses an event.
type answer struct {
	Status  string   `json:"status"`
	Message string   `json:"message"`
	Errors  []string `json:"errors"`
}

// classify turns PagerDuty's answer into what the dispatcher does.
func (n *Notifier) classify(what string, resp *http.Response, data []byte) error {
	code := resp.StatusCode
	status := fmt.Sprintf("%d %s", code, http.StatusText(code))
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusTooManyRequests:
		wait, ok := alert.ParseRetryAfter(resp.Header.Get("Retry-After"), n.now())
		if !ok {
			wait = RateLimitWait
		}
		return alert.RetryAfter(fmt.Errorf("%s: %s (about 120 events a minute per routing key)", what, status), wait)
	case code >= 500 || code == http.StatusRequestTimeout:
		err := fmt.Errorf("%s: %s", what, status)
		if wait, ok := alert.ParseRetryAfter(resp.Header.Get("Retry-After"), n.now()); ok {
			return alert.RetryAfter(err, wait)
		}
		return err
	case code == http.StatusBadRequest:
		reasons := n.reasons(data)
		err := fmt.Errorf("%s: %s: %s", what, status, reasons)
		if strings.Contains(strings.ToLower(reasons), "routing") {
			// The key, not the event: every alert would be refused until
			// someone fixes it.
			return &alert.ChannelError{Channel: n.cfg.Name, Err: err}
		}
		return alert.Permanent(err) // the event as such: sent again, refused again
	case code == http.StatusRequestEntityTooLarge:
		return alert.Permanent(fmt.Errorf("%s: %s", what, status))
	}
	// 3xx (not followed), 401, 403, 404 and the rest: the endpoint or the
	// key refuses; the URL or routing_key is to be fixed.
	return &alert.ChannelError{Channel: n.cfg.Name, Err: fmt.Errorf("%s: refused: %s", what, status)}
}

// reasons is PagerDuty's account of a refusal, as an error may show it:
// its message and up to three errors, on one line, cut, the routing key
// never among them.
func (n *Notifier) reasons(data []byte) string {
	var a answer
	if json.Unmarshal(data, &a) != nil || (a.Message == "" && len(a.Errors) == 0) {
		return "no reason given"
	}
	parts := []string{a.Message}
	parts = append(parts, a.Errors[:min(len(a.Errors), 3)]...)
	s := strings.Join(parts, "; ")
	s = strings.ReplaceAll(s, n.cfg.RoutingKey, "[redacted]")
	return safe(s, 300)
}

// redact keeps the transport error's URL to the endpoint's, keeping the
// error inside so that alert.RetryPolicy still sees a timeout or a
// cancellation. The routing key travels in the body, never in the URL.
func (n *Notifier) redact(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return &url.Error{Op: ue.Op, URL: n.target, Err: ue.Err}
	}
	return err
}

// safe is untrusted or personal-free text as an error may show it: one
// line, cut.
func safe(s string, n int) string { return alert.Cut(alert.Printable(s), n) }

package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Notifier posts alerts and their changes to one webhook.
type Notifier struct {
	cfg    Config
	keys   [][]byte
	tmpl   *template.Template // nil: the JSON body
	client *http.Client
	// target names the endpoint in errors: scheme and host, never the
	// path or query, which may hold a token.
	target string
	now    func() time.Time
}

// New returns a webhook notifier. It makes no request.
func New(cfg Config) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	keys, _ := parseSecrets(cfg.Secrets) // Validate decoded them
	n := &Notifier{cfg: cfg, keys: keys, now: time.Now}
	if cfg.Template != "" {
		n.tmpl, _ = parseTemplate(cfg.Template) // Validate parsed it
	}
	u, _ := url.Parse(cfg.URL) // Validate parsed it
	n.target = u.Scheme + "://" + u.Host + "/[redacted]"
	client := http.Client{Timeout: cfg.Timeout}
	if cfg.HTTPClient != nil {
		client = *cfg.HTTPClient
	}
	// The specification: a redirect is a failure; the URL is to be
	// updated, not followed (it could lead the signed alert anywhere).
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	n.client = &client
	return n, nil
}

// Name is Config.Name.
func (n *Notifier) Name() string { return n.cfg.Name }

// Notify posts the alert as an alert.created message. The webhook gives
// no receipt: its updates are told by the alert's ID.
func (n *Notifier) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	at := a.PublishedAt
	if at.IsZero() {
		at = a.At
	}
	return alert.Receipt{}, n.send(ctx, TypeCreated, a, alert.State{Status: alert.StatusOpen}, at)
}

// Update posts the alert's new state: alert.acknowledged,
// alert.resolved, or alert.assigned (an open alert given an assignee),
// each state its own webhook-id. A state with nothing to show (open,
// nobody assigned) posts nothing.
func (n *Notifier) Update(ctx context.Context, a alert.Alert, st alert.State, _ alert.Receipt) error {
	typ, at, ok, err := updateOf(st)
	if err != nil {
		return alert.Permanent(fmt.Errorf("webhook %s: update of alert %s: %w", n.cfg.Name, safeID(a.ID), err))
	}
	if !ok {
		return nil
	}
	return n.send(ctx, typ, a, st, at)
}

// send renders, signs and posts one message.
func (n *Notifier) send(ctx context.Context, typ string, a alert.Alert, st alert.State, at time.Time) error {
	now := n.now()
	if at.IsZero() {
		at = now
	}
	m := newMessage(typ, a, st, at)
	m.MessageID = messageID(a.ID, typ, m.State) // its times in UTC: one id whatever zone the state was read in
	what := fmt.Sprintf("webhook %s: post %s of alert %s to %s", n.cfg.Name, typ, safeID(a.ID), n.target)
	body, err := n.render(m)
	if err != nil {
		// The same alert renders the same way: no retry can fix it.
		return alert.Permanent(fmt.Errorf("%s: %w", what, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return alert.Permanent(fmt.Errorf("%s: a request could not be made", what))
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set("Content-Type", n.contentType())
	req.Header.Set("User-Agent", "fraudwatch-webhook/"+Version)
	req.Header.Set("webhook-id", m.MessageID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", n.sign(m.MessageID, ts, body))
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, n.redact(err))
	}
	// Only the status and Retry-After are read; the body is drained a
	// little, so that the connection may be reused, and never kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return classify(what, resp.StatusCode, resp.Header.Get("Retry-After"), n.cfg.Name, now)
}

// render is the message's body: its JSON, or the template's output.
func (n *Notifier) render(m Message) ([]byte, error) {
	if n.tmpl == nil {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode: %w", err)
		}
		return b, nil
	}
	var b limitedBuffer
	if err := n.tmpl.Execute(&b, m); err != nil {
		return nil, fmt.Errorf("template: %s", alert.Cut(alert.Printable(err.Error()), 300))
	}
	return b.Bytes(), nil
}

func (n *Notifier) contentType() string {
	if n.tmpl == nil {
		return ContentTypeJSON
	}
	return n.cfg.ContentType
}

// sign is the webhook-signature header: "v1,<base64 HMAC-SHA256>" of
// "<id>.<timestamp>.<body>" for each secret, space-separated.
func (n *Notifier) sign(id, ts string, body []byte) string {
	sigs := make([]string, len(n.keys))
	for i, key := range n.keys {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(id + "." + ts + "."))
		h.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil))
	}
	return strings.Join(sigs, " ")
}

// classify turns an answer into what the dispatcher does with it.
func classify(what string, code int, retryAfter, name string, now time.Time) error {
	status := fmt.Sprintf("%d %s", code, http.StatusText(code)) // not the server's own words
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusTooManyRequests || code >= 500 || code == http.StatusRequestTimeout:
		err := fmt.Errorf("%s: %s", what, status)
		if wait, ok := alert.ParseRetryAfter(retryAfter, now); ok {
			return alert.RetryAfter(err, wait)
		}
		return err // retried with the backoff
	case code >= 300 && code < 500:
		// The endpoint refuses (or moved): the message is fine, its
		// destination is not, until someone fixes the URL or the receiver.
		// The "channel" is the receiver, named as its logs name it.
		return &alert.ChannelError{Channel: name, Err: fmt.Errorf("%s: refused: %s", what, status)}
	}
	return fmt.Errorf("%s: an unexpected answer: %s", what, status)
}

// redact keeps the URL's path and query out of a transport error (Go's
// client puts the URL in its *url.Error), keeping the error inside so
// that alert.RetryPolicy still sees a timeout or a cancellation.
func (n *Notifier) redact(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return &url.Error{Op: ue.Op, URL: n.target, Err: ue.Err}
	}
	return err
}

// safeID is an alert's ID as an error may show it.
func safeID(id string) string { return alert.Cut(alert.Printable(id), 200) }

// funcs are the template's functions beyond text/template's own.
var funcs = template.FuncMap{
	// json writes v as JSON: a string quoted and escaped, so that a
	// template builds a JSON body without breaking it.
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

// limitedBuffer is a template's output, up to MaxBodyBytes.
type limitedBuffer struct{ bytes.Buffer }

var errTooLarge = fmt.Errorf("the rendered body is over %d bytes", MaxBodyBytes)

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxBodyBytes {
		return 0, errTooLarge
	}
	return b.Buffer.Write(p)
}

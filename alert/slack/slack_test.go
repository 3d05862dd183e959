package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"

	"github.com/fraudwatch/fraudwatch/alert"
)

const (
	testWebhookPath = "/services/T0001/B0001/WebhookSecret0123"
	testToken       = "xoxb-1111-2222-TokenSecret0123"
	// testTimeout bounds a request; package config gives the real one.
	testTimeout = 10 * time.Second
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"webhook", Config{WebhookURL: "https://hooks.slack.com" + testWebhookPath}, ""},
		{"webhook with a channel", Config{WebhookURL: "https://hooks.slack.com" + testWebhookPath, Channel: "#x"}, ""},
		{"token", Config{Token: testToken, Channel: "#fraud-alerts"}, ""},
		{"token with api url", Config{Token: testToken, Channel: "#a", APIURL: "http://127.0.0.1:1/api"}, ""},
		{"nothing", Config{}, "exactly one of webhook_url and token"},
		{"both", Config{WebhookURL: "https://hooks.slack.com" + testWebhookPath, Token: testToken, Channel: "#a"}, "exactly one of webhook_url and token"},
		{"webhook unparsable", Config{WebhookURL: "https://hooks slack.com" + testWebhookPath + "%zz"}, "webhook_url is not a URL"},
		{"api url unparsable", Config{Token: testToken, Channel: "#a", APIURL: "http://slack com/%zz"}, "api_url is not a URL"},
		{"token without channel", Config{Token: testToken}, "token mode needs a channel"},
		{"no timeout", Config{Token: testToken, Channel: "#a", Timeout: -1}, "a request timeout is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.Timeout == 0 {
				cfg.Timeout = testTimeout
			}
			if cfg.Timeout < 0 {
				cfg.Timeout = 0
			}
			err := cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := New(cfg); err != nil {
					t.Fatalf("New() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "Secret0123") {
				t.Errorf("error reveals a secret: %v", err)
			}
			if _, err := New(cfg); err == nil {
				t.Error("New() accepted a config Validate rejects")
			}
		})
	}
}

func TestConfigAPIURLNormalised(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "https://slack.com/api/"},
		{"http://proxy.internal/slack/api", "http://proxy.internal/slack/api/"},
		{"http://proxy.internal/slack/api/", "http://proxy.internal/slack/api/"},
	}
	for _, tt := range tests {
		s, err := New(Config{Timeout: testTimeout, Token: testToken, Channel: "#a", APIURL: tt.in})
		if err != nil {
			t.Fatalf("New(api_url %q): %v", tt.in, err)
		}
		if s.cfg.APIURL != tt.want {
			t.Errorf("api_url %q became %q, want %q", tt.in, s.cfg.APIURL, tt.want)
		}
	}
}

// webhookServer records what an incoming webhook receives.
type webhookServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
	ctypes []string
}

func newWebhookServer(t *testing.T, reply func(w http.ResponseWriter)) *webhookServer {
	t.Helper()
	s := &webhookServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.paths = append(s.paths, r.URL.Path)
		s.ctypes = append(s.ctypes, r.Header.Get("Content-Type"))
		s.mu.Unlock()
		reply(w)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestSlackWebhookPostsTextAndBlocks(t *testing.T) {
	srv := newWebhookServer(t, func(w http.ResponseWriter) { _, _ = io.WriteString(w, "ok") })
	n, err := New(Config{Timeout: testTimeout, WebhookURL: srv.URL + testWebhookPath})
	if err != nil {
		t.Fatal(err)
	}
	a := sampleAlert()
	a.Channel = "#ignored-by-webhooks"
	if _, err := n.Notify(context.Background(), a); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if len(srv.bodies) != 1 {
		t.Fatalf("webhook got %d requests, want 1", len(srv.bodies))
	}
	if srv.paths[0] != testWebhookPath || !strings.HasPrefix(srv.ctypes[0], "application/json") {
		t.Errorf("request to %q with %q, want %q with JSON", srv.paths[0], srv.ctypes[0], testWebhookPath)
	}
	var got struct {
		Text    string          `json:"text"`
		Channel string          `json:"channel"`
		Blocks  json.RawMessage `json:"blocks"`
	}
	if err := json.Unmarshal(srv.bodies[0], &got); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	fallback, blocks := Format(a)
	if got.Text != fallback {
		t.Errorf("text = %q, want the fallback %q", got.Text, fallback)
	}
	if got.Channel != "" {
		t.Errorf("channel = %q; webhooks post to their own channel", got.Channel)
	}
	wantBlocks, _ := json.Marshal(blocks)
	if !jsonEqual(t, got.Blocks, wantBlocks) {
		t.Errorf("blocks = %s\nwant %s", got.Blocks, wantBlocks)
	}
	for _, w := range []string{"amount-per-card-10m", "KRW 1,250,000", "kim@example.com", "evt-991", "ord-77", "2025-03-04T05:05:06Z"} {
		if !bytes.Contains(got.Blocks, []byte(w)) {
			t.Errorf("blocks lack %q", w)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestSlackWebhookErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		wantRetry bool
		wantWait  time.Duration
	}{
		{"429 with Retry-After", 429, map[string]string{"Retry-After": "7"}, true, 7 * time.Second},
		{"429 without Retry-After", 429, nil, true, 0},
		{"500", 500, nil, true, 0},
		{"503", 503, nil, true, 0},
		{"400 invalid_payload", 400, nil, false, 0},
		{"413 too large", 413, nil, false, 0},
		// Configuration problems: kept and retried until fixed.
		{"403 action_prohibited", 403, nil, true, 0},
		{"404 no_service", 404, nil, true, 0},
		{"410 channel_is_archived", 410, nil, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newWebhookServer(t, func(w http.ResponseWriter) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, "no")
			})
			n, err := New(Config{Timeout: testTimeout, WebhookURL: srv.URL + testWebhookPath})
			if err != nil {
				t.Fatal(err)
			}
			_, err = n.Notify(context.Background(), sampleAlert())
			if err == nil {
				t.Fatal("Notify succeeded against a failing webhook")
			}
			retry, wait := alert.RetryPolicy(err)
			if retry != tt.wantRetry || wait != tt.wantWait {
				t.Errorf("alert.RetryPolicy(%v) = %v, %v; want %v, %v", err, retry, wait, tt.wantRetry, tt.wantWait)
			}
			if strings.Contains(err.Error(), "Secret0123") {
				t.Errorf("error reveals the webhook URL: %v", err)
			}
		})
	}
}

// A failed connection is where Go's HTTP client names the URL.
func TestSlackErrorsNeverRevealSecrets(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	hang := hangingServer(t)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		cfg       Config
		ctx       context.Context
		wantRetry bool
	}{
		{"webhook refused", Config{WebhookURL: deadURL + testWebhookPath}, context.Background(), true},
		{"webhook cancelled", Config{WebhookURL: hang.URL + testWebhookPath}, cancelled, false},
		{"webhook timeout", Config{WebhookURL: hang.URL + testWebhookPath, Timeout: 50 * time.Millisecond}, context.Background(), true},
		{"webhook with userinfo refused", Config{WebhookURL: strings.Replace(deadURL, "http://", "http://user:PassSecret0123@", 1) + testWebhookPath}, context.Background(), true},
		{"token refused", Config{Token: testToken, Channel: "#a", APIURL: deadURL}, context.Background(), true},
		{"token with userinfo refused", Config{Token: testToken, Channel: "#a", APIURL: strings.Replace(deadURL, "http://", "http://user:PassSecret0123@", 1)}, context.Background(), true},
		{"token cancelled", Config{Token: testToken, Channel: "#a", APIURL: hang.URL}, cancelled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.Timeout == 0 {
				cfg.Timeout = testTimeout
			}
			n, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = n.Notify(tt.ctx, sampleAlert())
			if err == nil {
				t.Fatal("Notify succeeded")
			}
			for _, secret := range []string{"Secret0123", testWebhookPath, testToken} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error reveals %q: %v", secret, err)
				}
			}
			if !strings.Contains(err.Error(), "amount-per-card-10m") {
				t.Errorf("error does not name the rule: %v", err)
			}
			if retry, _ := alert.RetryPolicy(err); retry != tt.wantRetry {
				t.Errorf("alert.RetryPolicy(%v) retry = %v, want %v", err, retry, tt.wantRetry)
			}
		})
	}
}

// hangingServer never answers. It reads the request body first: only then
// does net/http notice the client hanging up and cancel r.Context().
func hangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs before srv.Close
	return srv
}

// recordingTransport shows what slack-go sent to slacktest and what
// slacktest answered: slacktest keeps chat.postMessage requests to itself
// (it queues them for an RTM websocket client).
type recordingTransport struct {
	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	path     string
	form     url.Values
	response map[string]any
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	rbody, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rbody))
	var answer map[string]any
	_ = json.Unmarshal(rbody, &answer)
	rt.mu.Lock()
	rt.calls = append(rt.calls, recordedCall{path: req.URL.Path, form: form, response: answer})
	rt.mu.Unlock()
	return resp, nil
}

func TestSlackTokenPostsToChannel(t *testing.T) {
	srv := slacktest.NewTestServer()
	srv.Start()
	t.Cleanup(srv.Stop)

	tests := []struct {
		name        string
		ruleChannel string
		want        string
	}{
		{"default channel", "", "#fraud-alerts"},
		{"rule channel overrides", "#fraud-risk", "#fraud-risk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &recordingTransport{}
			n, err := New(Config{Timeout: testTimeout,
				Token:   testToken,
				Channel: "#fraud-alerts",
				// Without its trailing slash: New must add it.
				APIURL:     strings.TrimSuffix(srv.GetAPIURL(), "/"),
				HTTPClient: &http.Client{Transport: rt, Timeout: 10 * time.Second},
			})
			if err != nil {
				t.Fatal(err)
			}
			a := sampleAlert()
			a.Channel = tt.ruleChannel
			if _, err := n.Notify(context.Background(), a); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			if len(rt.calls) != 1 {
				t.Fatalf("%d requests, want 1", len(rt.calls))
			}
			c := rt.calls[0]
			if c.path != "/chat.postMessage" {
				t.Errorf("request to %q, want /chat.postMessage", c.path)
			}
			// slacktest echoes the channel it parsed from the request.
			if c.response["ok"] != true || c.response["channel"] != tt.want {
				t.Errorf("slacktest answered %v, want ok for channel %q", c.response, tt.want)
			}
			fallback, blocks := Format(a)
			if got := c.form.Get("text"); got != fallback {
				t.Errorf("text = %q, want the fallback %q", got, fallback)
			}
			wantBlocks, _ := json.Marshal(blocks)
			if got := c.form.Get("blocks"); got == "" || !jsonEqual(t, []byte(got), wantBlocks) {
				t.Errorf("blocks = %s\nwant %s", got, wantBlocks)
			}
			if c.form.Get("token") != testToken {
				t.Error("the request does not carry the token")
			}
		})
	}
}

// postMessageServer mimics chat.postMessage answering ok:false: slacktest
// always answers ok:true.
func postMessageServer(t *testing.T, status int, header map[string]string, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/chat.postMessage" {
			http.NotFound(w, r)
			return
		}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSlackTokenErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		wantRetry bool
		wantWait  time.Duration
		permanent bool
	}{
		// Configuration problems: kept and retried until an operator fixes them.
		{"invalid_auth", 200, nil, `{"ok":false,"error":"invalid_auth"}`, true, 0, false},
		{"token_revoked", 200, nil, `{"ok":false,"error":"token_revoked"}`, true, 0, false},
		{"channel_not_found", 200, nil, `{"ok":false,"error":"channel_not_found"}`, true, 0, false},
		{"not_in_channel", 200, nil, `{"ok":false,"error":"not_in_channel"}`, true, 0, false},
		{"an error Slack adds later", 200, nil, `{"ok":false,"error":"something_new"}`, true, 0, false},
		// The message itself: refused however often it is sent.
		{"invalid_blocks", 200, nil, `{"ok":false,"error":"invalid_blocks"}`, false, 0, true},
		{"msg_too_long", 200, nil, `{"ok":false,"error":"msg_too_long"}`, false, 0, true},
		{"ratelimited", 200, nil, `{"ok":false,"error":"ratelimited"}`, true, 0, false},
		{"internal_error", 200, nil, `{"ok":false,"error":"internal_error"}`, true, 0, false},
		{"fatal_error", 200, nil, `{"ok":false,"error":"fatal_error"}`, true, 0, false},
		{"service_unavailable", 200, nil, `{"ok":false,"error":"service_unavailable"}`, true, 0, false},
		{"request_timeout", 200, nil, `{"ok":false,"error":"request_timeout"}`, true, 0, false},
		{"HTTP 429 with Retry-After", 429, map[string]string{"Retry-After": "3"}, `{"ok":false,"error":"ratelimited"}`, true, 3 * time.Second, false},
		{"HTTP 503", 503, nil, `<html>busy</html>`, true, 0, false},
		{"HTTP 404", 404, nil, `nope`, true, 0, false},
		{"HTTP 400", 400, nil, `nope`, false, 0, true},
		{"not JSON", 200, nil, `<html>proxy</html>`, true, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := postMessageServer(t, tt.status, tt.header, tt.body)
			n, err := New(Config{Timeout: testTimeout, Token: testToken, Channel: "#a", APIURL: srv.URL + "/api"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = n.Notify(context.Background(), sampleAlert())
			if err == nil {
				t.Fatal("Notify succeeded")
			}
			retry, wait := alert.RetryPolicy(err)
			if retry != tt.wantRetry || wait != tt.wantWait {
				t.Errorf("alert.RetryPolicy(%v) = %v, %v; want %v, %v", err, retry, wait, tt.wantRetry, tt.wantWait)
			}
			var r interface{ Retryable() bool }
			if got := errors.As(err, &r) && !r.Retryable(); got != tt.permanent {
				t.Errorf("Permanent = %v, want %v (%v)", got, tt.permanent, err)
			}
			if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), "Secret0123") {
				t.Errorf("error reveals the token: %v", err)
			}
		})
	}
}

// A channel Slack refuses is told apart from every other error: its
// alerts are parked, not retried in the way of others.
func TestSlackChannelRefusals(t *testing.T) {
	for _, code := range []string{"channel_not_found", "not_in_channel", "is_archived", "invalid_auth", "internal_error"} {
		t.Run(code, func(t *testing.T) {
			srv := postMessageServer(t, 200, nil, `{"ok":false,"error":"`+code+`"}`)
			n, err := New(Config{Timeout: testTimeout, Token: testToken, Channel: "#a", APIURL: srv.URL + "/api"})
			if err != nil {
				t.Fatal(err)
			}
			a := sampleAlert()
			a.Channel = "#rule-channel"
			_, err = n.Notify(context.Background(), a)
			ce, ok := errors.AsType[*alert.ChannelError](err)
			want := code != "invalid_auth" && code != "internal_error"
			if ok != want || (ok && ce.Channel != "#rule-channel") {
				t.Errorf("Notify = %v: a channel refusal %v (%+v), want %v", err, ok, ce, want)
			}
		})
	}
}

// Errors that name a secret in their own text, not in a *url.Error, are
// replaced by their scrubbed text, keeping whether to retry.
func TestSlackRedactScrubsAnyError(t *testing.T) {
	webhook, err := New(Config{Timeout: testTimeout, WebhookURL: "https://hooks.slack.com" + testWebhookPath})
	if err != nil {
		t.Fatal(err)
	}
	token, err := New(Config{Timeout: testTimeout, Token: testToken, Channel: "#a"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		s         *Notifier
		err       error
		wantRetry bool
	}{
		{"token in text", token, errors.New("odd answer for " + testToken), true},
		{"token beside a cancellation", token, fmt.Errorf("%s: %w", testToken, context.Canceled), false},
		{"webhook path in text", webhook, errors.New("proxy refused " + testWebhookPath), true},
		{"webhook URL beside a 404", webhook, fmt.Errorf("https://hooks.slack.com%s: %w", testWebhookPath, slack.StatusCodeError{Code: 404, Status: "404 Not Found"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.s.redact(tt.err)
			if strings.Contains(got.Error(), "Secret0123") {
				t.Errorf("redact left a secret: %v", got)
			}
			if !strings.Contains(got.Error(), "[redacted]") {
				t.Errorf("redact = %v, want the secret replaced by [redacted]", got)
			}
			if retry, _ := alert.RetryPolicy(got); retry != tt.wantRetry {
				t.Errorf("alert.RetryPolicy(%v) = %v, want %v", got, retry, tt.wantRetry)
			}
		})
	}
}

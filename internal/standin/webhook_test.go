package standin_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fraudwatch/fraudwatch/internal/standin"
)

// deliver POSTs body to s signed with secret (as of at) and answers the status.
func deliver(t *testing.T, s *standin.Webhook, secret, id string, at time.Time, body string) int {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, at, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	code, _ := do(t, req)
	return code
}

func TestNewWebhookSecret(t *testing.T) {
	a, b := standin.NewWebhookSecret(t), standin.NewWebhookSecret(t)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	if !strings.HasPrefix(a, "whsec_") || err != nil || len(key) != 32 || a == b {
		t.Errorf("secrets %q and %q: want whsec_ and the base64 of 32 random bytes", a, b)
	}
}

// A request signed with the secret is kept, repeats of one webhook-id
// each; a forged signature, or one too old, is answered 401, counted and
// not kept.
func TestWebhookVerifies(t *testing.T) {
	rec := &recorder{TB: t}
	secret := standin.NewWebhookSecret(t)
	s := standin.NewWebhook(rec, secret)
	body := `{"type":"alert.created","data":{}}`
	for range 2 {
		if code := deliver(t, s, secret, "msg_1", time.Now(), body); code != http.StatusOK {
			t.Fatalf("a signed request: %d", code)
		}
	}
	if code := deliver(t, s, standin.NewWebhookSecret(t), "msg_2", time.Now(), body); code != http.StatusUnauthorized {
		t.Errorf("a forged signature: %d", code)
	}
	if code := deliver(t, s, secret, "msg_3", time.Now().Add(-10*time.Minute), body); code != http.StatusUnauthorized {
		t.Errorf("a stale timestamp: %d", code)
	}
	if got := s.Rejected(); got != 2 {
		t.Errorf("%d rejected, want 2", got)
	}
	if got := s.Attempts(); got != 4 {
		t.Errorf("%d attempts, want 4", got)
	}
	ms := s.Messages()
	if len(ms) != 2 || ms[0].ID != "msg_1" || ms[0].Type != "alert.created" || string(ms[0].Body) != body ||
		ms[0].Header.Get("webhook-signature") == "" {
		t.Errorf("messages %+v, want msg_1 twice", ms)
	}
	if ids := s.IDs(); len(ids) != 1 || ids["msg_1"] != 2 {
		t.Errorf("ids %v, want msg_1 twice", ids)
	}
	rec.expectNoFailure(t)
}

// While down every request answers 503 and is counted, not kept.
func TestWebhookDown(t *testing.T) {
	rec := &recorder{TB: t}
	secret := standin.NewWebhookSecret(t)
	s := standin.NewWebhook(rec, secret)
	s.Down(true)
	if code := deliver(t, s, secret, "msg_1", time.Now(), `{}`); code != http.StatusServiceUnavailable {
		t.Errorf("while down: %d", code)
	}
	if len(s.Messages()) != 0 || len(s.IDs()) != 0 || s.Attempts() != 1 || s.Rejected() != 0 {
		t.Errorf("while down: %d messages, ids %v, %d attempts, %d rejected", len(s.Messages()), s.IDs(), s.Attempts(), s.Rejected())
	}
	s.Down(false)
	if code := deliver(t, s, secret, "msg_1", time.Now(), `"plain"`); code != http.StatusOK {
		t.Errorf("up again: %d", code)
	}
	if ms := s.Messages(); len(ms) != 1 || ms[0].Type != "" || s.Attempts() != 2 {
		t.Errorf("up again: %+v, %d attempts", ms, s.Attempts())
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
	if code, _ := do(t, req); code != http.StatusMethodNotAllowed {
		t.Errorf("a GET: %d", code)
	}
	rec.expectFailure(t, "not a POST")
}

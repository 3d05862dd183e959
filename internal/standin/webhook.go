package standin

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Webhook is an endpoint receiving webhooks signed as Standard Webhooks
// says, checked with the specification's published Go verifier (the
// signature, and the timestamp within its 5 minutes). A verified POST
// answers 200 and is kept; one that fails verification answers 401 and
// is counted (Rejected), for the test to check: a forged request is not
// the client's fault, so it does not fail the test. While Down, every
// request answers 503. A request that is not a POST fails the test.
// s.URL is the url to configure.
type Webhook struct {
	*httptest.Server
	t  testing.TB
	wh *standardwebhooks.Webhook

	mu       sync.Mutex
	messages []WebhookMessage
	ids      map[string]int
	down     bool
	attempts int
	rejected int
}

// WebhookMessage is one verified request: its webhook-id, its body's
// "type" field (when the body is a JSON object that has one), its
// headers and its body.
type WebhookMessage struct {
	ID, Type string
	Header   http.Header
	Body     json.RawMessage
}

// NewWebhook starts a Webhook verifying with secret ("whsec_" and the
// base64 of the key, as the specification serialises one).
func NewWebhook(t testing.TB, secret string) *Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("standin.NewWebhook: the secret: %v", err)
	}
	s := &Webhook{t: t, wh: wh, ids: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// NewWebhookSecret is a new secret as the specification serialises one:
// whsec_ and the base64 of 32 random bytes.
func NewWebhookSecret(t testing.TB) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatalf("standin.NewWebhookSecret: %v", err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

func (s *Webhook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	switch {
	case s.down:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case r.Method != http.MethodPost || err != nil:
		s.t.Errorf("standin.Webhook: %s %s: not a POST with a body (%v)", r.Method, r.URL.Path, err)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if err := s.wh.Verify(body, r.Header); err != nil {
		s.rejected++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	m := WebhookMessage{ID: r.Header.Get(standardwebhooks.HeaderWebhookID), Header: r.Header.Clone(), Body: body}
	var typed struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &typed) == nil {
		m.Type = typed.Type
	}
	s.messages = append(s.messages, m)
	s.ids[m.ID]++
	w.WriteHeader(http.StatusOK)
}

// Messages are the verified requests, each answered 200, in order:
// repeats of one webhook-id each in its place.
func (s *Webhook) Messages() []WebhookMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.messages)
}

// IDs counts the verified requests by webhook-id.
func (s *Webhook) IDs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.ids)
}

// Down makes every request answer 503 (and not be kept) while down holds.
func (s *Webhook) Down(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Attempts counts every request received: kept, rejected or answered
// while down.
func (s *Webhook) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Rejected counts the requests that failed verification (answered 401).
func (s *Webhook) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

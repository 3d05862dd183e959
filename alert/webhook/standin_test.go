package webhook_test

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/webhook"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// request is one POST the stand-in received.
type request struct {
	header http.Header
	body   []byte
}

// answer is how the stand-in answers one request.
type answer struct {
	code   int
	header map[string]string
}

// standIn is a webhook receiver: it keeps each request and answers as
// told, the last answer repeating (200 when told nothing).
type standIn struct {
	*httptest.Server
	mu      sync.Mutex
	got     []request
	answers []answer
	// check, when set, answers instead (a verifier's 401).
	check func(r request) int
}

func newStandIn(t *testing.T, answers ...answer) *standIn {
	t.Helper()
	s := &standIn{answers: answers}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := request{header: r.Header.Clone(), body: body}
	s.mu.Lock()
	s.got = append(s.got, req)
	a := answer{code: http.StatusOK}
	if len(s.answers) > 0 {
		a = s.answers[0]
		if len(s.answers) > 1 {
			s.answers = s.answers[1:]
		}
	}
	check := s.check
	s.mu.Unlock()
	if check != nil {
		a.code = check(req)
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.code)
}

func (s *standIn) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.got...)
}

func (s *standIn) last(t *testing.T) request {
	t.Helper()
	got := s.requests()
	if len(got) == 0 {
		t.Fatal("the stand-in received nothing")
	}
	return got[len(got)-1]
}

// newSecret is a secret as the specification serialises one: whsec_ and
// the base64 of 32 random bytes.
func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

func newNotifier(t *testing.T, cfg webhook.Config) *webhook.Notifier {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "cases"
	}
	n, err := webhook.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return n
}

// sample is an alert as the dispatcher hands it over: ID, links and
// evidence set.
func sample() alert.Alert {
	a := testkit.SampleAlert()
	a.ID = a.Rule + "/" + a.EventID
	a.PublishedAt = a.At.Add(30 * time.Millisecond)
	a.Evidence = []alert.Evidence{{OrderID: "ord-77", EventID: "evt-991", Amount: 700_000, At: a.At}}
	a.Links = []alert.Link{{Text: "Order ord-77", URL: "https://backoffice.example/orders/ord-77"}}
	return a
}

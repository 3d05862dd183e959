package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/webhook"
)

// How each answer reaches the dispatcher (alert.RetryPolicy): 429, 408
// and 5xx retried, after their Retry-After (seconds or an HTTP-date);
// 3xx and other 4xx the endpoint's refusal (*alert.ChannelError: parked,
// then dead-lettered).
func TestAnswersDecideTheRetry(t *testing.T) {
	inAMinute := time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name      string
		answer    answer
		retry     bool
		wait      time.Duration // exact, or (when minWait) at least
		minWait   bool
		refused   bool
		wantInErr string
	}{
		{name: "200", answer: answer{code: 200}},
		{name: "202", answer: answer{code: 202}},
		{name: "429 Retry-After seconds", answer: answer{code: 429, header: map[string]string{"Retry-After": "7"}}, retry: true, wait: 7 * time.Second, wantInErr: "429 Too Many Requests"},
		{name: "429 Retry-After date", answer: answer{code: 429, header: map[string]string{"Retry-After": inAMinute}}, retry: true, wait: 50 * time.Second, minWait: true},
		{name: "429 without Retry-After", answer: answer{code: 429}, retry: true},
		{name: "429 odd Retry-After", answer: answer{code: 429, header: map[string]string{"Retry-After": "soon"}}, retry: true},
		{name: "500", answer: answer{code: 500}, retry: true, wantInErr: "500 Internal Server Error"},
		{name: "503 Retry-After", answer: answer{code: 503, header: map[string]string{"Retry-After": "3"}}, retry: true, wait: 3 * time.Second},
		{name: "408", answer: answer{code: 408}, retry: true},
		{name: "400", answer: answer{code: 400}, refused: true, wantInErr: "400 Bad Request"},
		{name: "401", answer: answer{code: 401}, refused: true},
		{name: "404", answer: answer{code: 404}, refused: true, wantInErr: "404 Not Found"},
		{name: "410", answer: answer{code: 410}, refused: true},
		{name: "413", answer: answer{code: 413}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStandIn(t, tc.answer)
			n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecret(t)}})
			_, err := n.Notify(context.Background(), sample())
			if tc.answer.code < 300 {
				if err != nil {
					t.Fatalf("Notify: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Notify: no error")
			}
			if tc.wantInErr != "" && !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("error %q does not say %q", err, tc.wantInErr)
			}
			ce, isCE := errors.AsType[*alert.ChannelError](err)
			if isCE != tc.refused {
				t.Fatalf("error %v: a channel error %v, want %v", err, isCE, tc.refused)
			}
			if tc.refused {
				if ce.Channel != "cases" {
					t.Errorf("channel %q", ce.Channel)
				}
				return
			}
			retry, wait := alert.RetryPolicy(err)
			if retry != tc.retry || (!tc.minWait && wait != tc.wait) || (tc.minWait && (wait < tc.wait || wait > time.Minute)) {
				t.Errorf("RetryPolicy = %v, %s; want %v, %s", retry, wait, tc.retry, tc.wait)
			}
		})
	}
}

// A redirect is not followed (the signed alert would go elsewhere): the
// URL is to be fixed, so the endpoint is refused.
func TestARedirectIsNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	s := newStandIn(t, answer{code: 307, header: map[string]string{"Location": other.URL}})
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecret(t)}})
	_, err := n.Notify(context.Background(), sample())
	if _, ok := errors.AsType[*alert.ChannelError](err); !ok {
		t.Errorf("Notify: %v, want a channel error", err)
	}
	if elsewhere.Load() != 0 {
		t.Error("the redirect was followed")
	}
}

// A network failure or a timeout is retried; a cancellation is not.
func TestNetworkFailuresAreRetried(t *testing.T) {
	gone := newStandIn(t)
	gone.Close()
	// It answers when the test ends, long after the client gave up.
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hold }))
	defer slow.Close()
	defer close(hold)
	for _, tc := range []struct {
		name   string
		url    string
		cancel bool
		retry  bool
	}{
		{name: "connection refused", url: gone.URL, retry: true},
		{name: "timeout", url: slow.URL, retry: true},
		{name: "cancelled", url: slow.URL, cancel: true, retry: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNotifier(t, webhook.Config{URL: tc.url, Secrets: []string{newSecret(t)}, Timeout: 200 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				go func() { time.Sleep(50 * time.Millisecond); cancel() }()
			}
			_, err := n.Notify(ctx, sample())
			if err == nil {
				t.Fatal("Notify: no error")
			}
			if retry, _ := alert.RetryPolicy(err); retry != tc.retry {
				t.Errorf("RetryPolicy(%v) = %v, want %v", err, retry, tc.retry)
			}
		})
	}
}

// The URL's path and query may hold a token: no error shows them.
func TestTheURLsSecretsStayOutOfErrors(t *testing.T) {
	for _, code := range []int{404, 500, 301} {
		s := newStandIn(t, answer{code: code, header: map[string]string{"Location": "/elsewhere"}})
		n := newNotifier(t, webhook.Config{URL: s.URL + "/hooks/T0KEN-PATH?key=S3CRET-Q", Secrets: []string{newSecret(t)}})
		_, err := n.Notify(context.Background(), sample())
		if err == nil || strings.Contains(err.Error(), "T0KEN-PATH") || strings.Contains(err.Error(), "S3CRET-Q") {
			t.Errorf("%d: error %v", code, err)
		}
	}
	gone := newStandIn(t)
	gone.Close()
	n := newNotifier(t, webhook.Config{URL: gone.URL + "/hooks/T0KEN-PATH?key=S3CRET-Q", Secrets: []string{newSecret(t)}})
	_, err := n.Notify(context.Background(), sample())
	if err == nil || strings.Contains(err.Error(), "T0KEN-PATH") || strings.Contains(err.Error(), "S3CRET-Q") {
		t.Errorf("network failure: error %v", err)
	}
}

// Only the status and Retry-After are read: a receiver answering without
// end is not read to its end.
func TestTheAnswerIsReadOnlyAsFarAsNeeded(t *testing.T) {
	const endless = 256 << 20
	var written atomic.Int64
	done := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		w.WriteHeader(200)
		chunk := make([]byte, 32<<10)
		for written.Load() < endless {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer s.Close()
	n := newNotifier(t, webhook.Config{URL: s.URL, Secrets: []string{newSecret(t)}})
	if _, err := n.Notify(context.Background(), sample()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	<-done // the handler stops when the client closes the connection
	if w := written.Load(); w >= endless {
		t.Errorf("the whole answer (%d bytes) was read", w)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/internal/standin"
)

// standinT is the testing.TB the stand-ins of internal/standin are given
// outside a test: it keeps what they find wrong (Errorf) for the bench to
// fail with, and runs their Cleanups at close. The embedded TB is nil: the
// stand-ins call no method but these.
type standinT struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

// standinFatal is what Fatalf panics with, for startReceivers to recover:
// a stand-in that cannot start (a bad webhook secret) must not go on.
type standinFatal struct{}

func (t *standinT) Helper() {}

func (t *standinT) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, fmt.Sprintf(format, args...))
}

func (t *standinT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	panic(standinFatal{})
}

func (t *standinT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// err is what the stand-ins found wrong so far, nil when nothing.
func (t *standinT) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(t.errs, "; "))
}

func (t *standinT) close() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// arrivals keeps when each order's alert first reached one receiver.
type arrivals struct {
	mu      sync.Mutex
	at      map[string]time.Time // an order id: its alert's first arrival
	alerts  int                  // accepted requests that carried an alert
	grouped int                  // of them, those that carried more than one order's (a digest)
}

// timed is an httptest.Server in front of a stand-in's handler: it notes
// the time each request arrives and, once the stand-in has accepted it
// (kept the alert: posted, verified, enqueued), which of the run's orders
// (ids matching order) it names. The stand-in checks the request as the
// service would; the front only reads it.
func (a *arrivals) timed(inner http.Handler, order *regexp.Regexp, isAlert func(r *http.Request, body []byte, w *recorder) bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{ResponseWriter: w, code: http.StatusOK}
		inner.ServeHTTP(rec, r)
		if rec.code/100 != 2 || !isAlert(r, body, rec) {
			return
		}
		a.note(at, order.FindAllString(string(body), -1))
	}))
}

func (a *arrivals) note(at time.Time, ids []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.alerts++
	distinct := 0
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			continue // the order again, as evidence
		}
		distinct++
		if _, seen := a.at[id]; !seen {
			a.at[id] = at
		}
	}
	if distinct > 1 {
		a.grouped++
	}
}

// snapshot is the arrivals so far.
func (a *arrivals) snapshot() (at map[string]time.Time, alerts, grouped int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.at), a.alerts, a.grouped
}

// recorder keeps a response's status and the start of its body.
type recorder struct {
	http.ResponseWriter
	code int
	body []byte
}

func (r *recorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if len(r.body) < 4096 {
		r.body = append(r.body, p[:min(len(p), 4096-len(r.body))]...)
	}
	return r.ResponseWriter.Write(p)
}

// receiver is one stand-in and the timed front fraudwatch is pointed at.
type receiver struct {
	name, what string // its name in the config; what the row calls it
	front      *httptest.Server
	arrivals   *arrivals
}

// routedReceivers are the three receivers of the routed run: a Slack bot
// (chat.postMessage), a Standard Webhooks endpoint and PagerDuty's Events
// API v2, each the stand-in tests use behind a timed front.
type routedReceivers struct {
	t             *standinT
	list          []*receiver
	slackToken    string
	webhookSecret string
	routingKey    string
}

// startReceivers starts the stand-ins and their fronts; close stops them.
func startReceivers(order *regexp.Regexp) (rr *routedReceivers, err error) {
	rr = &routedReceivers{t: &standinT{}, slackToken: "xoxb-fraudwatch-bench", routingKey: strings.Repeat("b", 32)}
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(standinFatal); !ok {
				panic(p)
			}
			rr.close()
			rr, err = nil, fmt.Errorf("start the receivers' stand-ins: %w", rr.t.err())
		}
	}()
	rr.webhookSecret = standin.NewWebhookSecret(rr.t)
	slack := standin.NewSlack(rr.t, rr.slackToken)
	webhook := standin.NewWebhook(rr.t, rr.webhookSecret)
	pager := standin.NewPagerDuty(rr.t)
	for _, r := range []struct {
		name, what string
		inner      http.Handler
		isAlert    func(*http.Request, []byte, *recorder) bool
	}{
		{"slack", "Slack bot (chat.postMessage)", slack.Config.Handler, slackPost},
		{"cases", "webhook (a verified POST)", webhook.Config.Handler, webhookCreated},
		{"pager", "PagerDuty Events API v2 (trigger)", pager.Config.Handler, pagerTrigger},
	} {
		a := &arrivals{at: map[string]time.Time{}}
		front := a.timed(r.inner, order, r.isAlert)
		rr.t.Cleanup(front.Close)
		rr.list = append(rr.list, &receiver{name: r.name, what: r.what, front: front, arrivals: a})
	}
	return rr, nil
}

func (rr *routedReceivers) close() { rr.t.close() }

// slackPost: an alert's message, chat.postMessage answered ok, not a
// reply in a thread.
func slackPost(r *http.Request, _ []byte, w *recorder) bool {
	return strings.HasSuffix(r.URL.Path, "/chat.postMessage") && r.PostForm.Get("thread_ts") == "" &&
		bytes.Contains(w.body, []byte(`"ok":true`))
}

// webhookCreated: the body of a new alert (alert.created), verified.
func webhookCreated(_ *http.Request, body []byte, _ *recorder) bool {
	var m struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(body, &m) == nil && m.Type == "alert.created"
}

// pagerTrigger: a trigger event, enqueued.
func pagerTrigger(_ *http.Request, body []byte, _ *recorder) bool {
	var ev struct {
		Action string `json:"event_action"`
	}
	return json.Unmarshal(body, &ev) == nil && ev.Action == "trigger"
}

// config is the receivers: section that sends to the fronts. The budgets
// are set above the run's load, so that the row measures delivery, not
// waiting for a budget: Slack's and the webhook's at their most per
// second; PagerDuty's rate at its most (2 a second) and its burst of 120
// holds every alert of a run of up to 120.
func (rr *routedReceivers) config() string {
	url := map[string]string{}
	for _, r := range rr.list {
		url[r.name] = r.front.URL
	}
	return fmt.Sprintf(`receivers:
  - name: slack
    slack: {token: %q, channel: "#fraud-bench", api_url: %q, rate: 1000, burst: 1000, overall_rate: 1000, overall_burst: 1000}
  - name: cases
    webhook: {url: %q, secrets: [%q], rate: 1000, burst: 1000}
  - name: pager
    pagerduty: {routing_key: %q, url: %q, rate: 2, burst: 120}
`, rr.slackToken, url["slack"]+"/api/", url["cases"]+"/fraudwatch", rr.webhookSecret, rr.routingKey, url["pager"]+"/v2/enqueue")
}

package pagerduty_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/pagerduty"
	"github.com/fraudwatch/fraudwatch/internal/standin"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

const key = "R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12" // 32 characters

func newNotifier(t *testing.T, url string) *pagerduty.Notifier {
	t.Helper()
	n, err := pagerduty.New(pagerduty.Config{Name: "pager", RoutingKey: key, URL: url, ClientURL: "https://fraudwatch.example/"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return n
}

func sample() alert.Alert {
	a := testkit.SampleAlert()
	a.ID = a.Rule + "/" + a.EventID
	a.Evidence = []alert.Evidence{{OrderID: "ord-77", EventID: "evt-991", Amount: 700_000, At: a.At}}
	a.Links = []alert.Link{{Text: "Order ord-77", URL: "https://backoffice.example/orders/ord-77"}}
	return a
}

// A trigger is a valid Events API v2 event carrying what on-call needs.
func TestTheTriggerIsAValidEvent(t *testing.T) {
	s := standin.NewPagerDuty(t)
	n := newNotifier(t, s.URL+"/v2/enqueue")
	a := sample()
	if r, err := n.Notify(context.Background(), a); err != nil || !r.IsZero() {
		t.Fatalf("Notify: %v, %+v", err, r)
	}
	evs := s.Events()
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	ev := evs[0]
	p := ev["payload"].(map[string]any)
	cd := p["custom_details"].(map[string]any)
	for k, want := range map[string]any{"routing_key": key, "event_action": "trigger", "dedup_key": pagerduty.DedupKey(a.ID),
		"client": "fraudwatch", "client_url": "https://fraudwatch.example/"} {
		if ev[k] != want {
			t.Errorf("%s = %v, want %v", k, ev[k], want)
		}
	}
	for k, want := range map[string]any{"severity": "critical", "source": "fraudwatch", "component": "amount-per-card-10m",
		"group": "card_fingerprint,email", "class": "amount", "timestamp": "2025-03-04T05:05:06Z",
		"summary": "[critical] amount-per-card-10m: More than 1,000,000 won paid by one card within 10 minutes — " +
			"card_fingerprint=fp_9f8e7d, email=kim@example.com: KRW 1,250,000 ≥ KRW 1,000,000 in 10m"} {
		if p[k] != want {
			t.Errorf("payload.%s = %v, want %v", k, p[k], want)
		}
	}
	for k, want := range map[string]any{"alert_id": a.ID, "rule": a.Rule, "fraudwatch_severity": "critical",
		"current": "KRW 1,250,000", "threshold": "KRW 1,000,000", "window": "10m", "order_id": "ord-77", "event_id": "evt-991"} {
		if cd[k] != want {
			t.Errorf("custom_details.%s = %v, want %v", k, cd[k], want)
		}
	}
	if ev, _ := cd["evidence"].([]any); len(ev) != 1 {
		t.Errorf("custom_details.evidence %v", cd["evidence"])
	}
	links, _ := ev["links"].([]any)
	if len(links) != 1 || links[0].(map[string]any)["href"] != "https://backoffice.example/orders/ord-77" ||
		links[0].(map[string]any)["text"] != "Order ord-77" {
		t.Errorf("links %v", ev["links"])
	}
}

// fraudwatch's severities map onto PagerDuty's four.
func TestSeverityIsMapped(t *testing.T) {
	s := standin.NewPagerDuty(t)
	n := newNotifier(t, s.URL+"/v2/enqueue")
	for sev, want := range map[alert.Severity]string{alert.SeverityCritical: "critical", alert.SeverityHigh: "error",
		alert.SeverityWarning: "warning", alert.SeverityInfo: "info", "": "error", "urgent": "error"} {
		a := sample()
		a.Severity = sev
		if _, err := n.Notify(context.Background(), a); err != nil {
			t.Fatalf("%q: Notify: %v", sev, err)
		}
		evs := s.Events()
		if got := evs[len(evs)-1]["payload"].(map[string]any)["severity"]; got != want {
			t.Errorf("%q: severity %v, want %s", sev, got, want)
		}
	}
}

// Acknowledged and resolved in fraudwatch, the incident is acknowledged
// and resolved in PagerDuty: the same dedup_key, from any replica; an
// assignment sends nothing.
func TestTheIncidentFollowsTheAlertsLife(t *testing.T) {
	s := standin.NewPagerDuty(t)
	a := sample()
	ctx := context.Background()
	if _, err := newNotifier(t, s.URL+"/v2/enqueue").Notify(ctx, a); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	dedup := pagerduty.DedupKey(a.ID)
	if got := s.Incident(dedup); got != "triggered" {
		t.Fatalf("incident %q after the trigger", got)
	}
	other := newNotifier(t, s.URL+"/v2/enqueue") // another replica, a receipt of nothing
	at := a.At.Add(time.Minute)
	for _, tc := range []struct {
		st     alert.State
		events int
		want   string
	}{
		{alert.State{Status: alert.StatusOpen, Assignee: "slack:U2"}, 1, "triggered"},
		{alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: at}, 2, "acknowledged"},
		{alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: at, Assignee: "slack:U2"}, 3, "acknowledged"},
		{alert.State{Status: alert.StatusResolved, ResolvedBy: "cli:alice", ResolvedAt: at}, 4, "resolved"},
	} {
		if err := other.Update(ctx, a, tc.st, alert.Receipt{}); err != nil {
			t.Fatalf("Update %+v: %v", tc.st, err)
		}
		if got := len(s.Events()); got != tc.events {
			t.Errorf("after %+v: %d events, want %d", tc.st, got, tc.events)
		}
		if got := s.Incident(dedup); got != tc.want {
			t.Errorf("after %+v: incident %q, want %q", tc.st, got, tc.want)
		}
	}
	for i, ev := range s.Events() {
		if ev["dedup_key"] != dedup {
			t.Errorf("event %d (%v): dedup_key %v, want %s", i, ev["event_action"], ev["dedup_key"], dedup)
		}
	}
	if err := other.Update(ctx, a, alert.State{Status: "snoozed"}, alert.Receipt{}); err == nil {
		t.Error("an unknown status was taken")
	} else if retry, _ := alert.RetryPolicy(err); retry {
		t.Errorf("an unknown status is retried: %v", err)
	}
}

// How each answer reaches the dispatcher: 429 waits (its Retry-After, or
// 30 s), 5xx and no answer are retried, an invalid event is given up, a
// refused routing key or endpoint parks the alert.
func TestAnswersDecideTheRetry(t *testing.T) {
	invalid := `{"status":"invalid event","message":"Event object is invalid","errors":["'payload.summary' is missing"]}`
	badKey := `{"status":"invalid event","message":"Event object is invalid","errors":["Invalid routing key ` + key + `"]}`
	for _, tc := range []struct {
		name    string
		f       standin.Forced
		retry   bool
		wait    time.Duration
		refused bool
		inErr   string
	}{
		{name: "429", f: standin.Forced{Code: 429}, retry: true, wait: 30 * time.Second, inErr: "429 Too Many Requests"},
		{name: "429 Retry-After", f: standin.Forced{Code: 429, Header: map[string]string{"Retry-After": "5"}}, retry: true, wait: 5 * time.Second},
		{name: "500", f: standin.Forced{Code: 500}, retry: true, inErr: "500 Internal Server Error"},
		{name: "503", f: standin.Forced{Code: 503, Body: "<html>down</html>"}, retry: true},
		{name: "400 invalid", f: standin.Forced{Code: 400, Body: invalid}, retry: false, inErr: "Event object is invalid; 'payload.summary' is missing"},
		{name: "400 routing key", f: standin.Forced{Code: 400, Body: badKey}, refused: true, inErr: "Invalid routing key [redacted]"},
		{name: "400 no body", f: standin.Forced{Code: 400}, retry: false, inErr: "no reason given"},
		{name: "404", f: standin.Forced{Code: 404}, refused: true},
		{name: "403", f: standin.Forced{Code: 403}, refused: true},
		{name: "301", f: standin.Forced{Code: 301, Header: map[string]string{"Location": "https://elsewhere.example/"}}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := standin.NewPagerDuty(t)
			s.ForceNext(tc.f)
			_, err := newNotifier(t, s.URL+"/v2/enqueue").Notify(context.Background(), sample())
			if err == nil {
				t.Fatal("Notify: no error")
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("the error shows the routing key: %v", err)
			}
			if tc.inErr != "" && !strings.Contains(err.Error(), tc.inErr) {
				t.Errorf("error %q does not say %q", err, tc.inErr)
			}
			ce, isCE := errors.AsType[*alert.ChannelError](err)
			if isCE != tc.refused {
				t.Fatalf("%v: a channel error %v, want %v", err, isCE, tc.refused)
			}
			if isCE {
				if ce.Channel != "pager" {
					t.Errorf("channel %q, want the receiver's name", ce.Channel)
				}
				return
			}
			if retry, wait := alert.RetryPolicy(err); retry != tc.retry || wait != tc.wait {
				t.Errorf("RetryPolicy = %v, %s; want %v, %s", retry, wait, tc.retry, tc.wait)
			}
		})
	}
}

// No answer is retried; a cancellation is not; neither shows the key.
func TestNetworkFailuresAreRetried(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	n := newNotifier(t, gone.URL)
	_, err := n.Notify(context.Background(), sample())
	if retry, _ := alert.RetryPolicy(err); err == nil || !retry || strings.Contains(err.Error(), key) {
		t.Errorf("connection refused: %v, retry %v", err, retry)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = n.Notify(ctx, sample())
	if retry, _ := alert.RetryPolicy(err); err == nil || retry {
		t.Errorf("cancelled: %v, retry %v", err, retry)
	}
}

// No alert breaks an event: an empty one and a huge one are valid events
// as PagerDuty checks them, within its limits.
func TestNoAlertBreaksTheEvent(t *testing.T) {
	big := strings.Repeat("é\n", 1<<19)
	huge := sample()
	huge.ID, huge.Rule, huge.Description, huge.OrderID, huge.Currency = big, big, big, big, big
	huge.Severity, huge.Metric, huge.WindowType = alert.Severity(big), alert.Metric(big), alert.WindowType(big)
	huge.Current, huge.Threshold = -1<<63, 1<<63-1
	huge.GroupBy, huge.GroupValues = make([]string, 1000), make([]string, 1000)
	for i := range huge.GroupBy {
		huge.GroupBy[i], huge.GroupValues[i] = big, big
	}
	huge.Evidence = make([]alert.Evidence, 1000)
	for i := range huge.Evidence {
		huge.Evidence[i] = alert.Evidence{OrderID: big, EventID: big, Value: big}
	}
	huge.Links = make([]alert.Link, 1000)
	for i := range huge.Links {
		huge.Links[i] = alert.Link{Text: big, URL: "https://x.example/a"}
	}
	for _, tc := range []struct {
		name string
		a    alert.Alert
	}{{"empty", alert.Alert{}}, {"huge", huge}} {
		t.Run(tc.name, func(t *testing.T) {
			s := standin.NewPagerDuty(t)
			n := newNotifier(t, s.URL+"/v2/enqueue")
			if _, err := n.Notify(context.Background(), tc.a); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			if err := n.Update(context.Background(), tc.a, alert.State{Status: alert.StatusResolved}, alert.Receipt{}); err != nil {
				t.Fatalf("Update: %v", err)
			}
			ev := s.Events()[0]
			p := ev["payload"].(map[string]any)
			if sum := p["summary"].(string); strings.ContainsAny(sum, "\n\r") || utf8.RuneCountInString(sum) > 1024 {
				t.Errorf("summary of %d characters, on more than one line", utf8.RuneCountInString(sum))
			}
			if _, has := p["timestamp"]; has && tc.a.At.IsZero() {
				t.Errorf("a timestamp %v for an alert of no time: PagerDuty would show year 1", p["timestamp"])
			}
			if d := ev["dedup_key"].(string); len(d) > 255 {
				t.Errorf("dedup_key of %d", len(d))
			}
			evidence, _ := p["custom_details"].(map[string]any)["evidence"].([]any)
			links, _ := ev["links"].([]any)
			if len(evidence) > alert.MaxEvidence || len(links) > 10 {
				t.Errorf("%d evidence, %d links", len(evidence), len(links))
			}
		})
	}
}

// Validate names what is wrong, and never the routing key.
func TestValidateNamesTheProblem(t *testing.T) {
	short := "SHORTKEY0123456789"
	for _, tc := range []struct {
		name string
		cfg  pagerduty.Config
		want string
	}{
		{name: "ok", cfg: pagerduty.Config{Name: "pager", RoutingKey: key}},
		{name: "ok eu", cfg: pagerduty.Config{Name: "pager", RoutingKey: key, URL: pagerduty.EUURL}},
		{name: "name", cfg: pagerduty.Config{Name: "", RoutingKey: key}, want: `name ""`},
		{name: "no key", cfg: pagerduty.Config{Name: "pager"}, want: "routing_key must be an integration key of 32 letters and digits (it is 0 characters)"},
		{name: "short key", cfg: pagerduty.Config{Name: "pager", RoutingKey: short}, want: "(it is 18 characters)"},
		{name: "url", cfg: pagerduty.Config{Name: "pager", RoutingKey: key, URL: "events.pagerduty.com/v2/enqueue"}, want: "url"},
		{name: "client url", cfg: pagerduty.Config{Name: "pager", RoutingKey: key, ClientURL: "mailto:x@example.com"}, want: "client_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), short) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

// The default URL is PagerDuty's US endpoint.
func TestTheDefaultURLIsPagerDutys(t *testing.T) {
	var got string
	n, err := pagerduty.New(pagerduty.Config{Name: "pager", RoutingKey: key, HTTPClient: &http.Client{
		Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			got = r.URL.String()
			return nil, errors.New("not sent in a test")
		})}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = n.Notify(context.Background(), sample())
	if got != "https://events.pagerduty.com/v2/enqueue" {
		t.Errorf("sent to %q", got)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The budget keeps within PagerDuty's limit of about 120 events a minute
// per routing key: a full bucket and a minute of its rate.
func TestTheBudgetKeepsWithinPagerDutysLimit(t *testing.T) {
	if most := float64(pagerduty.BudgetBurst) + 60*pagerduty.BudgetRate; most > 120 {
		t.Errorf("up to %.0f events in a minute, over PagerDuty's 120", most)
	}
}

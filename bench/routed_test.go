package main

import (
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The routed rows time an alert at the receiver that accepted it: the
// fronts count what the stand-in accepted as a new alert (a top-level
// Slack post answered ok, a verified alert.created, an enqueued trigger),
// not a refused request, a thread reply, an acknowledgement; and a digest
// (one request naming several orders) is told apart.
func TestRoutedFrontsCountAcceptedAlerts(t *testing.T) {
	rr, err := startReceivers(regexp.MustCompile(`rtx-o[0-9]+`))
	if err != nil {
		t.Fatal(err)
	}
	defer rr.close()
	signer, err := standardwebhooks.NewWebhook(rr.webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	slackForm := func(token, text, thread string) (string, http.Header, string) {
		f := url.Values{"token": {token}, "channel": {"#fraud-bench"}, "text": {text}}
		if thread != "" {
			f.Set("thread_ts", thread)
		}
		return "/api/chat.postMessage", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, f.Encode()
	}
	webhook := func(typ, order string, forged bool) (string, http.Header, string) {
		body := `{"version":"1","type":"` + typ + `","alert":{"order_id":"` + order + `"}}`
		now := time.Now()
		sig, err := signer.Sign("msg-"+order, now, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if forged {
			sig = "v1,Zm9yZ2VkIHNpZ25hdHVyZSBvZiB0aGlydHktdHdvIGJ5dGVz"
		}
		return "/fraudwatch", http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg-" + order},
			"Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}}, body
	}
	pager := func(action string, orders ...string) (string, http.Header, string) {
		body := `{"routing_key":"` + rr.routingKey + `","event_action":"` + action + `","dedup_key":"k-` + orders[0] + `"`
		if action == "trigger" {
			body += `,"payload":{"summary":"s","source":"fraudwatch","severity":"critical","custom_details":{"orders":"` +
				strings.Join(orders, ",") + `"}}`
		}
		return "/v2/enqueue", http.Header{"Content-Type": {"application/json"}}, body + "}"
	}
	for _, tc := range []struct {
		name string
		to   int // rr.list: slack, cases, pager
		req  func() (string, http.Header, string)
	}{
		{"a Slack post", 0, func() (string, http.Header, string) { return slackForm(rr.slackToken, "order rtx-o1", "") }},
		{"a Slack post refused (not_authed)", 0, func() (string, http.Header, string) { return slackForm("xoxb-wrong", "order rtx-o2", "") }},
		{"a reply in the post's thread", 0, func() (string, http.Header, string) {
			return slackForm(rr.slackToken, "again rtx-o3", "1700000000.000001")
		}},
		{"a verified alert.created", 1, func() (string, http.Header, string) { return webhook("alert.created", "rtx-o4", false) }},
		{"a forged alert.created (401)", 1, func() (string, http.Header, string) { return webhook("alert.created", "rtx-o5", true) }},
		{"a verified alert.acknowledged", 1, func() (string, http.Header, string) { return webhook("alert.acknowledged", "rtx-o6", false) }},
		{"a trigger", 2, func() (string, http.Header, string) { return pager("trigger", "rtx-o7") }},
		{"an acknowledge", 2, func() (string, http.Header, string) { return pager("acknowledge", "rtx-o8") }},
		{"a trigger of two orders' alerts", 2, func() (string, http.Header, string) { return pager("trigger", "rtx-o9", "rtx-o10") }},
	} {
		path, h, body := tc.req()
		req, err := http.NewRequest(http.MethodPost, rr.list[tc.to].front.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
	}
	for i, want := range []struct {
		orders  []string
		grouped int
	}{
		{[]string{"rtx-o1"}, 0},
		{[]string{"rtx-o4"}, 0},
		{[]string{"rtx-o10", "rtx-o7", "rtx-o9"}, 1},
	} {
		at, _, grouped := rr.list[i].arrivals.snapshot()
		got := slices.Sorted(maps.Keys(at))
		if !slices.Equal(got, want.orders) || grouped != want.grouped {
			t.Errorf("%s: arrivals of %v, %d digests; want %v, %d", rr.list[i].name, got, grouped, want.orders, want.grouped)
		}
	}
	if err := rr.t.err(); err != nil {
		t.Errorf("the stand-ins found the requests wrong: %v", err)
	}
}

// A routed run PagerDuty's budget (burst 120, 2 a second) cannot carry
// is refused before the bench starts.
func TestCheckRouted(t *testing.T) {
	for _, tc := range []struct {
		n    int
		rate float64
		ok   bool
	}{
		{0, 0, true},
		{100, 10, true},
		{120, 1000, true},
		{150, 10, true}, // 120 + 2 × 15 s
		{151, 10, false},
		{200, 10, false},
		{20, 0, false},
	} {
		if err := checkRouted(tc.n, tc.rate); (err == nil) != tc.ok {
			t.Errorf("checkRouted(%d, %v) = %v, want ok %v", tc.n, tc.rate, err, tc.ok)
		}
	}
}

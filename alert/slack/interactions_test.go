package slack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

const testSecret = "8f742231b10e8888abcd99yyyzzz85a5"

type fakeSilencer struct {
	mu    sync.Mutex
	calls []string
	acks  []string
}

func (f *fakeSilencer) Snooze(_ context.Context, rule, group string, match map[string]string, d time.Duration, who string) (Recorded, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %s %v %v %s", rule, group, match, d, who))
	return Recorded{SilenceID: "5eed", Ends: time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC),
		GroupBy: []string{"customer_id"}, GroupRef: "abc123"}, nil
}

func (f *fakeSilencer) Acknowledge(_ context.Context, rule, group, eventID, who string) (Recorded, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, fmt.Sprintf("%s %s %s %s", rule, group, eventID, who))
	return Recorded{AckedBy: who, AckedAt: time.Date(2026, 12, 1, 12, 5, 0, 0, time.UTC), GroupBy: []string{"customer_id"}, GroupRef: "abc123"}, nil
}

// request is a click as Slack sends it, signed with secret at ts.
func request(t *testing.T, secret string, ts time.Time, payload string) *http.Request {
	t.Helper()
	body := "payload=" + url.QueryEscape(payload)
	req := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" {
		stamp := strconv.FormatInt(ts.Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		fmt.Fprintf(mac, "v0:%s:%s", stamp, body)
		req.Header.Set("X-Slack-Request-Timestamp", stamp)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	}
	return req
}

// replicas are two replicas' handlers of clicks, sharing the Redis that
// remembers requests.
func replicas(t *testing.T, s Silencer) (h, other *Interactions) {
	t.Helper()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	h, err := NewInteractions(testSecret, s, NewRedisReplays(rdb, prefix), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if other, err = NewInteractions(testSecret, s, NewRedisReplays(rdb, prefix), nil, nil); err != nil {
		t.Fatal(err)
	}
	return h, other
}

// click is the payload of a click on one of an alert's buttons.
func click(t *testing.T, responseURL string, b slack.Block, button int) string {
	t.Helper()
	actions := b.(*slack.ActionBlock)
	btn := actions.Elements.ElementSet[button].(*slack.ButtonBlockElement)
	payload := map[string]any{
		"type":         "block_actions",
		"user":         map[string]string{"id": "U123", "name": "kim"},
		"response_url": responseURL,
		"actions":      []map[string]string{{"action_id": btn.ActionID, "block_id": "fraudwatch_actions", "type": "button", "value": btn.Value}},
		"message": map[string]any{"text": "the alert", "blocks": []any{
			slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*Rule* burst", false, false), nil, nil), actions}},
	}
	data, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestInteractions(t *testing.T) {
	var mu sync.Mutex
	var updates []string
	responses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		updates = append(updates, string(body))
		mu.Unlock()
	}))
	defer responses.Close()
	silencer := &fakeSilencer{}
	h, other := replicas(t, silencer)
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	b := buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a))
	snooze1h, snooze24h, ack := click(t, responses.URL, b, 0), click(t, responses.URL, b, 1), click(t, responses.URL, b, 2)
	// An Acknowledge posted before acknowledgements went into the alert's
	// record: its value names the rule and group alone.
	oldAck := strings.Replace(ack, `\"e\":\"evt-9\"`, `\"m\":{\"customer_id\":\"cust-42\"}`, 1)
	if oldAck == ack {
		t.Fatalf("no event id in %s", ack)
	}
	now := time.Now()
	signed := request(t, testSecret, now, snooze1h)
	// A Snooze leaves the alert's life's buttons; a click that did nothing
	// leaves them all.
	lifeIDs := "fraudwatch_ack,fraudwatch_resolve,fraudwatch_assign,fraudwatch_label_fraud,fraudwatch_label_legit"
	allIDs := "fraudwatch_snooze,fraudwatch_snooze," + lifeIDs

	tests := []struct {
		name    string
		handler http.Handler
		req     *http.Request
		code    int
		silence string
		ack     string
		update  string
		left    string // the buttons the message keeps
	}{
		{"unsigned", h, request(t, "", now, snooze1h), http.StatusUnauthorized, "", "", "", ""},
		{"forged", h, request(t, "not-the-secret", now, snooze1h), http.StatusUnauthorized, "", "", "", ""},
		{"six minutes old", h, request(t, testSecret, now.Add(-6*time.Minute), snooze1h), http.StatusUnauthorized, "", "", "", ""},
		{"snooze for an hour", h, signed, http.StatusOK, "burst cust-42 map[customer_id:cust-42] 1h0m0s slack:U123", "",
			"Snoozed by \\u003c@U123\\u003e for 1 h, until 2026-12-01 13:00 UTC", lifeIDs},
		{"the same request again", h, request(t, testSecret, now, snooze1h), http.StatusUnauthorized, "", "", "", ""},
		{"the same request at another replica", other, request(t, testSecret, now, snooze1h), http.StatusUnauthorized, "", "", "", ""},
		{"snooze for a day", h, request(t, testSecret, now.Add(2*time.Second), snooze24h), http.StatusOK,
			"burst cust-42 map[customer_id:cust-42] 24h0m0s slack:U123", "", "Snoozed by \\u003c@U123\\u003e for 24 h", lifeIDs},
		{"acknowledge", h, request(t, testSecret, now.Add(time.Second), ack), http.StatusOK, "", "burst cust-42 evt-9 slack:U123",
			"Acknowledged by \\u003c@U123\\u003e at 2026-12-01 12:05 UTC", ""},
		{"an old acknowledge button", h, request(t, testSecret, now.Add(3*time.Second), oldAck), http.StatusOK, "", "",
			"names no alert: nothing was recorded", allIDs},
		// Without a Life (WithLife), a Resolve records nothing, and says so.
		{"resolve without a life", h, request(t, testSecret, now.Add(4*time.Second), click(t, responses.URL, b, 3)), http.StatusOK, "", "",
			"life: nothing was recorded (resolve)", allIDs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			silencer.calls, silencer.acks, updates = nil, nil, nil
			w := httptest.NewRecorder()
			tt.handler.ServeHTTP(w, tt.req)
			if w.Code != tt.code {
				t.Fatalf("status %d, want %d", w.Code, tt.code)
			}
			if got := strings.Join(silencer.calls, ";"); got != tt.silence {
				t.Errorf("silences %q, want %q", got, tt.silence)
			}
			if got := strings.Join(silencer.acks, ";"); got != tt.ack {
				t.Errorf("acknowledgements %q, want %q", got, tt.ack)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.update == "" {
				if len(updates) != 0 {
					t.Errorf("the message was updated: %q", updates)
				}
				return
			}
			if len(updates) != 1 || !strings.Contains(updates[0], tt.update) || !strings.Contains(updates[0], `"replace_original":true`) ||
				!strings.Contains(updates[0], "*Rule* burst") {
				t.Fatalf("update %q, want the message with %q", updates, tt.update)
			}
			if got := leftButtons(t, updates[0]); got != tt.left {
				t.Errorf("buttons left %q, want %q", got, tt.left)
			}
		})
	}
}

// leftButtons are the action ids of the buttons of an answer's message.
func leftButtons(t *testing.T, body string) string {
	t.Helper()
	var msg struct {
		Blocks json.RawMessage `json:"blocks"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatal(err)
	}
	return strings.Join(buttonIDs(t, msg.Blocks), ",")
}

// Each alert carries its buttons in token mode with interactivity: two
// snoozes, naming its rule and group (and showing its values), and
// Acknowledge, Resolve, Assign to me, Fraud and Not fraud, naming the
// alert: its rule, group and event id.
func TestButtons(t *testing.T) {
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42\u202e"}, EventID: "evt-9"}
	b, ok := buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a)).(*slack.ActionBlock)
	if !ok || len(b.Elements.ElementSet) != 7 {
		t.Fatalf("buttons %+v", b)
	}
	var labels []string
	for i, e := range b.Elements.ElementSet {
		btn := e.(*slack.ButtonBlockElement)
		labels = append(labels, btn.Text.Text)
		var v buttonValue
		if err := json.Unmarshal([]byte(btn.Value), &v); err != nil || v.Rule != "burst" || v.Group != "cust-42" {
			t.Errorf("button %q carries %q", btn.Text.Text, btn.Value)
		}
		snooze := i < 2
		if (v.Match["customer_id"] == "cust-42\u202e") != snooze || (v.Event == "evt-9") == snooze {
			t.Errorf("button %q carries %q: want a snooze's values, or the acknowledgement's event", btn.Text.Text, btn.Value)
		}
	}
	if got := strings.Join(labels, "|"); got != "Snooze cust-42 1 h|Snooze cust-42 24 h|Acknowledge|Resolve|Assign to me|Fraud|Not fraud" {
		t.Errorf("labels %q", got)
	}
	// An alert that cannot name its group (written before alerts did) has
	// none, and a long group loses its shown values, not its buttons.
	if buttons("burst", "", "e", "x", nil) != nil {
		t.Error("buttons without a group")
	}
	long := map[string]string{"address": strings.Repeat("x", 3000)}
	if buttons("burst", "~abc", "e", "x", long) == nil {
		t.Error("a long group lost its buttons")
	}
	// The longest rule, group (a value of 1 KiB, plain) and event id an
	// alert can have keep every button, each value within Slack's limit.
	big, ok := buttons(strings.Repeat("r", 64), strings.Repeat("g", 1024), strings.Repeat("e", 128), "x", nil).(*slack.ActionBlock)
	if !ok || len(big.Elements.ElementSet) != 7 {
		t.Fatalf("the longest alert's buttons: %+v", big)
	}
	for _, e := range big.Elements.ElementSet {
		if btn := e.(*slack.ButtonBlockElement); len(btn.Value) > maxButtonValue || !strings.Contains(btn.Value, strings.Repeat("e", 128)) && btn.ActionID != actionSnooze {
			t.Errorf("button %s carries %d bytes: %.80q", btn.ActionID, len(btn.Value), btn.Value)
		}
	}
	// Values cut for display do not make their group: a snooze shows none.
	cut, ok := buttons("burst", "~abc", "e", "x", map[string]string{"address": "12 Long Road…"}).(*slack.ActionBlock)
	if !ok || strings.Contains(cut.Elements.ElementSet[0].(*slack.ButtonBlockElement).Value, "Long Road") {
		t.Errorf("a snooze shows values cut for display: %+v", cut)
	}
}

// A signed click spelled again (its signature's hex in upper or mixed
// case, which slack-go's verifier decodes alike) is the same request: it
// is refused as a replay, at this replica or another, and snoozes nothing
// more. A "V0=" prefix is no signature at all.
func TestReplaysRespelled(t *testing.T) {
	silencer := &fakeSilencer{}
	h, other := replicas(t, silencer)
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}}
	payload := click(t, "", buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a)), 0)
	now := time.Now()
	send := func(h http.Handler, respell func(sig string) string) int {
		t.Helper()
		req := request(t, testSecret, now, payload)
		hexSig := strings.TrimPrefix(req.Header.Get("X-Slack-Signature"), "v0=")
		req.Header.Set("X-Slack-Signature", respell(hexSig))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	if code := send(h, func(s string) string { return "v0=" + s }); code != http.StatusOK {
		t.Fatalf("the signed click: %d", code)
	}
	mixed := func(s string) string {
		b := []byte(s)
		for i := range b {
			if i%2 == 0 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			}
		}
		return string(b)
	}
	for _, tt := range []struct {
		name    string
		handler http.Handler
		respell func(string) string
	}{
		{"as sent", h, func(s string) string { return "v0=" + s }},
		{"upper-case hex", h, func(s string) string { return "v0=" + strings.ToUpper(s) }},
		{"mixed-case hex", h, func(s string) string { return "v0=" + mixed(s) }},
		{"upper-case hex at another replica", other, func(s string) string { return "v0=" + strings.ToUpper(s) }},
		{"a V0= prefix", h, func(s string) string { return "V0=" + s }},
	} {
		if code := send(tt.handler, tt.respell); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tt.name, code)
		}
	}
	if len(silencer.calls) != 1 {
		t.Errorf("%d snoozes from one click: %q", len(silencer.calls), silencer.calls)
	}
}

// Each click is logged once, at INFO, with who did what to which rule and
// group, by the group's fields and ref: never its values.
func TestClicksAreAudited(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	silencer := &fakeSilencer{}
	h, err := NewInteractions(testSecret, silencer, NewRedisReplays(redistest.Client(t), redistest.Prefix(t)), nil, log)
	if err != nil {
		t.Fatal(err)
	}
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	b := buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a))
	now := time.Now()
	for i, button := range []int{0, 2} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(t, testSecret, now.Add(time.Duration(i)*time.Second), click(t, "", b, button)))
		if w.Code != http.StatusOK {
			t.Fatalf("click %d: %d", button, w.Code)
		}
	}
	if strings.Contains(logs.String(), "cust-42") {
		t.Errorf("the log holds the group's value:\n%s", logs.String())
	}
	var clicks []map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] == "INFO" {
			delete(rec, "time")
			clicks = append(clicks, rec)
		}
	}
	want := []map[string]any{
		{"level": "INFO", "msg": "alert snoozed from slack", "action": "snooze", "slack_user": "U123", "rule": "burst",
			"group_by": "customer_id", "group_ref": "abc123", "for": float64(time.Hour), "silence_id": "5eed", "until": "2026-12-01T13:00:00Z"},
		{"level": "INFO", "msg": "alert acknowledged in slack", "action": "acknowledge", "slack_user": "U123", "rule": "burst",
			"group_by": "customer_id", "group_ref": "abc123", "alert_id": "burst/evt-9", "acknowledged_before": false},
	}
	if !reflect.DeepEqual(clicks, want) {
		t.Errorf("click log lines\n%v\nwant\n%v", clicks, want)
	}
	// The acknowledgement names the alert: its rule, group and event.
	if got := strings.Join(silencer.acks, ";"); got != "burst cust-42 evt-9 slack:U123" {
		t.Errorf("acknowledgements %q", got)
	}
}

// The replay guard's reply lost, it is not asked again, which would find
// its own first answer and refuse a new click as replayed (go-redis's
// ClusterClient resent it): the guard fails, and Slack's user is asked to
// try again. The request is remembered all the same.
func TestALostReplayGuardReplyIsNotResent(t *testing.T) {
	ctx := t.Context()
	prefix := redistest.Prefix(t)
	l := redistest.NewLossy("set", prefix)
	guard := NewRedisReplays(l.Client(t), prefix)
	l.Arm()
	first, err := guard.First(ctx, "a click", time.Minute)
	if _, reply := errors.AsType[redis.Error](err); err == nil || reply {
		t.Errorf("First answered %v, %v; want the lost reply's error", first, err)
	}
	if n := l.Sent(); n != 1 {
		t.Errorf("the guard was asked %d times; want once", n)
	}
	if first, err := NewRedisReplays(redistest.Client(t), prefix).First(ctx, "a click", time.Minute); err != nil || first {
		t.Errorf("the request again: first %v, %v; want it remembered", first, err)
	}
}

// brokenReplays is a replay guard whose Redis cannot answer.
type brokenReplays struct{}

func (brokenReplays) First(context.Context, string, time.Duration) (bool, error) {
	return false, errors.New("redis: connection reset")
}

// A click the replay guard cannot vouch for gets 503 and changes nothing
// (docs/alerts.md): Slack's user sees it failed and clicks again.
func TestAClickTheGuardCannotVouchForChangesNothing(t *testing.T) {
	responses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the click's message was updated: %s %s", r.Method, r.URL)
	}))
	defer responses.Close()
	silencer := &fakeSilencer{}
	h, err := NewInteractions(testSecret, silencer, brokenReplays{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	b := buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request(t, testSecret, time.Now(), click(t, responses.URL, b, 0)))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("answered %d %q; want 503", rec.Code, rec.Body.String())
	}
	silencer.mu.Lock()
	defer silencer.mu.Unlock()
	if len(silencer.calls) != 0 || len(silencer.acks) != 0 {
		t.Errorf("the click changed something: %q %q", silencer.calls, silencer.acks)
	}
}

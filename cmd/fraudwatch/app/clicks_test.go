package app

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/alert/slack"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

// clickEnv is the handler of Slack's clicks as the app wires it (clicks,
// on a real Redis), logging to logs; Slack's message updates land in
// updates. A click is handled, its update included, when ServeHTTP
// returns.
type clickEnv struct {
	h       http.Handler
	store   *silence.Store
	scripts *lua.Scripts
	keys    lua.Keys
	logs    bytes.Buffer
	mu      sync.Mutex
	updates []string
	respond string
}

const clickSecret = "click-test-secret"

var clickRules = []rules.Rule{{Name: "burst", Metric: alert.Count, GroupBy: []string{"customer_id"}, Window: time.Minute,
	Threshold: 2, Mode: alert.ModeAlert, Enabled: true}}

func newClickEnv(t *testing.T) *clickEnv {
	t.Helper()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &clickEnv{scripts: scripts}
	if e.keys, err = lua.NewKeys(prefix); err != nil {
		t.Fatal(err)
	}
	e.store = silence.NewStore(rdb, scripts, e.keys)
	e.h, err = slack.NewInteractions(clickSecret, clicks{store: e.store, records: scripts, keys: e.keys, rules: func() []rules.Rule { return clickRules }},
		slack.NewRedisReplays(rdb, prefix), nil, slog.New(slog.NewJSONHandler(&e.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	responses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.updates = append(e.updates, string(body))
		e.mu.Unlock()
	}))
	t.Cleanup(responses.Close)
	e.respond = responses.URL
	return e
}

// snoozeClick is a click on "Snooze <customer> 1 h" of burst's alert for
// customer, signed at stamp; the button's value is as alert/slack makes it.
func (e *clickEnv) snoozeClick(t *testing.T, customer string, stamp time.Time) (body string, header http.Header) {
	t.Helper()
	return e.snoozeShowing(t, customer, customer, stamp)
}

// snoozeShowing is snoozeClick for customer's group whose value shows
// shown.
func (e *clickEnv) snoozeShowing(t *testing.T, customer, shown string, stamp time.Time) (body string, header http.Header) {
	t.Helper()
	value, _ := json.Marshal(map[string]any{"r": "burst", "g": e.keys.Group([]string{customer}).Encoding(),
		"m": map[string]string{"customer_id": shown}, "s": "1h0m0s"})
	return e.clickOn(t, "fraudwatch_snooze", "U42", value, stamp)
}

// ackClick is a click by user on "Acknowledge" of burst's alert for
// customer crossed by event, as alert/slack makes the button.
func (e *clickEnv) ackClick(t *testing.T, user, customer, event string, stamp time.Time) (body string, header http.Header) {
	t.Helper()
	value, _ := json.Marshal(map[string]any{"r": "burst", "g": e.keys.Group([]string{customer}).Encoding(), "e": event})
	return e.clickOn(t, "fraudwatch_ack", user, value, stamp)
}

func (e *clickEnv) clickOn(t *testing.T, action, user string, value []byte, stamp time.Time) (body string, header http.Header) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]string{"id": user}, "response_url": e.respond,
		"actions": []map[string]string{{"action_id": action, "block_id": "fraudwatch_actions", "type": "button", "value": string(value)}},
	})
	return signed(clickSecret, payload, stamp)
}

// signed is a click's request as Slack sends it: the payload form-encoded,
// signed with secret at stamp.
func signed(secret string, payload []byte, stamp time.Time) (body string, header http.Header) {
	body = "payload=" + url.QueryEscape(string(payload))
	ts := strconv.FormatInt(stamp.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	header = http.Header{}
	header.Set("Content-Type", "application/x-www-form-urlencoded")
	header.Set("X-Slack-Request-Timestamp", ts)
	header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return body, header
}

func (e *clickEnv) send(body string, header http.Header) int {
	req := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(body))
	req.Header = header.Clone()
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	return w.Code
}

// One click is one silence, however its signature is spelled again; its
// log line names who, which silence, until when, and the group by the ref
// silence list shows, never by its value.
func TestSnoozeClickIsOneAuditedSilence(t *testing.T) {
	e := newClickEnv(t)
	body, header := e.snoozeClick(t, "cust-7", time.Now())
	if code := e.send(body, header); code != http.StatusOK {
		t.Fatalf("the click: %d", code)
	}
	sig := strings.TrimPrefix(header.Get("X-Slack-Signature"), "v0=")
	for _, respelled := range []string{"v0=" + sig, "v0=" + strings.ToUpper(sig), "v0=" + strings.ToUpper(sig[:32]) + sig[32:], "V0=" + sig} {
		h := header.Clone()
		h.Set("X-Slack-Signature", respelled)
		if code := e.send(body, h); code != http.StatusUnauthorized {
			t.Errorf("replayed as %s: %d, want 401", respelled[:8], code)
		}
	}
	list, err := e.store.List(t.Context(), time.Now())
	if err != nil || len(list) != 1 || list[0].Author != "slack:U42" || list[0].GroupRef == "" {
		t.Fatalf("silences %+v, %v; want one, by slack:U42", list, err)
	}
	var line map[string]any
	for l := range strings.Lines(e.logs.String()) {
		if strings.Contains(l, `"msg":"alert snoozed from slack"`) {
			if line != nil {
				t.Fatalf("more than one line for one click:\n%s", e.logs.String())
			}
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]any{"action": "snooze", "slack_user": "U42", "rule": "burst", "group_by": "customer_id",
		"group_ref": list[0].GroupRef, "silence_id": list[0].ID, "until": list[0].Ends.Format(time.RFC3339)}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v", k, line[k], v)
		}
	}
	if strings.Contains(e.logs.String(), "cust-7") {
		t.Errorf("the log holds the group's value:\n%s", e.logs.String())
	}
}

// A snooze that Redis refuses (the group holds 100 silences) says why in
// the message, and its log names neither the silences' key, which ends
// with the group's values, nor the values.
func TestRefusedSnoozeLogsNoGroupValue(t *testing.T) {
	e := newClickEnv(t)
	rdb := redistest.Client(t)
	full := e.keys.Silences(e.keys.Group([]string{"cust-full"}), "burst")
	for i := range 100 {
		rdb.HSet(t.Context(), full, fmt.Sprint("s", i), time.Now().Add(time.Hour).UnixMilli())
	}
	if code := e.send(e.snoozeClick(t, "cust-full", time.Now())); code != http.StatusOK {
		t.Fatalf("the click: %d", code)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "slack interaction failed") {
		t.Fatalf("no log of the refusal:\n%s", logs)
	}
	if strings.Contains(logs, full) || strings.Contains(logs, "cust-full") || strings.Contains(logs, ":s:burst:") {
		t.Errorf("the log names the key or the value:\n%s", logs)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.updates) != 1 || !strings.Contains(e.updates[0], "already holds 100 silences") {
		t.Errorf("the message became %q", e.updates)
	}
	if list, _ := e.store.List(t.Context(), time.Now()); len(list) != 0 {
		t.Errorf("the refused snooze is listed: %+v", list)
	}
}

// A Snooze whose shown values are not its group's (a button carrying one
// customer's values over another's group) is refused: no silence, and
// the message says why, keeping its buttons.
func TestSnoozeOfAnotherGroupsValuesIsRefused(t *testing.T) {
	e := newClickEnv(t)
	if code := e.send(e.snoozeShowing(t, "victim", "mallory", time.Now())); code != http.StatusOK {
		t.Fatalf("the click: %d", code)
	}
	if list, err := e.store.List(t.Context(), time.Now()); err != nil || len(list) != 0 {
		t.Fatalf("silences %+v, %v; want none", list, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.updates) != 1 || !strings.Contains(e.updates[0], "do not make the group it silences") {
		t.Errorf("the message became %q", e.updates)
	}
	if strings.Contains(e.logs.String(), "victim") || strings.Contains(e.logs.String(), "mallory") {
		t.Errorf("the log holds a group's value:\n%s", e.logs.String())
	}
}

// An Acknowledge goes into the alert's record for Slack: who and when,
// by Redis's clock; a second click by another shows the first, which
// stays; an alert without a record (its record ended) says so and writes
// nothing; the silences' history is not written.
func TestAcknowledgeGoesIntoTheAlertsRecord(t *testing.T) {
	e := newClickEnv(t)
	ctx := t.Context()
	g := e.keys.Group([]string{"cust-7"})
	c := lua.AlertClaim{CooldownKey: e.keys.Cooldown(g, "burst"), RecordKey: e.keys.Record(g, "burst", "evt-3", slack.ReceiverName),
		LegacyKey: e.keys.AlertRecord(g, "burst", "evt-3"), AlertKey: e.keys.Alert(g, "burst", "evt-3"), ID: "burst/evt-3", Claimant: "alerts/0/1"}
	if _, err := e.scripts.ClaimAlert(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := e.scripts.SettleAlerts(ctx, lua.SettleSent, lua.Settlement{CooldownKey: c.CooldownKey, RecordKey: c.RecordKey,
		AlertKey: c.AlertKey, ID: c.ID, Claimant: c.Claimant, Receipt: `{"channel":"C1","ts":"1.2"}`}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, user := range []string{"U42", "U43"} {
		if code := e.send(e.ackClick(t, user, "cust-7", "evt-3", now.Add(time.Duration(i)*time.Second))); code != http.StatusOK {
			t.Fatalf("click by %s: %d", user, code)
		}
	}
	rec, err := e.scripts.Record(ctx, c.RecordKey, c.LegacyKey)
	if err != nil || rec.State != "sent" || rec.AckedBy != "slack:U42" || time.Since(rec.AckedAt).Abs() > time.Minute ||
		rec.Receipt != `{"channel":"C1","ts":"1.2"}` {
		t.Fatalf("record %+v, %v; want it acknowledged by slack:U42, its receipt kept", rec, err)
	}
	if code := e.send(e.ackClick(t, "U44", "cust-7", "evt-gone", now.Add(2*time.Second))); code != http.StatusOK {
		t.Fatalf("click of an alert without a record: %d", code)
	}
	if gone := e.keys.Record(g, "burst", "evt-gone", slack.ReceiverName); redistest.Client(t).Exists(ctx, gone).Val() != 0 {
		t.Error("an acknowledgement of no record wrote one")
	}
	e.mu.Lock()
	updates := append([]string(nil), e.updates...)
	e.mu.Unlock()
	if len(updates) != 3 || !strings.Contains(updates[0], `Acknowledged by \u003c@U42\u003e at `) ||
		!strings.Contains(updates[1], `Acknowledged by \u003c@U42\u003e at `) || !strings.Contains(updates[2], "keeps no record of this alert") {
		t.Errorf("the message became %q", updates)
	}
	lines := 0
	for l := range strings.Lines(e.logs.String()) {
		if strings.Contains(l, `"msg":"alert acknowledged in slack"`) {
			lines++
			if !strings.Contains(l, `"alert_id":"burst/evt-3"`) || strings.Contains(l, "cust-7") {
				t.Errorf("log line %s", l)
			}
		}
	}
	if lines != 2 {
		t.Errorf("%d log lines of acknowledgements, want one a click:\n%s", lines, e.logs.String())
	}
	if events, err := e.store.History(ctx, time.Now()); err != nil || len(events) != 0 {
		t.Errorf("history %+v, %v; want nothing", events, err)
	}
}

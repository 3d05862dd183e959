package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// fakeLife keeps one alert's life as the Life another package keeps in
// Redis would: the first acknowledgement stays.
type fakeLife struct {
	mu    sync.Mutex
	calls []string
	st    alert.State
	err   error
}

func (f *fakeLife) Change(_ context.Context, ref alert.Ref, op alert.Op, who string) (alert.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %s %s %s %s", ref.Rule, ref.Group, ref.EventID, op, who))
	if f.err != nil {
		return alert.State{}, f.err
	}
	switch op {
	case alert.OpAcknowledge:
		if f.st.AckedBy == "" {
			f.st.Status, f.st.AckedBy, f.st.AckedAt = alert.StatusAcknowledged, who, t0
		}
	case alert.OpResolve:
		f.st.Status, f.st.ResolvedBy, f.st.ResolvedAt = alert.StatusResolved, who, t0.Add(time.Hour)
	case alert.OpAssign:
		f.st.Assignee = who
	default:
		// A label replaces the one before, resolved or not.
		if l, ok := op.Label(); ok {
			f.st.Label, f.st.LabelledBy, f.st.LabelledAt = l, who, t0.Add(2*time.Hour)
		}
	}
	return f.st, nil
}

// snoozeMessages is a Silencer that keeps where the snoozed message is.
type snoozeMessages struct {
	fakeSilencer
	msgs []alert.Receipt
}

func (s *snoozeMessages) SnoozeMessage(ctx context.Context, rule, group string, match map[string]string, d time.Duration,
	who string, msg alert.Receipt) (Recorded, error) {
	s.msgs = append(s.msgs, msg)
	return s.Snooze(ctx, rule, group, match, d, who)
}

// clickOn is a click on button of the actions block among blocks, the
// message at channel C0ALERTS, ts 1700000000.000001.
func clickOn(t *testing.T, responseURL string, blocks []slack.Block, button int) string {
	t.Helper()
	var btn *slack.ButtonBlockElement
	for _, b := range blocks {
		if ab, ok := b.(*slack.ActionBlock); ok {
			btn = ab.Elements.ElementSet[button].(*slack.ButtonBlockElement)
		}
	}
	payload := map[string]any{
		"type":         "block_actions",
		"user":         map[string]string{"id": "U123", "name": "kim"},
		"response_url": responseURL,
		"container":    map[string]any{"type": "message", "channel_id": "C0ALERTS", "message_ts": "1700000000.000001"},
		"channel":      map[string]string{"id": "C0ALERTS"},
		"actions":      []map[string]string{{"action_id": btn.ActionID, "block_id": actionsBlockID, "type": "button", "value": btn.Value}},
		"message":      map[string]any{"text": "the alert", "ts": "1700000000.000001", "blocks": blocks},
	}
	data, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// responses records what response_url receives.
type responses struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newResponses(t *testing.T) *responses {
	r := &responses{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(body))
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// take returns the one answer received since the last take.
func (r *responses) take(t *testing.T) (body string, blocks json.RawMessage) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) != 1 {
		t.Fatalf("%d answers, want 1: %q", len(r.bodies), r.bodies)
	}
	body, r.bodies = r.bodies[0], nil
	var msg struct {
		Blocks          json.RawMessage `json:"blocks"`
		ReplaceOriginal bool            `json:"replace_original"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || !msg.ReplaceOriginal {
		t.Fatalf("answer %s: not a replacement (%v)", body, err)
	}
	return body, msg.Blocks
}

// With a Life, Acknowledge, Resolve and Assign to me change the alert's
// life there, and the message shows its state (one line of it, however
// often it changes) and the buttons it still allows, its snoozes as they
// were: once resolved, Fraud and Not fraud alone.
func TestLifeClicks(t *testing.T) {
	var logs bytes.Buffer
	life := &fakeLife{st: alert.State{Status: alert.StatusOpen}}
	silencer := &fakeSilencer{}
	h, err := NewInteractions(testSecret, silencer, NewRedisReplays(redistest.Client(t), redistest.Prefix(t)), nil,
		slog.New(slog.NewJSONHandler(&logs, nil)), WithLife(life))
	if err != nil {
		t.Fatal(err)
	}
	rs := newResponses(t)
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	_, blocks := Format(a)
	blocks = append(blocks, buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a)))
	now := time.Now()
	const labels = "fraudwatch_label_fraud,fraudwatch_label_legit"
	steps := []struct {
		name   string
		button int // in the message's buttons as they are
		call   string
		lines  []string
		left   string
	}{
		{"assign to me", 4, "burst cust-42 evt-9 assign slack:U123", []string{"Assigned to <@U123>"},
			"fraudwatch_snooze,fraudwatch_snooze,fraudwatch_ack,fraudwatch_resolve,fraudwatch_assign," + labels},
		{"acknowledge", 2, "burst cust-42 evt-9 acknowledge slack:U123",
			[]string{":white_check_mark: Acknowledged by <@U123> at 2026-12-01 12:05 UTC", "Assigned to <@U123>"},
			"fraudwatch_snooze,fraudwatch_snooze,fraudwatch_resolve,fraudwatch_assign," + labels},
		{"resolve", 2, "burst cust-42 evt-9 resolve slack:U123",
			[]string{"Acknowledged by <@U123>", ":heavy_check_mark: Resolved by <@U123> at 2026-12-01 13:05 UTC"}, labels},
	}
	for i, st := range steps {
		life.calls = nil
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(t, testSecret, now.Add(time.Duration(i)*time.Second), clickOn(t, rs.URL, blocks, st.button)))
		if w.Code != http.StatusOK || strings.Join(life.calls, ";") != st.call {
			t.Fatalf("%s: status %d, life %q, want %q", st.name, w.Code, life.calls, st.call)
		}
		_, raw := rs.take(t)
		text := unescaped(t, raw)
		for _, l := range append(st.lines, "*Rule* burst") {
			if !strings.Contains(text, l) {
				t.Errorf("%s: the message lacks %q:\n%s", st.name, l, text)
			}
		}
		if n := strings.Count(text, stateBlockID); n != 1 {
			t.Errorf("%s: %d state blocks, want 1", st.name, n)
		}
		if got := strings.Join(buttonIDs(t, raw), ","); got != st.left {
			t.Errorf("%s: buttons %q, want %q", st.name, got, st.left)
		}
		// The next click is on the message as it now is.
		var next slack.Blocks
		if err := json.Unmarshal(raw, &next); err != nil {
			t.Fatal(err)
		}
		blocks = next.BlockSet
	}
	if len(silencer.acks) != 0 {
		t.Errorf("the Silencer recorded %q: a Life takes acknowledgements", silencer.acks)
	}
	for _, w := range []string{`"msg":"alert assigned in slack","action":"assign","slack_user":"U123","rule":"burst","alert_id":"burst/evt-9","status":"open"`,
		`"msg":"alert acknowledged in slack","action":"acknowledge"`, `"msg":"alert resolved in slack","action":"resolve"`, `"status":"resolved"`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("the log lacks %s:\n%s", w, logs.String())
		}
	}
	if strings.Contains(logs.String(), "cust-42") {
		t.Errorf("the log holds the group's value:\n%s", logs.String())
	}
}

// A change the Life refuses says why and keeps every button; an old
// Acknowledge (no event id) still answers that it names no alert.
func TestLifeClickRefused(t *testing.T) {
	life := &fakeLife{err: errors.New("redis down")}
	h, err := NewInteractions(testSecret, &fakeSilencer{}, NewRedisReplays(redistest.Client(t), redistest.Prefix(t)), nil, nil, WithLife(life))
	if err != nil {
		t.Fatal(err)
	}
	rs := newResponses(t)
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	blocks := []slack.Block{buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a))}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(t, testSecret, time.Now(), clickOn(t, rs.URL, blocks, 3)))
	body, raw := rs.take(t)
	if !strings.Contains(body, ":warning: could not resolve the alert: redis down") || len(buttonIDs(t, raw)) != 7 {
		t.Errorf("answer %s: want why, and every button", body)
	}
	old := strings.Replace(clickOn(t, rs.URL, blocks, 2), `\"e\":\"evt-9\"`, `\"m\":{}`, 1)
	life.calls = nil
	h.ServeHTTP(httptest.NewRecorder(), request(t, testSecret, time.Now().Add(time.Second), old))
	if body, _ := rs.take(t); !strings.Contains(body, "names no alert: nothing was recorded") || len(life.calls) != 0 {
		t.Errorf("an old Acknowledge: %s, life %q", body, life.calls)
	}
}

// A Snooze hands the silence the clicked message's receipt, for its end to
// be said in that message's thread.
func TestSnoozeKeepsItsMessage(t *testing.T) {
	silencer := &snoozeMessages{}
	h, err := NewInteractions(testSecret, silencer, NewRedisReplays(redistest.Client(t), redistest.Prefix(t)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := newResponses(t)
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	blocks := []slack.Block{buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a))}
	h.ServeHTTP(httptest.NewRecorder(), request(t, testSecret, time.Now(), clickOn(t, rs.URL, blocks, 1)))
	rs.take(t)
	want := alert.Receipt{Channel: "C0ALERTS", TS: "1700000000.000001"}
	if len(silencer.msgs) != 1 || silencer.msgs[0] != want || len(silencer.calls) != 1 {
		t.Errorf("snoozed messages %+v (%d snoozes), want %+v", silencer.msgs, len(silencer.calls), want)
	}
}

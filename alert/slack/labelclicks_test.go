package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// shownButton is a button as a message shows it.
type shownButton struct {
	ActionID string `json:"action_id"`
	Text     struct {
		Text string `json:"text"`
	} `json:"text"`
	Style string `json:"style"`
}

// shownButtons are a message's buttons, in order.
func shownButtons(t *testing.T, blocks json.RawMessage) []shownButton {
	t.Helper()
	var bs []struct {
		Type     string          `json:"type"`
		Elements json.RawMessage `json:"elements"`
	}
	if err := json.Unmarshal(blocks, &bs); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	var out []shownButton
	for _, b := range bs {
		if b.Type != "actions" {
			continue
		}
		var es []shownButton
		if err := json.Unmarshal(b.Elements, &es); err != nil {
			t.Fatalf("buttons: %v", err)
		}
		out = append(out, es...)
	}
	return out
}

// chosen is how a message marks its label buttons: "fraud", "legit" or ""
// for the one marked chosen (✓ and a style), and an error when the marks
// are not one button's, or the other button is missing.
func chosen(t *testing.T, blocks json.RawMessage) string {
	t.Helper()
	want := map[string]struct {
		label, text string
		style       slack.Style
	}{
		actionFraud: {"fraud", "Fraud", slack.StyleDanger},
		actionLegit: {"legit", "Not fraud", slack.StylePrimary},
	}
	got, seen := "", 0
	for _, b := range shownButtons(t, blocks) {
		w, ok := want[b.ActionID]
		if !ok {
			continue
		}
		seen++
		switch {
		case b.Text.Text == "✓ "+w.text && b.Style == string(w.style):
			if got != "" {
				t.Errorf("both label buttons are marked chosen")
			}
			got = w.label
		case b.Text.Text != w.text || b.Style != "":
			t.Errorf("label button %+v: want %q unstyled, or %q styled %s", b, w.text, "✓ "+w.text, w.style)
		}
	}
	if seen != 2 {
		t.Errorf("%d label buttons, want Fraud and Not fraud", seen)
	}
	return got
}

// buttonAt is the index of the message's first button of the action id.
func buttonAt(t *testing.T, blocks []slack.Block, action string) int {
	t.Helper()
	for _, b := range blocks {
		if ab, ok := b.(*slack.ActionBlock); ok {
			for i, e := range ab.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok && btn.ActionID == action {
					return i
				}
			}
		}
	}
	t.Fatalf("no %s button", action)
	return -1
}

// Fraud and Not fraud label the alert through the Life as slack:<user>,
// signed and once; the message then shows the label, who and when, and
// keeps both buttons, the label's marked chosen, to label it again, also
// once the alert is resolved. Each click is logged with the label.
func TestLabelClicks(t *testing.T) {
	var logs bytes.Buffer
	life := &fakeLife{st: alert.State{Status: alert.StatusOpen}}
	h, err := NewInteractions(testSecret, &fakeSilencer{}, NewRedisReplays(redistest.Client(t), redistest.Prefix(t)), nil,
		slog.New(slog.NewJSONHandler(&logs, nil)), WithLife(life))
	if err != nil {
		t.Fatal(err)
	}
	rs := newResponses(t)
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	_, blocks := Format(a)
	blocks = append(blocks, buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a)))
	const all = "fraudwatch_snooze,fraudwatch_snooze,fraudwatch_ack,fraudwatch_resolve,fraudwatch_assign," +
		"fraudwatch_label_fraud,fraudwatch_label_legit"
	now := time.Now()
	// The first signed Fraud click, to send again.
	var fraudAt time.Time
	var fraudPayload string
	steps := []struct {
		name   string
		action string
		secret string
		again  bool // send the first Fraud click again
		code   int
		call   string
		lines  []string
		absent string
		left   string
		chosen string
	}{
		{"unsigned fraud", actionFraud, "", false, http.StatusUnauthorized, "", nil, "", "", ""},
		{"forged fraud", actionFraud, "not-the-secret", false, http.StatusUnauthorized, "", nil, "", "", ""},
		{"fraud", actionFraud, testSecret, false, http.StatusOK, "burst cust-42 evt-9 label_fraud slack:U123",
			[]string{":red_circle: Labelled fraud by <@U123> at 2026-12-01 14:05 UTC"}, "Labelled not fraud", all, "fraud"},
		{"the same fraud click again", actionFraud, testSecret, true, http.StatusUnauthorized, "", nil, "", "", ""},
		{"relabelled not fraud", actionLegit, testSecret, false, http.StatusOK, "burst cust-42 evt-9 label_legit slack:U123",
			[]string{":large_green_circle: Labelled not fraud by <@U123> at 2026-12-01 14:05 UTC"}, "Labelled fraud", all, "legit"},
		{"resolved", actionResolve, testSecret, false, http.StatusOK, "burst cust-42 evt-9 resolve slack:U123",
			[]string{"Resolved by <@U123>", "Labelled not fraud by <@U123>"}, "Labelled fraud",
			"fraudwatch_label_fraud,fraudwatch_label_legit", "legit"},
		{"relabelled fraud once resolved", actionFraud, testSecret, false, http.StatusOK, "burst cust-42 evt-9 label_fraud slack:U123",
			[]string{"Resolved by <@U123>", ":red_circle: Labelled fraud by <@U123>"}, "Labelled not fraud",
			"fraudwatch_label_fraud,fraudwatch_label_legit", "fraud"},
	}
	for i, st := range steps {
		life.calls = nil
		at, payload := now.Add(time.Duration(i)*time.Second), clickOn(t, rs.URL, blocks, buttonAt(t, blocks, st.action))
		switch {
		case st.again:
			at, payload = fraudAt, fraudPayload
		case st.code == http.StatusOK && fraudPayload == "":
			fraudAt, fraudPayload = at, payload
		}
		req := request(t, st.secret, at, payload)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != st.code || strings.Join(life.calls, ";") != st.call {
			t.Fatalf("%s: status %d, life %q; want %d, %q", st.name, w.Code, life.calls, st.code, st.call)
		}
		if st.code != http.StatusOK {
			rs.mu.Lock()
			n := len(rs.bodies)
			rs.mu.Unlock()
			if n != 0 {
				t.Fatalf("%s: the message was answered: a refused click changes nothing", st.name)
			}
			continue
		}
		_, raw := rs.take(t)
		text := unescaped(t, raw)
		for _, l := range append(st.lines, "*Rule* burst") {
			if !strings.Contains(text, l) {
				t.Errorf("%s: the message lacks %q:\n%s", st.name, l, text)
			}
		}
		if strings.Contains(text, st.absent) {
			t.Errorf("%s: the message still says %q:\n%s", st.name, st.absent, text)
		}
		if n := strings.Count(text, stateBlockID); n != 1 {
			t.Errorf("%s: %d state blocks, want 1", st.name, n)
		}
		if got := strings.Join(buttonIDs(t, raw), ","); got != st.left {
			t.Errorf("%s: buttons %q, want %q", st.name, got, st.left)
		}
		if got := chosen(t, raw); got != st.chosen {
			t.Errorf("%s: the button marked chosen is %q's, want %q's", st.name, got, st.chosen)
		}
		var next slack.Blocks
		if err := json.Unmarshal(raw, &next); err != nil {
			t.Fatal(err)
		}
		blocks = next.BlockSet
	}
	for _, w := range []string{
		`"msg":"alert labelled in slack","action":"label_fraud","slack_user":"U123","rule":"burst","alert_id":"burst/evt-9","status":"open","label":"fraud"`,
		`"msg":"alert labelled in slack","action":"label_legit","slack_user":"U123","rule":"burst","alert_id":"burst/evt-9","status":"open","label":"legit"`,
		`"msg":"alert labelled in slack","action":"label_fraud","slack_user":"U123","rule":"burst","alert_id":"burst/evt-9","status":"resolved","label":"fraud"`,
	} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("the log lacks %s:\n%s", w, logs.String())
		}
	}
	if strings.Contains(logs.String(), "cust-42") {
		t.Errorf("the log holds the group's value:\n%s", logs.String())
	}
}

// A label the Life refuses says why and keeps every button, none marked;
// without a Life, a label records nothing and says so.
func TestLabelClickRefused(t *testing.T) {
	a := alert.Alert{Rule: "burst", Group: "cust-42", GroupBy: []string{"customer_id"}, GroupValues: []string{"cust-42"}, EventID: "evt-9"}
	blocks := []slack.Block{buttons(a.Rule, a.Group, a.EventID, identity(a), groupMatch(a))}
	for _, tt := range []struct {
		name   string
		life   Life
		action string
		says   string
	}{
		{"refused", &fakeLife{err: errors.New("redis down")}, actionFraud, ":warning: could not label the alert fraud: redis down"},
		{"refused not fraud", &fakeLife{err: errors.New("redis down")}, actionLegit, ":warning: could not label the alert not fraud: redis down"},
		{"no life", nil, actionLegit, ":warning: this fraudwatch keeps no alert's life: nothing was recorded (label_legit)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.life != nil {
				opts = append(opts, WithLife(tt.life))
			}
			h, err := NewInteractions(testSecret, &fakeSilencer{}, NewRedisReplays(redistest.Client(t), redistest.Prefix(t)), nil, nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			rs := newResponses(t)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, request(t, testSecret, time.Now(), clickOn(t, rs.URL, blocks, buttonAt(t, blocks, tt.action))))
			body, raw := rs.take(t)
			if w.Code != http.StatusOK || !strings.Contains(unescaped(t, raw), tt.says) || len(buttonIDs(t, raw)) != 7 {
				t.Errorf("status %d, answer %s: want %q, and every button", w.Code, body, tt.says)
			}
			if got := chosen(t, raw); got != "" {
				t.Errorf("a refused label marked %q chosen", got)
			}
		})
	}
}

// An update shows the alert's label, who gave it and when (a click
// elsewhere, the CLI), with both label buttons, the label's marked chosen;
// a resolved alert keeps them alone.
func TestBotUpdateShowsLabel(t *testing.T) {
	at := t0.Add(2 * time.Hour)
	all := []string{actionSnooze, actionSnooze, actionAck, actionResolve, actionAssign, actionFraud, actionLegit}
	tests := []struct {
		name   string
		st     alert.State
		line   string
		ids    []string
		chosen string
	}{
		{"fraud while open", alert.State{Status: alert.StatusOpen, Label: alert.LabelFraud, LabelledBy: "slack:U3", LabelledAt: at},
			":red_circle: Labelled fraud by <@U3> at 2026-12-01 14:05 UTC", all, "fraud"},
		{"not fraud from the CLI once resolved", alert.State{Status: alert.StatusResolved, ResolvedBy: "slack:U1", ResolvedAt: t0,
			Label: alert.LabelLegit, LabelledBy: "cli:alice", LabelledAt: at},
			":large_green_circle: Labelled not fraud by cli:alice at 2026-12-01 14:05 UTC", []string{actionFraud, actionLegit}, "legit"},
		{"unclear", alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: t0,
			Label: alert.LabelUnclear, LabelledBy: "cli:bob", LabelledAt: at},
			":grey_question: Labelled unclear by cli:bob at 2026-12-01 14:05 UTC",
			[]string{actionSnooze, actionSnooze, actionResolve, actionAssign, actionFraud, actionLegit}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, s := newBot(t, true)
			a := lifeAlert()
			r, err := b.Notify(t.Context(), a)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Update(t.Context(), a, tt.st, r); err != nil {
				t.Fatal(err)
			}
			m, _ := s.Message(r.Channel, r.TS)
			if !strings.Contains(unescaped(t, m.Blocks), tt.line) || !strings.Contains(m.Text, tt.line) {
				t.Errorf("the message lacks %q:\n%s\n%s", tt.line, m.Text, m.Blocks)
			}
			if got := buttonIDs(t, m.Blocks); !slices.Equal(got, tt.ids) {
				t.Errorf("buttons %q, want %q", got, tt.ids)
			}
			if got := chosen(t, m.Blocks); got != tt.chosen {
				t.Errorf("the button marked chosen is %q's, want %q's", got, tt.chosen)
			}
		})
	}
}

package slack

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/internal/standin"
)

// newBot is a Bot posting to a new Slack stand-in, buttons on or off.
func newBot(t *testing.T, buttons bool) (*Bot, *standin.Slack) {
	t.Helper()
	s := standin.NewSlack(t, testToken)
	n, err := New(Config{Timeout: testTimeout, Token: testToken, Channel: "#fraud-alerts", APIURL: s.URL + "/api/", Buttons: buttons})
	if err != nil {
		t.Fatal(err)
	}
	b, ok := n.Bot()
	if !ok {
		t.Fatal("a token-mode notifier has no Bot")
	}
	return b, s
}

// lifeAlert is the sample alert with its group as its keys spell it, which
// its buttons carry.
func lifeAlert() alert.Alert {
	a := sampleAlert()
	a.Group = "fp_9f8e7d|kim@example.com"
	return a
}

// unescaped is blocks as JSON without Go's escapes of <, > and &, as a
// person reads them.
func unescaped(t *testing.T, blocks json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(blocks, &v); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// buttonIDs are the action ids of a message's buttons, in order.
func buttonIDs(t *testing.T, blocks json.RawMessage) []string {
	t.Helper()
	var bs []struct {
		Type     string `json:"type"`
		Elements []struct {
			ActionID string `json:"action_id"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(blocks, &bs); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	var ids []string
	for _, b := range bs {
		if b.Type == "actions" {
			for _, e := range b.Elements {
				ids = append(ids, e.ActionID)
			}
		}
	}
	return ids
}

var t0 = time.Date(2026, 12, 1, 12, 5, 0, 0, time.UTC)

// An update edits the message it names in place: the alert as posted, a
// line for each fact of its life, and the buttons that still make sense.
func TestBotUpdateEditsInPlace(t *testing.T) {
	snoozes := []string{actionSnooze, actionSnooze}
	labels := []string{actionFraud, actionLegit}
	tests := []struct {
		name    string
		buttons bool
		st      alert.State
		lines   []string
		ids     []string
		noGroup bool // an alert written before alerts named their group
	}{
		{"acknowledged", true, alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: t0},
			[]string{":white_check_mark: Acknowledged by <@U1> at 2026-12-01 12:05 UTC"},
			append(snoozes, actionResolve, actionAssign, actionFraud, actionLegit), false},
		{"assigned while open", true, alert.State{Status: alert.StatusOpen, Assignee: "slack:U2"},
			[]string{":bust_in_silhouette: Assigned to <@U2>"}, append(snoozes, actionAck, actionResolve, actionAssign, actionFraud, actionLegit), false},
		{"resolved from the CLI", true, alert.State{Status: alert.StatusResolved, AckedBy: "slack:U1", AckedAt: t0,
			ResolvedBy: "cli:<!channel>", ResolvedAt: t0.Add(time.Hour), Assignee: "slack:U2"},
			[]string{"Acknowledged by <@U1>", ":heavy_check_mark: Resolved by cli:&lt;!channel&gt; at 2026-12-01 13:05 UTC", "Assigned to <@U2>"}, labels, false},
		{"an alert that cannot name its group", true, alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: t0},
			[]string{"Acknowledged by <@U1>"}, nil, true},
		{"no buttons configured", false, alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: t0},
			[]string{"Acknowledged by <@U1>"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, s := newBot(t, tt.buttons)
			a := lifeAlert()
			if tt.noGroup {
				a.Group = ""
			}
			r, err := b.Notify(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Update(context.Background(), a, tt.st, r); err != nil {
				t.Fatalf("Update: %v", err)
			}
			m, _ := s.Message(r.Channel, r.TS)
			if m.Updates != 1 || len(s.Messages()) != 1 {
				t.Fatalf("%d updates, %d messages: want the one message edited once", m.Updates, len(s.Messages()))
			}
			for _, w := range append(tt.lines, "amount-per-card-10m", "KRW 1,250,000", "ord-77", stateBlockID) {
				if !strings.Contains(unescaped(t, m.Blocks), w) {
					t.Errorf("blocks lack %q:\n%s", w, m.Blocks)
				}
			}
			if !strings.Contains(m.Text, tt.lines[0]) {
				t.Errorf("text %q lacks the state", m.Text)
			}
			if got := buttonIDs(t, m.Blocks); !slices.Equal(got, tt.ids) {
				t.Errorf("buttons %q, want %q", got, tt.ids)
			}
			// Updated again (a crash made the dispatcher repeat it): the
			// same message, once.
			if err := b.Update(context.Background(), a, tt.st, r); err != nil {
				t.Fatal(err)
			}
			again, _ := s.Message(r.Channel, r.TS)
			if string(again.Blocks) != string(m.Blocks) || len(s.Messages()) != 1 {
				t.Errorf("a repeated update changed the message:\n%s\n%s", m.Blocks, again.Blocks)
			}
		})
	}
}

// The buttons of a new alert: its two snoozes, then its life's, then
// Fraud and Not fraud.
func TestBotPostsLifeButtons(t *testing.T) {
	b, s := newBot(t, true)
	r, err := b.Notify(context.Background(), lifeAlert())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := s.Message(r.Channel, r.TS)
	want := []string{actionSnooze, actionSnooze, actionAck, actionResolve, actionAssign, actionFraud, actionLegit}
	if got := buttonIDs(t, m.Blocks); !slices.Equal(got, want) {
		t.Errorf("buttons %q, want %q", got, want)
	}
}

// chat.update's failures are classified as chat.postMessage's, and a
// message Slack will not edit is given up.
func TestBotUpdateErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		retry     bool
		wait      time.Duration
		channel   bool
		permanent bool
	}{
		{"message_not_found", 200, nil, `{"ok":false,"error":"message_not_found"}`, false, 0, false, true},
		{"cant_update_message", 200, nil, `{"ok":false,"error":"cant_update_message"}`, false, 0, false, true},
		{"edit_window_closed", 200, nil, `{"ok":false,"error":"edit_window_closed"}`, false, 0, false, true},
		{"invalid_blocks", 200, nil, `{"ok":false,"error":"invalid_blocks"}`, false, 0, false, true},
		{"channel_not_found", 200, nil, `{"ok":false,"error":"channel_not_found"}`, true, 0, true, false},
		{"is_archived", 200, nil, `{"ok":false,"error":"is_archived"}`, true, 0, true, false},
		{"HTTP 429 with Retry-After", 429, map[string]string{"Retry-After": "4"}, `{"ok":false,"error":"ratelimited"}`, true, 4 * time.Second, false, false},
		{"internal_error", 200, nil, `{"ok":false,"error":"internal_error"}`, true, 0, false, false},
		{"invalid_auth", 200, nil, `{"ok":false,"error":"invalid_auth"}`, true, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, s := newBot(t, true)
			a := lifeAlert()
			r, err := b.Notify(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			s.FailNext("chat.update", tt.status, tt.header, tt.body)
			err = b.Update(context.Background(), a, alert.State{Status: alert.StatusAcknowledged}, r)
			if err == nil {
				t.Fatal("Update succeeded")
			}
			retry, wait := alert.RetryPolicy(err)
			if retry != tt.retry || wait != tt.wait {
				t.Errorf("RetryPolicy(%v) = %v, %v; want %v, %v", err, retry, wait, tt.retry, tt.wait)
			}
			ce, ok := errors.AsType[*alert.ChannelError](err)
			if ok != tt.channel || ok && ce.Channel != r.Channel {
				t.Errorf("ChannelError %v (%+v), want %v for %s", ok, ce, tt.channel, r.Channel)
			}
			if strings.Contains(err.Error(), testToken) || !strings.Contains(err.Error(), "chat.update") {
				t.Errorf("error %q: want chat.update named, the token not", err)
			}
		})
	}
	// A message the stand-in does not hold, and a receipt naming none.
	b, s := newBot(t, true)
	err := b.Update(context.Background(), lifeAlert(), alert.State{Status: alert.StatusResolved}, alert.Receipt{Channel: s.ChannelID("#fraud-alerts"), TS: "1.2"})
	if retry, _ := alert.RetryPolicy(err); err == nil || retry {
		t.Errorf("an update of a message that is gone: %v, retry %v", err, retry)
	}
	err = b.Update(context.Background(), lifeAlert(), alert.State{Status: alert.StatusResolved}, alert.Receipt{})
	if retry, _ := alert.RetryPolicy(err); err == nil || retry || len(s.Messages()) != 0 {
		t.Errorf("an update without a receipt: %v, retry %v, %d messages", err, retry, len(s.Messages()))
	}
}

// A digest's message carries other alerts: an update of one of them is
// said in its thread, naming the alert, and leaves the digest as it is.
func TestBotDigestUpdateRepliesInThread(t *testing.T) {
	b, s := newBot(t, true)
	a := lifeAlert()
	other := lifeAlert()
	other.OrderID, other.EventID = "ord-78", "evt-992"
	r, err := b.NotifyDigest(context.Background(), alert.Digest{Rule: a.Rule, Alerts: []alert.Alert{a, other}, List: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Digest {
		t.Fatalf("a digest's receipt %+v is not marked a digest's", r)
	}
	before, _ := s.Message(r.Channel, r.TS)
	if err := b.Update(context.Background(), a, alert.State{Status: alert.StatusAcknowledged, AckedBy: "slack:U1", AckedAt: t0}, r); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Message(r.Channel, r.TS)
	if after.Updates != 0 || string(after.Blocks) != string(before.Blocks) {
		t.Errorf("the digest was edited:\n%s", after.Blocks)
	}
	replies := s.Replies(r.Channel, r.TS)
	if len(replies) != 1 || !strings.Contains(replies[0].Text, "ord-77") || strings.Contains(replies[0].Text, "ord-78") ||
		!strings.Contains(replies[0].Text, "Acknowledged by <@U1>") {
		t.Errorf("replies %+v, want one naming order ord-77 and its acknowledgement", replies)
	}
}

// A repeat crossing goes into the thread of the alert holding the
// cooldown, short: the value against the threshold, the order, when.
func TestBotReply(t *testing.T) {
	b, s := newBot(t, true)
	a := lifeAlert()
	parent, err := b.Notify(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	repeat := lifeAlert()
	repeat.Current, repeat.OrderID, repeat.EventID = 1_400_000, "ord-<!here>", "evt-995"
	repeat.At = t0
	got, err := b.Reply(context.Background(), repeat, parent)
	if err != nil {
		t.Fatalf("Reply: %v", err)
	}
	replies := s.Replies(parent.Channel, parent.TS)
	if len(replies) != 1 || got != (alert.Receipt{Channel: replies[0].Channel, TS: replies[0].TS}) || got.TS == parent.TS {
		t.Fatalf("Reply returned %+v, replies %+v: want the reply's receipt", got, replies)
	}
	for _, w := range []string{"KRW 1,400,000", "threshold KRW 1,000,000", "ord-&lt;!here&gt;", "2026-12-01T12:05:00Z"} {
		if !strings.Contains(replies[0].Text, w) || !strings.Contains(unescaped(t, replies[0].Blocks), w) {
			t.Errorf("reply %q lacks %q", replies[0].Text, w)
		}
	}
	if _, err := b.Reply(context.Background(), repeat, alert.Receipt{}); err == nil || len(s.Messages()) != 2 {
		t.Errorf("a reply without a parent: %v, %d messages", err, len(s.Messages()))
	}
	// Slack's refusals are Notify's.
	s.FailNext("chat.postMessage", 429, map[string]string{"Retry-After": "2"}, `{"ok":false,"error":"ratelimited"}`)
	_, err = b.Reply(context.Background(), repeat, parent)
	if retry, wait := alert.RetryPolicy(err); !retry || wait != 2*time.Second {
		t.Errorf("a 429: %v (%v, %v)", err, retry, wait)
	}
}

// A note is plain text in the thread: it mentions nobody.
func TestBotNote(t *testing.T) {
	b, s := newBot(t, true)
	parent, err := b.Notify(context.Background(), lifeAlert())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Note(context.Background(), parent, ":alarm_clock: ended <!channel>"); err != nil {
		t.Fatal(err)
	}
	replies := s.Replies(parent.Channel, parent.TS)
	if len(replies) != 1 || replies[0].Text != ":alarm_clock: ended &lt;!channel&gt;" {
		t.Errorf("replies %+v", replies)
	}
}

// An incoming webhook can neither edit a message nor reply in a thread:
// its notifier is neither an Updater nor a Threader, and has no Bot.
func TestWebhookCannotEdit(t *testing.T) {
	hook, err := NewReceiver(Config{Timeout: testTimeout, WebhookURL: "https://hooks.slack.com" + testWebhookPath})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hook.(alert.Updater); ok {
		t.Error("a webhook is an Updater")
	}
	if _, ok := hook.(alert.Threader); ok {
		t.Error("a webhook is a Threader")
	}
	if _, ok := hook.(*Notifier).Bot(); ok {
		t.Error("a webhook has a Bot")
	}
	token, err := NewReceiver(Config{Timeout: testTimeout, Token: testToken, Channel: "#a"})
	if err != nil {
		t.Fatal(err)
	}
	_, up := token.(alert.Updater)
	_, th := token.(alert.Threader)
	_, dg := token.(alert.Digester)
	if !up || !th || !dg || token.Name() != ReceiverName {
		t.Errorf("token mode: Updater %v, Threader %v, Digester %v, name %q", up, th, dg, token.Name())
	}
}

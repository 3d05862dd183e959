package slack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// standIn is Slack's Web API as its docs describe chat.postMessage and
// chat.update, for a bot token: messages kept by channel id and ts.
// chat.postMessage takes a channel's id or name and, with thread_ts, posts
// a reply in the thread of the message that ts names (the parent's own ts:
// Slack asks not to use a reply's); it answers the channel's id and the
// new message's ts. chat.update takes a channel's id only (a name is
// channel_not_found), and the ts of a message there (else
// message_not_found), and replaces its text and blocks (without blocks,
// it keeps the old ones). Anything else, or a request without the token,
// fails the test.
type standIn struct {
	*httptest.Server
	t  *testing.T
	mu sync.Mutex
	// byName maps a channel's name to its id.
	byName   map[string]string
	messages map[string]*standInMessage // by channel id + "/" + ts
	order    []*standInMessage
	next     int
	// fail, when set for a method, answers its next call instead.
	fail map[string]func(w http.ResponseWriter)
}

type standInMessage struct {
	Channel, TS, ThreadTS, Text string
	Blocks                      json.RawMessage
	Updates                     int
}

func newStandIn(t *testing.T) *standIn {
	t.Helper()
	s := &standIn{t: t, byName: map[string]string{"#fraud-alerts": "C0ALERTS", "#fraud-risk": "C0RISK"},
		messages: map[string]*standInMessage{}, fail: map[string]func(http.ResponseWriter){}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// bot is a Bot posting to s, buttons on or off.
func (s *standIn) bot(t *testing.T, buttons bool) *Bot {
	t.Helper()
	n, err := New(Config{Timeout: testTimeout, Token: testToken, Channel: "#fraud-alerts", APIURL: s.URL + "/api", Buttons: buttons})
	if err != nil {
		t.Fatal(err)
	}
	b, ok := n.Bot()
	if !ok {
		t.Fatal("a token-mode notifier has no Bot")
	}
	return b
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		s.t.Errorf("stand-in: %s %s: not a form POST", r.Method, r.URL.Path)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if r.PostForm.Get("token") != testToken && r.Header.Get("Authorization") != "Bearer "+testToken {
		s.answer(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.fail[method]; f != nil {
		delete(s.fail, method)
		f(w)
		return
	}
	switch method {
	case "chat.postMessage":
		s.post(w, r)
	case "chat.update":
		s.update(w, r)
	default:
		s.t.Errorf("stand-in: unexpected method %s", method)
		http.NotFound(w, r)
	}
}

func (s *standIn) post(w http.ResponseWriter, r *http.Request) {
	ch := r.PostForm.Get("channel")
	if id, ok := s.byName[ch]; ok {
		ch = id
	}
	if !strings.HasPrefix(ch, "C") {
		s.answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	thread := r.PostForm.Get("thread_ts")
	if thread != "" {
		parent, ok := s.messages[ch+"/"+thread]
		if !ok || parent.ThreadTS != "" {
			s.t.Errorf("stand-in: thread_ts %q names no message of its own in %s", thread, ch)
		}
	}
	s.next++
	m := &standInMessage{Channel: ch, TS: fmt.Sprintf("1700000000.%06d", s.next), ThreadTS: thread,
		Text: r.PostForm.Get("text"), Blocks: json.RawMessage(r.PostForm.Get("blocks"))}
	s.messages[ch+"/"+m.TS] = m
	s.order = append(s.order, m)
	msg := map[string]any{"type": "message", "text": m.Text, "ts": m.TS}
	if thread != "" {
		msg["thread_ts"] = thread
	}
	s.answer(w, map[string]any{"ok": true, "channel": ch, "ts": m.TS, "message": msg})
}

func (s *standIn) update(w http.ResponseWriter, r *http.Request) {
	ch, ts := r.PostForm.Get("channel"), r.PostForm.Get("ts")
	if !strings.HasPrefix(ch, "C") || ts == "" {
		s.answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	m, ok := s.messages[ch+"/"+ts]
	if !ok {
		s.answer(w, map[string]any{"ok": false, "error": "message_not_found"})
		return
	}
	m.Text = r.PostForm.Get("text")
	if b := r.PostForm.Get("blocks"); b != "" {
		m.Blocks = json.RawMessage(b)
	}
	m.Updates++
	s.answer(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "text": m.Text})
}

func (s *standIn) answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// failNext makes the next call of method answer status, header and body.
func (s *standIn) failNext(method string, status int, header map[string]string, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = func(w http.ResponseWriter) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// message is a copy of the message at channel and ts.
func (s *standIn) message(channel, ts string) (standInMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channel+"/"+ts]
	if !ok {
		return standInMessage{}, false
	}
	return *m, true
}

// replies are the messages in the thread of ts, in order.
func (s *standIn) replies(channel, ts string) []standInMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []standInMessage
	for _, m := range s.order {
		if m.Channel == channel && m.ThreadTS == ts {
			out = append(out, *m)
		}
	}
	return out
}

// count is how many messages the stand-in holds.
func (s *standIn) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order)
}

package standin

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Slack is Slack's Web API as its docs describe chat.postMessage and
// chat.update, for one bot token: messages kept by channel id and ts.
// chat.postMessage takes a channel's id or name and, with thread_ts, posts
// a reply in the thread of the message that ts names (the parent's own ts:
// Slack asks not to use a reply's); it answers the channel's id and the
// new message's ts. chat.update takes a channel's id only (a name is
// channel_not_found) and the ts of a message there (else
// message_not_found), and replaces its text and blocks (without blocks,
// it keeps the old ones). A request without the token answers ok:false
// not_authed; any other method fails the test. s.URL + "/api/" is the
// api_url to configure.
type Slack struct {
	*httptest.Server
	t     testing.TB
	token string

	mu       sync.Mutex
	ids      map[string]string        // a channel's "#name" to its id
	messages map[string]*SlackMessage // by channel id + "/" + ts
	order    []*SlackMessage
	next     int
	fail     map[string]func(w http.ResponseWriter) // answers a method's next call instead
}

// SlackMessage is one message as it reads now: Updates counts the
// chat.update calls that changed it; ThreadTS is its parent's ts when it
// is a reply.
type SlackMessage struct {
	Channel, TS, ThreadTS, Text string
	Blocks                      json.RawMessage
	Updates                     int
}

// channelIDShape is what Slack's channel ids look like (C, then upper-case
// letters and digits); anything else is taken for a name.
var channelIDShape = regexp.MustCompile(`^C[A-Z0-9]{2,}$`)

// NewSlack starts a Slack that takes token (form field token, or
// Authorization: Bearer).
func NewSlack(t testing.TB, token string) *Slack {
	t.Helper()
	s := &Slack{t: t, token: token, ids: map[string]string{},
		messages: map[string]*SlackMessage{}, fail: map[string]func(http.ResponseWriter){}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// ChannelID is the id of the channel name ("#fraud", or "fraud"): stable
// for a name (made from it on first use), "C" and ten upper-case letters
// and digits.
func (s *Slack) ChannelID(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channelID(name)
}

func (s *Slack) channelID(name string) string {
	name = "#" + strings.TrimPrefix(name, "#")
	if id, ok := s.ids[name]; ok {
		return id
	}
	sum := sha256.Sum256([]byte(name))
	id := "C" + base32.StdEncoding.EncodeToString(sum[:])[:10]
	s.ids[name] = id
	return id
}

// resolve is the channel id a request's channel names: an id as it is, a
// name (with or without #) by ChannelID.
func (s *Slack) resolve(channel string) string {
	if channel == "" || channelIDShape.MatchString(channel) {
		return channel
	}
	return s.channelID(channel)
}

func (s *Slack) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		s.t.Errorf("standin.Slack: %s %s: not a form POST (%v)", r.Method, r.URL.Path, err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if r.PostForm.Get("token") != s.token && r.Header.Get("Authorization") != "Bearer "+s.token {
		answer(w, map[string]any{"ok": false, "error": "not_authed"})
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
		s.t.Errorf("standin.Slack: unexpected method %s (path %s)", method, r.URL.Path)
		http.NotFound(w, r)
	}
}

func (s *Slack) post(w http.ResponseWriter, r *http.Request) {
	ch := s.resolve(r.PostForm.Get("channel"))
	if ch == "" {
		answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	thread := r.PostForm.Get("thread_ts")
	if thread != "" {
		parent, ok := s.messages[ch+"/"+thread]
		if !ok || parent.ThreadTS != "" {
			s.t.Errorf("standin.Slack: chat.postMessage: thread_ts %q names no top-level message in %s", thread, ch)
		}
	}
	s.next++
	m := &SlackMessage{Channel: ch, TS: fmt.Sprintf("1700000000.%06d", s.next), ThreadTS: thread,
		Text: r.PostForm.Get("text"), Blocks: json.RawMessage(r.PostForm.Get("blocks"))}
	s.messages[ch+"/"+m.TS] = m
	s.order = append(s.order, m)
	msg := map[string]any{"type": "message", "text": m.Text, "ts": m.TS}
	if thread != "" {
		msg["thread_ts"] = thread
	}
	answer(w, map[string]any{"ok": true, "channel": ch, "ts": m.TS, "message": msg})
}

func (s *Slack) update(w http.ResponseWriter, r *http.Request) {
	ch, ts := r.PostForm.Get("channel"), r.PostForm.Get("ts")
	if !channelIDShape.MatchString(ch) || ts == "" {
		answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	m, ok := s.messages[ch+"/"+ts]
	if !ok {
		answer(w, map[string]any{"ok": false, "error": "message_not_found"})
		return
	}
	m.Text = r.PostForm.Get("text")
	if b := r.PostForm.Get("blocks"); b != "" {
		m.Blocks = json.RawMessage(b)
	}
	m.Updates++
	answer(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "text": m.Text})
}

func answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// FailNext makes the next call of method answer status, header and body
// instead (a 429 with Retry-After, an ok:false).
func (s *Slack) FailNext(method string, status int, header map[string]string, body string) {
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

// Messages are every message posted, replies included, in the order they
// were posted, as they read now.
func (s *Slack) Messages() []SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SlackMessage, 0, len(s.order))
	for _, m := range s.order {
		out = append(out, *m)
	}
	return out
}

// Message is the message at channel (an id) and ts.
func (s *Slack) Message(channel, ts string) (SlackMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channel+"/"+ts]
	if !ok {
		return SlackMessage{}, false
	}
	return *m, true
}

// Replies are the messages in the thread of the message at channel (an
// id) and ts, in order.
func (s *Slack) Replies(channel, ts string) []SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SlackMessage
	for _, m := range s.order {
		if m.Channel == channel && m.ThreadTS == ts {
			out = append(out, *m)
		}
	}
	return out
}

package standin_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/fraudwatch/fraudwatch/internal/standin"
)

const token = "xoxb-1-2-standin"

// Channel names get stable ids shaped as Slack's; a post names its
// channel by either.
func TestSlackChannelIDs(t *testing.T) {
	rec := &recorder{TB: t}
	s := standin.NewSlack(rec, token)
	id := s.ChannelID("#fraud")
	if !regexp.MustCompile(`^C[A-Z0-9]{8,}$`).MatchString(id) || s.ChannelID("#fraud") != id || s.ChannelID("fraud") != id {
		t.Errorf("ChannelID(#fraud) = %q, then %q and %q", id, s.ChannelID("#fraud"), s.ChannelID("fraud"))
	}
	if other := s.ChannelID("#risk"); other == id {
		t.Errorf("#risk and #fraud share the id %s", id)
	}
	for _, ch := range []string{"#fraud", id} {
		_, got := postForm(t, s.URL+"/api/chat.postMessage", url.Values{"token": {token}, "channel": {ch}, "text": {"hi"}}, nil)
		if got["ok"] != true || got["channel"] != id {
			t.Errorf("a post to %s: %v, want ok in %s", ch, got, id)
		}
	}
	rec.expectNoFailure(t)
}

// Without the token nothing is posted; with it, as a form field or a
// Bearer header, it is.
func TestSlackChecksTheToken(t *testing.T) {
	rec := &recorder{TB: t}
	s := standin.NewSlack(rec, token)
	u := s.URL + "/api/chat.postMessage"
	if _, got := postForm(t, u, url.Values{"token": {"xoxb-other"}, "channel": {"#a"}, "text": {"x"}}, nil); got["ok"] != false || got["error"] != "not_authed" {
		t.Errorf("a wrong token: %v", got)
	}
	if len(s.Messages()) != 0 {
		t.Errorf("a wrong token posted %+v", s.Messages())
	}
	if _, got := postForm(t, u, url.Values{"channel": {"#a"}, "text": {"x"}}, map[string]string{"Authorization": "Bearer " + token}); got["ok"] != true {
		t.Errorf("a Bearer token: %v", got)
	}
	rec.expectNoFailure(t)
}

// A reply names a top-level message; a reply to a reply fails the test.
// Messages keeps the order of posting, replies included.
func TestSlackThreads(t *testing.T) {
	rec := &recorder{TB: t}
	s := standin.NewSlack(rec, token)
	post := func(thread string) map[string]any {
		_, got := postForm(t, s.URL+"/api/chat.postMessage",
			url.Values{"token": {token}, "channel": {"#fraud"}, "text": {"m"}, "thread_ts": {thread}}, nil)
		return got
	}
	parent := post("")["ts"].(string)
	reply := post(parent)["ts"].(string)
	ch := s.ChannelID("#fraud")
	if r := s.Replies(ch, parent); len(r) != 1 || r[0].TS != reply || r[0].ThreadTS != parent {
		t.Errorf("replies %+v, want %s in the thread of %s", r, reply, parent)
	}
	rec.expectNoFailure(t)
	post(reply)
	rec.expectFailure(t, "names no top-level message")
	post("1.999")
	rec.expectFailure(t, "names no top-level message")
	if m := s.Messages(); len(m) != 4 || m[0].TS != parent || m[1].TS != reply {
		t.Errorf("messages %+v, want the four in order", m)
	}
}

// chat.update takes a channel's id and a message there; without blocks
// it keeps the old ones.
func TestSlackUpdate(t *testing.T) {
	rec := &recorder{TB: t}
	s := standin.NewSlack(rec, token)
	u := s.URL + "/api/chat.update"
	_, posted := postForm(t, s.URL+"/api/chat.postMessage",
		url.Values{"token": {token}, "channel": {"#fraud"}, "text": {"old"}, "blocks": {`[{"type":"divider"}]`}}, nil)
	ch, ts := posted["channel"].(string), posted["ts"].(string)
	for _, tc := range []struct {
		name, channel, ts, want string
	}{
		{"by name", "#fraud", ts, "channel_not_found"},
		{"no such message", ch, "1.2", "message_not_found"},
	} {
		if _, got := postForm(t, u, url.Values{"token": {token}, "channel": {tc.channel}, "ts": {tc.ts}, "text": {"new"}}, nil); got["error"] != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
	if _, got := postForm(t, u, url.Values{"token": {token}, "channel": {ch}, "ts": {ts}, "text": {"new"}}, nil); got["ok"] != true {
		t.Fatalf("an update: %v", got)
	}
	m, ok := s.Message(ch, ts)
	if !ok || m.Text != "new" || string(m.Blocks) != `[{"type":"divider"}]` || m.Updates != 1 {
		t.Errorf("after the update: %+v", m)
	}
	rec.expectNoFailure(t)
}

// FailNext answers one call as told; an unknown method fails the test.
func TestSlackFailNextAndUnknownMethods(t *testing.T) {
	rec := &recorder{TB: t}
	s := standin.NewSlack(rec, token)
	s.FailNext("chat.postMessage", http.StatusTooManyRequests, map[string]string{"Retry-After": "3"}, `{"ok":false,"error":"ratelimited"}`)
	form := url.Values{"token": {token}, "channel": {"#fraud"}, "text": {"x"}}
	if code, got := postForm(t, s.URL+"/api/chat.postMessage", form, nil); code != 429 || got["error"] != "ratelimited" {
		t.Errorf("the failed call: %d %v", code, got)
	}
	if _, got := postForm(t, s.URL+"/api/chat.postMessage", form, nil); got["ok"] != true || len(s.Messages()) != 1 {
		t.Errorf("the next call: %v, %d messages", got, len(s.Messages()))
	}
	rec.expectNoFailure(t)
	if code, _ := postForm(t, s.URL+"/api/chat.delete", form, nil); code != http.StatusNotFound {
		t.Errorf("chat.delete answered %d", code)
	}
	rec.expectFailure(t, "unexpected method chat.delete")
}

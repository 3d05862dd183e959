package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/lua"
)

// fakeSlackAPI is Slack's Web API as token mode uses it: it keeps each
// chat.postMessage's blocks, and each message update sent to a
// response_url.
type fakeSlackAPI struct {
	*httptest.Server
	mu      sync.Mutex
	posts   []string // the blocks of each post, as JSON
	updates []string // answers to clicks, through their response_url
	edits   []string // chat.update's blocks: a change of an alert's life shown by its dispatcher
	// gone is a channel chat.postMessage answers channel_not_found for.
	gone string
}

func newFakeSlackAPI(t *testing.T) *fakeSlackAPI {
	f := &fakeSlackAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		switch r.URL.Path {
		case "/api/chat.postMessage":
			form, _ := url.ParseQuery(string(body))
			if f.gone != "" && form.Get("channel") == f.gone {
				fmt.Fprint(w, `{"ok":false,"error":"channel_not_found"}`)
				return
			}
			f.posts = append(f.posts, form.Get("blocks"))
			// Each post a ts of its own, as Slack's: what a receipt keeps.
			fmt.Fprintf(w, `{"ok":true,"channel":"C1","ts":"1700000000.%06d"}`, len(f.posts))
		case "/response":
			f.updates = append(f.updates, string(body))
		case "/api/chat.update":
			form, _ := url.ParseQuery(string(body))
			f.edits = append(f.edits, form.Get("blocks"))
			fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, form.Get("channel"), form.Get("ts"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSlackAPI) edited() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.edits...)
}

func (f *fakeSlackAPI) snapshot() (posts, updates []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.posts...), append([]string(nil), f.updates...)
}

// Token mode with a signing secret and a listener: each alert carries its
// buttons; a signed click on "Snooze … 1 h" silences the group, so that
// its next crossing is not posted, and updates the message; a forged
// click changes nothing.
func TestSlackButtons(t *testing.T) {
	p := newPipeline(t, 1, `
rules:
  - name: burst
    metric: count
    group_by: [customer_id]
    window: 1s
    threshold: 2
    cooldown: 0s
`)
	api := newFakeSlackAPI(t)
	const secret = "test-signing-secret"
	p.cfg.Slack = config.Slack{Token: "xoxb-test", Channel: "#fraud", APIURL: api.URL + "/api/", Timeout: 5 * time.Second,
		SigningSecret: secret, InteractionsListen: "127.0.0.1:0"}
	opts := p.options()
	opts.Notifier = nil // the real Slack notifier, against the fake API
	r := p.startWith(opts)

	p.orders(0, ev{id: "a1", customer: "c", amount: 1}, ev{id: "a2", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "the first alert", func() bool { posts, _ := api.snapshot(); return len(posts) == 1 })
	posts, _ := api.snapshot()
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			// A button's text is an object, a context element's a string.
			Text json.RawMessage `json:"text"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(posts[0]), &blocks); err != nil {
		t.Fatalf("blocks %s: %v", posts[0], err)
	}
	last := blocks[len(blocks)-1]
	if last.Type != "actions" || len(last.Elements) != 7 || !strings.Contains(string(last.Elements[0].Text), `"text":"Snooze c 1 h"`) {
		t.Fatalf("the alert's last block is %+v, want its seven buttons (two Snoozes, Acknowledge, Resolve, Assign to me, Fraud, Not fraud)", last)
	}

	click := func(secretUsed string, button int) int {
		t.Helper()
		payload, _ := json.Marshal(map[string]any{
			"type": "block_actions", "user": map[string]string{"id": "U42"}, "response_url": api.URL + "/response",
			"actions": []map[string]string{{"action_id": last.Elements[button].ActionID, "block_id": "fraudwatch_actions", "type": "button", "value": last.Elements[button].Value}},
		})
		body, header := signed(secretUsed, payload, time.Now())
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.app.InteractionsAddr()+"/slack/interactions", strings.NewReader(body))
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := click("forged", 0); code != http.StatusUnauthorized {
		t.Fatalf("a forged click: %d, want 401", code)
	}
	if code := click(secret, 0); code != http.StatusOK {
		t.Fatalf("a signed click: %d", code)
	}
	waitFor(t, 10*time.Second, "the message's update", func() bool {
		_, updates := api.snapshot()
		return len(updates) == 1
	})
	if _, updates := api.snapshot(); !strings.Contains(updates[0], "Snoozed by") {
		t.Fatalf("the message became %s", updates[0])
	}
	// The snooze is a silence like any other, as silence list shows it.
	scripts, err := lua.New(lua.Config{}, p.rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := silence.NewStore(p.rdb, scripts, p.keys)
	list, err := store.List(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Rule != "burst" || list[0].Reason != "snoozed from Slack" || list[0].Author != "slack:U42" ||
		(list[0].Ends.Sub(list[0].Created)-time.Hour).Abs() > time.Second { // created is shown to the second
		t.Fatalf("silences %+v, want burst's group snoozed from Slack by slack:U42 for 1 h", list)
	}
	// The alert's record for Slack keeps the post's receipt; Acknowledge
	// goes into it, not into the silences' history.
	g := p.keys.Group([]string{"c"})
	recordKey := p.keys.Record(g, "burst", "a2", "slack")
	rec, err := scripts.Record(t.Context(), recordKey, "")
	if err != nil || rec.State != "sent" || rec.Receipt != `{"channel":"C1","ts":"1700000000.000001"}` {
		t.Fatalf("the alert's record %+v, %v; want it sent, with the post's channel and ts", rec, err)
	}
	if code := click(secret, 2); code != http.StatusOK {
		t.Fatalf("an acknowledge click: %d", code)
	}
	waitFor(t, 10*time.Second, "the acknowledgement's update", func() bool {
		_, updates := api.snapshot()
		return len(updates) >= 2
	})
	if _, updates := api.snapshot(); !strings.Contains(updates[1], `Acknowledged by \u003c@U42\u003e at `) {
		t.Fatalf("the message became %s", updates[1])
	}
	// The dispatcher shows the change where the alert is (chat.update), as
	// it would one made elsewhere (the CLI, another receiver).
	waitFor(t, 10*time.Second, "the message edited by its dispatcher", func() bool {
		for _, e := range api.edited() {
			if strings.Contains(e, `Acknowledged by \u003c@U42\u003e`) {
				return true
			}
		}
		return false
	})
	// The acknowledgement is the alert's life, shared by every receiver.
	lives, err := life.New(life.Config{KeyPrefix: p.cfg.Redis.KeyPrefix}, scripts, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := lives.Get(t.Context(), alert.Ref{Rule: "burst", Group: g.Encoding(), EventID: "a2"})
	if err != nil || entry.State.Status != alert.StatusAcknowledged || entry.State.AckedBy != "slack:U42" ||
		time.Since(entry.State.AckedAt).Abs() > time.Minute {
		t.Fatalf("the alert's life %+v, %v; want it acknowledged by slack:U42 now", entry, err)
	}
	if events, err := store.History(t.Context(), time.Now()); err != nil || len(events) != 0 {
		t.Fatalf("history %+v, %v; want nothing: the acknowledgement is the alert's", events, err)
	}

	// The next window's crossing of the snoozed group is silenced.
	key := p.keys.Counter(p.keys.Group([]string{"c"}), p.state("burst"))
	waitFor(t, 10*time.Second, "the 1s window to end", func() bool { return p.rdb.Exists(t.Context(), key).Val() == 0 })
	p.orders(0, ev{id: "b1", customer: "c", amount: 1}, ev{id: "b2", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "the silenced crossing", func() bool {
		return r.metric("fraudwatch_alerts_suppressed_total", "rule", "burst", "reason", "silenced") == 1
	})
	if posts, _ := api.snapshot(); len(posts) != 1 {
		t.Errorf("%d posts, want the first only", len(posts))
	}
	// Silenced, it still crossed: the count of crossings says so.
	if got := r.metric("fraudwatch_threshold_crossings_total", "rule", "burst"); got != 2 {
		t.Errorf("fraudwatch_threshold_crossings_total = %v, want 2, the silenced crossing too", got)
	}
}

// A message on the alerts topic that is no alert goes to the dead-letter
// topic, with why, and the alerts behind it are settled.
func TestUntrustedAlertsAreDeadLettered(t *testing.T) {
	p := newPipeline(t, 1, amountRules)
	p.start()
	p.kafka.ProduceTo(t, p.cfg.Kafka.AlertsTopic, 0, []byte(`{"id":`))
	got := p.kafka.ReadAll(t, p.cfg.Kafka.DeadLetterTopic, 1, 20*time.Second)
	headers := map[string]string{}
	for _, h := range got[0].Headers {
		headers[h.Key] = string(h.Value)
	}
	if !strings.HasPrefix(headers["fraudwatch-error"], "alert unreadable") || headers["fraudwatch-source-topic"] != p.cfg.Kafka.AlertsTopic {
		t.Errorf("dead letter headers %v", headers)
	}
}

// An alert whose channel Slack refuses is parked, the gauge names the
// channel, and the replica stays ready: the partition behind it flows
// (docs/alerts.md).
func TestParkedAlertsKeepTheReplicaReady(t *testing.T) {
	p := newPipeline(t, 1, `
rules:
  - name: burst
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 2
    channel: "#gone"
`)
	api := newFakeSlackAPI(t)
	api.gone = "#gone"
	p.cfg.Slack = config.Slack{Token: "xoxb-test", Channel: "#fraud", APIURL: api.URL + "/api/", Timeout: 5 * time.Second}
	opts := p.options()
	opts.Notifier = nil // the real Slack notifier, against the fake API
	r := p.startWith(opts)
	p.orders(0, ev{id: "a1", customer: "c", amount: 1}, ev{id: "a2", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "the parked alert", func() bool {
		return r.metric("fraudwatch_alerts_parked", "channel", "#gone") == 1
	})
	resp, err := http.Get("http://" + r.app.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz %d with an alert parked, want 200", resp.StatusCode)
	}
	if posts, _ := api.snapshot(); len(posts) != 0 {
		t.Errorf("%d posts, want none to the refused channel", len(posts))
	}
}

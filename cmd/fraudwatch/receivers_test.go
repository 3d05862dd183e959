package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/standin"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// routedRules send card-burst to every receiver, the rest to Slack.
const routedRules = `routes:
  - match: {rules: [card-burst]}
    receivers: [slack, cases, pager]
default_receivers: [slack]
rules:
  - name: card-burst
    metric: count
    group_by: [card_fingerprint]
    window: 2s
    threshold: 3
    cooldown: 10m
    severity: critical
  - name: customer-burst
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 1000
`

const (
	routedToken   = "xoxb-routed-test"
	routedSigning = "routed-signing-secret"
	routedPager   = "R0UTEDTESTR0UTEDTESTR0UTEDTEST12" // 32 characters, as PagerDuty's
)

// gate stands before a receiver: while it holds, each request waits (its
// body read) until released or until its client is gone, when it is never
// passed on: a replica killed mid-delivery has its request in flight.
type gate struct {
	next    http.Handler
	mu      sync.Mutex
	holding bool
	held    []http.Header // the requests held, as they came
	gone    int           // of them, those whose client went away
	release chan struct{}
}

func newGate(t *testing.T, next http.Handler) (*gate, string) {
	g := &gate{next: next, holding: true, release: make(chan struct{})}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	g.mu.Lock()
	hold := g.holding
	if hold {
		g.held = append(g.held, r.Header.Clone())
	}
	g.mu.Unlock()
	if hold {
		select {
		case <-g.release:
		case <-r.Context().Done():
			g.mu.Lock()
			g.gone++
			g.mu.Unlock()
			return
		}
	}
	// Released with its client gone too (select picks either when both
	// are ready): a dead replica's request is never passed on.
	if r.Context().Err() != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	g.next.ServeHTTP(w, r)
}

func (g *gate) holds() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// abandoned says that every request held has seen its client go: the
// server notices a dead client in the background, some time after the
// process is gone, and a gate opened before would pass its request on.
func (g *gate) abandoned() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held) > 0 && g.gone == len(g.held)
}

// first is the first request held.
func (g *gate) first() http.Header {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[0]
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holding {
		g.holding = false
		close(g.release)
	}
}

// routedWorld is the receivers of the end-to-end test and the fraudwatch
// replicas that deliver to them.
type routedWorld struct {
	slack            *standin.Slack
	hook             *standin.Webhook
	pager            *standin.PagerDuty
	gates            []*gate
	config, metrics  string
	interactions     string
	orders           *kafka.Writer
	brokers          []string
	outcomes, dlq    string // topics
	replicas         []*replica
	slackCh, slackTS string // where the first alert of card-A is
}

func newRoutedWorld(t *testing.T) *routedWorld {
	k := kafkatest.New(t)
	if !k.Real {
		if os.Getenv("CI") != "" {
			t.Fatal("the routed receivers test needs a real Kafka broker (" + kafkatest.EnvBrokers + ")")
		}
		t.Skip("needs a real Kafka broker: set " + kafkatest.EnvBrokers + " or run scripts/test.sh")
	}
	w := &routedWorld{slack: standin.NewSlack(t, routedToken), pager: standin.NewPagerDuty(t),
		metrics: freeAddr(t), interactions: freeAddr(t)}
	secret := standin.NewWebhookSecret(t)
	w.hook = standin.NewWebhook(t, secret)
	urls := make([]string, 3)
	for i, next := range []http.Handler{w.slack.Config.Handler, w.hook.Config.Handler, w.pager.Config.Handler} {
		var g *gate
		g, urls[i] = newGate(t, next)
		w.gates = append(w.gates, g)
	}
	orders := k.Topic(t, "orders", 2)
	w.brokers, w.outcomes, w.dlq = k.Brokers, k.Topic(t, "outcomes", 2), k.Topic(t, "dlq", 1)
	w.config = replicaConfig(t, testkit.Process{Brokers: k.Brokers[:1], Group: kafkatest.Group(t, "fw"), Orders: orders,
		Refunds: k.Topic(t, "refunds", 1), DeadLetter: w.dlq, Alerts: k.Topic(t, "alerts", 2),
		Outcomes: w.outcomes, RedisAddrs: redistest.Addrs(t), Cluster: redistest.Cluster(), Prefix: redistest.Prefix(t), Metrics: w.metrics}, routedRules)
	more := fmt.Sprintf(`slack:
  token: %q
  api_url: %q
  signing_secret: %q
  interactions_listen: %q
receivers:
  - name: slack
    slack: {channel: "#fraud"}
  - name: cases
    webhook: {url: %q, secrets: [%q]}
  - name: pager
    pagerduty: {routing_key: %q, url: %q}
`, routedToken, urls[0]+"/api/", routedSigning, w.interactions, urls[1]+"/hooks", secret, routedPager, urls[2]+"/v2/enqueue")
	f, err := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(more)
		err = errorsJoin(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	w.orders = &kafka.Writer{Addr: kafka.TCP(k.Brokers...), Topic: orders, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	t.Cleanup(func() { _ = w.orders.Close() })
	return w
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// start runs a replica; stopped (SIGTERM) when the test ends.
func (w *routedWorld) start(t *testing.T) *replica {
	cmd := command("run", "--config", w.config, "--log-format", "text")
	r := &replica{cmd: cmd, logs: &testkit.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	w.replicas = append(w.replicas, r)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("a replica's log, its end:\n%s", tail(r.logs))
		}
	})
	return r
}

// burst produces n orders of one card, each by a customer of its own.
func (w *routedWorld) burst(t *testing.T, card string, n int) {
	for i := range n {
		id := fmt.Sprintf("%s-%d-%d", card, time.Now().UnixNano(), i)
		v := fmt.Sprintf(`{"event_id":"e-%s","order_id":"o-%s","customer_id":"c-%s","card_fingerprint":%q,"amount":1000,"currency":"KRW"}`,
			id, id, id, card)
		if err := w.orders.WriteMessages(t.Context(), kafka.Message{Key: []byte(card), Value: []byte(v)}); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// posts are the top-level Slack messages about card.
func (w *routedWorld) posts(card string) []standin.SlackMessage {
	var out []standin.SlackMessage
	for _, m := range w.slack.Messages() {
		if m.ThreadTS == "" && strings.Contains(m.Text+string(m.Blocks), card) {
			out = append(out, m)
		}
	}
	return out
}

// events are PagerDuty's events of action.
func (w *routedWorld) events(action string) []map[string]any {
	var out []map[string]any
	for _, e := range w.pager.Events() {
		if e["event_action"] == action {
			out = append(out, e)
		}
	}
	return out
}

// hooks are the webhook's verified messages of type typ.
func (w *routedWorld) hooks(typ string) []standin.WebhookMessage {
	var out []standin.WebhookMessage
	for _, m := range w.hook.Messages() {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// hookList is what the webhook kept, for a failure's message: each
// message's type, webhook-id and alert.
func (w *routedWorld) hookList() string {
	var b strings.Builder
	for _, m := range w.hook.Messages() {
		var body struct {
			Alert struct {
				ID string `json:"id"`
			} `json:"alert"`
		}
		_ = json.Unmarshal(m.Body, &body)
		fmt.Fprintf(&b, "\n  %s webhook-id %s alert %s", m.Type, m.ID, body.Alert.ID)
	}
	return b.String()
}

// expireSnooze ends the one silence in force from the CLI.
func (w *routedWorld) expireSnooze(t *testing.T) {
	out, err := command("silence", "list", "--config", w.config).CombinedOutput()
	if err != nil {
		t.Fatalf("silence list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("silence list, want one silence:\n%s", out)
	}
	id := strings.Fields(lines[1])[0]
	if out, err := command("silence", "expire", id, "--config", w.config).CombinedOutput(); err != nil {
		t.Fatalf("silence expire %s: %v\n%s", id, err, out)
	}
}

// click signs and sends a click on the button action of the Slack message
// at channel and ts, as Slack would.
func (w *routedWorld) click(t *testing.T, action string) {
	m, ok := w.slack.Message(w.slackCh, w.slackTS)
	if !ok {
		t.Fatal("the alert's Slack message is gone")
	}
	var blocks []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
		t.Fatalf("the message's blocks: %v", err)
	}
	value := ""
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.ActionID == action {
				value = e.Value
			}
		}
	}
	if value == "" {
		t.Fatalf("the message has no %s button: %s", action, m.Blocks)
	}
	// Each click of Slack's is its own request (its trigger_id): the same
	// button clicked twice is not a replay.
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]string{"id": "U42"},
		"trigger_id": strconv.FormatInt(time.Now().UnixNano(), 10),
		"container":  map[string]string{"channel_id": w.slackCh, "message_ts": w.slackTS},
		"actions":    []map[string]string{{"action_id": action, "block_id": "fraudwatch_actions", "type": "button", "value": value}}})
	body := "payload=" + url.QueryEscape(string(payload))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(routedSigning))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	req, _ := http.NewRequest(http.MethodPost, "http://"+w.interactions+"/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the click answered %d", resp.StatusCode)
	}
}

package dispatch_test

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
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/slack"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// reply scripts one answer of fakeSlack.
type reply struct {
	status     int
	retryAfter string
	body       string
	hang       bool            // never answer; the client must give up
	gate       <-chan struct{} // answer once this is closed
}

// fakeSlack is a Slack endpoint (an incoming webhook, or chat.postMessage
// when the script answers JSON) that records what reached it and when.
type fakeSlack struct {
	*httptest.Server
	script func(n int) reply

	mu        sync.Mutex
	arrivals  []time.Time
	answered  []time.Time // when each answer was written; zero if none
	bodies    []string
	delivered int // requests answered with success
}

func newFakeSlack(t *testing.T, script func(n int) reply) *fakeSlack {
	t.Helper()
	f := &fakeSlack{script: script}
	stop := make(chan struct{})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets net/http notice a client that hangs up.
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.arrivals)
		f.arrivals = append(f.arrivals, time.Now())
		f.answered = append(f.answered, time.Time{})
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()

		rep := f.script(n)
		if rep.hang {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		if rep.gate != nil {
			select {
			case <-rep.gate:
			case <-stop:
				return
			}
		}
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		if rep.status == 0 {
			rep.status = http.StatusOK
		}
		if rep.body == "" {
			rep.body = "ok"
		}
		f.mu.Lock()
		f.answered[n] = time.Now()
		if rep.status == http.StatusOK && !strings.Contains(rep.body, `"ok":false`) {
			f.delivered++
		}
		f.mu.Unlock()
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
	}))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(stop) }) // before f.Close, which waits for handlers
	return f
}

func (f *fakeSlack) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.arrivals)
}

func (f *fakeSlack) allBodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func (f *fakeSlack) deliveredCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delivered
}

// webhook returns a webhook-mode notifier posting to f.
func (f *fakeSlack) webhook(t *testing.T) alert.Notifier {
	t.Helper()
	n, err := slack.New(slack.Config{WebhookURL: f.URL + testWebhookPath, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// token returns a bot-token notifier posting to f.
func (f *fakeSlack) token(t *testing.T) alert.Notifier {
	t.Helper()
	n, err := slack.New(slack.Config{Token: testToken, Channel: "#fraud-alerts", APIURL: f.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const okJSON = `{"ok":true,"channel":"C1","ts":"1.2"}`

type testEnv struct {
	d       *dispatch.Dispatcher
	log     *slog.Logger // the dispatcher's; nil discards
	reg     *prometheus.Registry
	rdb     redis.UniversalClient
	scripts *lua.Scripts
	pfx     string
	keys    lua.Keys
}

// testDispatcher returns a dispatcher with small backoffs, the real claim
// scripts on a real Redis, and its own registry.
func testDispatcher(t *testing.T, n alert.Notifier, cfg dispatch.DispatcherConfig) *testEnv {
	t.Helper()
	return testDispatcherLogging(t, n, cfg, nil)
}

// testDispatcherLogging is testDispatcher with the dispatcher's logger.
func testDispatcherLogging(t *testing.T, n alert.Notifier, cfg dispatch.DispatcherConfig, log *slog.Logger) *testEnv {
	t.Helper()
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 5 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 20 * time.Millisecond
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 10 * time.Second
	}
	if cfg.ChannelBudget == (lua.Budget{}) && cfg.OverallBudget == (lua.Budget{}) {
		// A budget no test meets unless it sets one (TestFloodKeepsToTheBudget).
		cfg.ChannelBudget, cfg.OverallBudget = lua.Budget{Rate: 1000, Burst: 1000}, lua.Budget{Rate: 1000, Burst: 1000}
	}
	env := &testEnv{reg: prometheus.NewRegistry(), rdb: redistest.Client(t), pfx: cfg.KeyPrefix, log: log}
	if env.pfx == "" {
		env.pfx = redistest.Prefix(t) // a replica of its own; a given prefix shares another's Redis state
	}
	scripts, err := lua.New(lua.Config{}, env.rdb, env.reg)
	if err != nil {
		t.Fatal(err)
	}
	env.scripts = scripts
	if env.keys, err = lua.NewKeys(env.pfx); err != nil {
		t.Fatal(err)
	}
	cfg.KeyPrefix = env.pfx
	d, err := dispatch.NewDispatcher(cfg, n, scripts, log, env.reg)
	if err != nil {
		t.Fatalf("NewDispatcher: %v", err)
	}
	env.d = d
	return env
}

// testFingerprint is the definition of the test alerts' rules.
const testFingerprint = "0badcafe"

// knowRule makes the dispatcher deliver the sample alert's rule, with its
// settings, as HandleMessages requires.
func (e *testEnv) knowRule() {
	a := sampleAlert()
	e.d.SetRules(map[string]dispatch.RuleSettings{a.Rule: settingsOf(a)})
}

// settingsOf is the rule of an alert as the dispatcher takes it.
func settingsOf(a alert.Alert) dispatch.RuleSettings {
	return dispatch.RuleSettings{Mode: a.Mode, Cooldown: a.Cooldown, Channel: a.Channel, Description: a.Description,
		Severity: a.Severity, Threshold: a.Threshold, Fingerprint: testFingerprint, Metric: a.Metric,
		GroupBy: []string{"card_fingerprint"}, Window: a.Window, WindowType: a.WindowType}
}

// cross writes the crossing marks of alerts as the counting scripts do:
// Redis then holds that each crossed, at its value.
func (e *testEnv) cross(t *testing.T, alerts ...alert.Alert) {
	t.Helper()
	for _, a := range alerts {
		g, err := e.keys.ParseGroup(a.Group)
		if err != nil {
			t.Fatal(err)
		}
		id := lua.IDOf(a.EventID)
		if err := e.rdb.HSet(t.Context(), e.keys.Marks(g, a.Rule+"."+a.Definition), string(id[:]), a.Current).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// message is a's message on the alerts topic, at offset, its crossing
// marked in Redis.
func (e *testEnv) message(t *testing.T, a alert.Alert, offset int64) kafka.Message {
	t.Helper()
	e.cross(t, a)
	return kafka.Message{Topic: "alerts", Offset: offset, Time: time.Now(), Value: encode(a)}
}

// scriptedBudget is the scripts, but the alert budget answers as scripted:
// each answer once, then "taken" for ever. calls counts what was asked.
type scriptedBudget struct {
	*lua.Scripts
	mu      sync.Mutex
	answers []bool
	calls   int
}

func (s *scriptedBudget) TakeBudget(context.Context, string, string, lua.Budget, lua.Budget) (bool, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.answers) == 0 {
		return true, 0, nil
	}
	ok := s.answers[0]
	s.answers = s.answers[1:]
	return ok, time.Millisecond, nil
}

// withBudget replaces e's dispatcher by one delivering through n whose
// alert budget answers as scripted, with the sample alert's rule.
func (e *testEnv) withBudget(t *testing.T, n alert.Notifier, answers ...bool) *scriptedBudget {
	t.Helper()
	sb := &scriptedBudget{Scripts: e.scripts, answers: answers}
	e.reg = prometheus.NewRegistry()
	cfg := dispatch.DispatcherConfig{KeyPrefix: e.pfx, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxAttempts: 4}
	d, err := dispatch.NewDispatcher(cfg, n, sb, e.log, e.reg)
	if err != nil {
		t.Fatal(err)
	}
	e.d = d
	e.knowRule()
	return sb
}

// handleOne handles one message of the alerts topic; nil means it may be
// committed.
func handleOne(ctx context.Context, d *dispatch.Dispatcher, msg kafka.Message) error {
	_, err := d.HandleMessages(ctx, []kafka.Message{msg})
	return err
}

// total sums every series of a counter.
func (e *testEnv) total(t *testing.T, name string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// alert returns an alert of group under the test's prefix, crossed by
// eventID, with its keys as the engine makes them.
func (e *testEnv) alert(group, eventID string) alert.Alert {
	a := sampleAlert()
	a.EventID = eventID
	a.ID = a.Rule + "/" + eventID
	a.GroupBy, a.GroupValues = []string{"card_fingerprint"}, []string{group}
	g := e.keys.Group(a.GroupValues)
	a.Group = g.Encoding()
	a.Definition = testFingerprint
	a.CooldownKey = e.keys.Cooldown(g, a.Rule)
	a.RecordKey = e.keys.AlertRecord(g, a.Rule, eventID)
	a.SilenceKey, a.RuleSilence = e.keys.Silences(g, a.Rule), e.keys.RuleSilences(g, a.Rule)
	return a
}

// deliver hands a to the dispatcher as the alerts topic does, its
// crossing marked and its rule in force with a's settings; nil means the
// message may be committed.
func (e *testEnv) deliver(t *testing.T, a alert.Alert) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.d.SetRules(map[string]dispatch.RuleSettings{a.Rule: settingsOf(a)})
	return handleOne(ctx, e.d, e.message(t, a, 1))
}

// metric reads one series from the registry; a missing series reads 0.
func (e *testEnv) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// series counts the label sets of a metric, so that a test can tell "one
// series at 1" from "the right series at 1 and another one too".
func (e *testEnv) series(t *testing.T, name string) int {
	t.Helper()
	n, err := testutil.GatherAndCount(e.reg, name)
	if err != nil {
		t.Fatalf("count %s: %v", name, err)
	}
	return n
}

func TestDispatcherDelivery(t *testing.T) {
	always := func(r reply) func(int) reply { return func(int) reply { return r } }
	seq := func(rs ...reply) func(int) reply {
		return func(n int) reply { return rs[min(n, len(rs)-1)] }
	}
	tests := []struct {
		name         string
		token        bool
		script       func(int) reply
		wantErr      bool // ErrNotDelivered: kept for a later attempt
		wantRequests int
		wantSent     float64
		wantFailures float64
		wantCooldown bool // the cooldown is still held afterwards
		// wantErrors counts the failed attempts that are retried, each
		// (fraudwatch_alert_delivery_errors_total).
		wantErrors float64
	}{
		{"delivered first time", false, always(reply{}), false, 1, 1, 0, true, 0},
		{"5xx twice then 200", false, seq(reply{status: 503}, reply{status: 500}, reply{}), false, 3, 1, 0, true, 2},
		{"429 without Retry-After then 200", false, seq(reply{status: 429}, reply{}), false, 2, 1, 0, true, 1},
		{"5xx forever is kept for later", false, always(reply{status: 502}), true, 4, 0, 0, true, 4},
		{"400 invalid_payload is refused for good", false, always(reply{status: 400, body: "invalid_payload"}), false, 1, 0, 1, false, 0},
		{"404 no_service is kept until fixed", false, always(reply{status: 404, body: "no_service"}), true, 4, 0, 0, true, 4},
		{"403 action_prohibited is kept until fixed", false, always(reply{status: 403, body: "action_prohibited"}), true, 4, 0, 0, true, 4},
		{"token ok", true, always(reply{body: okJSON}), false, 1, 1, 0, true, 0},
		// Only its own channel is wrong: parked, so that the partition
		// goes on (TestChannelRefusalParksOnlyItsAlerts).
		{"token ok:false channel_not_found is parked", true, always(reply{body: `{"ok":false,"error":"channel_not_found"}`}), false, 1, 0, 0, true, 0},
		{"token ok:false invalid_auth is kept until fixed", true, always(reply{body: `{"ok":false,"error":"invalid_auth"}`}), true, 4, 0, 0, true, 4},
		{"token ok:false invalid_blocks is refused for good", true, always(reply{body: `{"ok":false,"error":"invalid_blocks"}`}), false, 1, 0, 1, false, 0},
		{"token ok:false internal_error then ok", true, seq(reply{body: `{"ok":false,"error":"internal_error"}`}, reply{body: okJSON}), false, 2, 1, 0, true, 1},
		{"token ok:false ratelimited forever is kept for later", true, always(reply{body: `{"ok":false,"error":"ratelimited"}`}), true, 4, 0, 0, true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, tt.script)
			n := f.webhook(t)
			if tt.token {
				n = f.token(t)
			}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{MaxAttempts: 4})
			a := env.alert("g1", "evt-1")
			err := env.deliver(t, a)
			if tt.wantErr != errors.Is(err, dispatch.ErrNotDelivered) || (!tt.wantErr && err != nil) {
				t.Fatalf("HandleMessages = %v, want ErrNotDelivered: %v", err, tt.wantErr)
			}
			if got := f.requests(); got != tt.wantRequests {
				t.Errorf("Slack got %d requests, want %d", got, tt.wantRequests)
			}
			if got := f.deliveredCount(); float64(got) != tt.wantSent {
				t.Errorf("Slack accepted %d messages, want %v", got, tt.wantSent)
			}
			if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", a.Rule); got != tt.wantSent {
				t.Errorf("fraudwatch_alerts_sent_total = %v, want %v", got, tt.wantSent)
			}
			if got := env.metric(t, "fraudwatch_alert_failures_total", "rule", a.Rule); got != tt.wantFailures {
				t.Errorf("fraudwatch_alert_failures_total = %v, want %v", got, tt.wantFailures)
			}
			if got := env.total(t, "fraudwatch_alerts_suppressed_total"); got != 0 {
				t.Errorf("%v suppressed, want none", got)
			}
			if got := env.metric(t, "fraudwatch_alert_delivery_errors_total", "rule", a.Rule); got != tt.wantErrors {
				t.Errorf("fraudwatch_alert_delivery_errors_total = %v, want %v", got, tt.wantErrors)
			}
			held := env.rdb.Get(context.Background(), a.CooldownKey).Val() == a.ID
			if held != tt.wantCooldown {
				t.Errorf("cooldown held = %v, want %v", held, tt.wantCooldown)
			}
		})
	}
}

// TestDeliveredOnceHoweverOftenRedelivered plays the alerts topic's
// redeliveries: after a crash before the acknowledgement, after Slack was
// down for longer than one call's attempts, and after a permanent refusal.
func TestDeliveredOnceHoweverOftenRedelivered(t *testing.T) {
	var down sync.Mutex
	outage := true
	f := newFakeSlack(t, func(int) reply {
		down.Lock()
		defer down.Unlock()
		if outage {
			return reply{status: 503}
		}
		return reply{}
	})
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MaxAttempts: 3})
	a := env.alert("g1", "evt-1")
	for range 3 { // Slack down for three whole calls
		if err := env.deliver(t, a); !errors.Is(err, dispatch.ErrNotDelivered) {
			t.Fatalf("HandleMessages during the outage = %v, want ErrNotDelivered", err)
		}
	}
	down.Lock()
	outage = false
	down.Unlock()
	for i := range 3 { // then the alert comes round again, three times
		if err := env.deliver(t, a); err != nil {
			t.Fatalf("HandleMessages %d after the outage = %v", i, err)
		}
	}
	if got := f.deliveredCount(); got != 1 {
		t.Fatalf("Slack accepted %d messages, want exactly 1", got)
	}
	if got := f.requests(); got != 10 {
		t.Fatalf("Slack got %d requests, want 9 during the outage and 1 after", got)
	}
}

func TestDispatcherHonoursRetryAfter(t *testing.T) {
	f := newFakeSlack(t, func(n int) reply {
		if n == 0 {
			return reply{status: http.StatusTooManyRequests, retryAfter: "1"}
		}
		return reply{}
	})
	// The backoff is far below Retry-After: only Retry-After can explain
	// a wait of a second.
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err := env.deliver(t, env.alert("g1", "evt-1")); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.arrivals) != 2 {
		t.Fatalf("Slack got %d requests, want 2", len(f.arrivals))
	}
	if gap := f.arrivals[1].Sub(f.answered[0]); gap < time.Second {
		t.Errorf("retried %v after the 429, want at least the 1s of Retry-After", gap)
	}
	if f.delivered != 1 {
		t.Errorf("Slack accepted %d messages, want 1", f.delivered)
	}
}

// A Retry-After beyond MaxRetryAfter waits MaxRetryAfter: Slack asking
// for an hour must not hold a partition for an hour. The failed attempt
// counts as a delivery error.
func TestDispatcherCapsRetryAfter(t *testing.T) {
	f := newFakeSlack(t, func(n int) reply {
		if n == 0 {
			return reply{status: http.StatusTooManyRequests, retryAfter: "3600"}
		}
		return reply{}
	})
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MaxRetryAfter: 50 * time.Millisecond})
	if err := env.deliver(t, env.alert("g1", "evt-1")); err != nil {
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 1 {
		t.Errorf("Slack accepted %d messages, want 1", got)
	}
	if got := env.total(t, "fraudwatch_alert_delivery_errors_total"); got != 1 {
		t.Errorf("delivery errors = %v, want 1", got)
	}
}

func TestDispatcherCooldown(t *testing.T) {
	tests := []struct {
		name           string
		cooldown       time.Duration
		wantRequests   int
		wantSuppressed float64
	}{
		{"second alert within cooldown is suppressed", 10 * time.Minute, 1, 1},
		{"cooldown 0 sends both", 0, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, func(int) reply { return reply{} })
			env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
			first, second := env.alert("g1", "evt-first"), env.alert("g1", "evt-second")
			first.Cooldown, second.Cooldown = tt.cooldown, tt.cooldown
			for _, a := range []alert.Alert{first, second, second} { // the second one redelivered too
				if err := env.deliver(t, a); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.requests(); got != tt.wantRequests {
				t.Errorf("Slack got %d requests, want %d", got, tt.wantRequests)
			}
			bodies := f.allBodies()
			if len(bodies) == 0 || !strings.Contains(bodies[0], "evt-first") {
				t.Error("the first alert was not the one sent")
			}
			if tt.wantRequests == 1 && strings.Contains(strings.Join(bodies, ""), "evt-second") {
				t.Error("the suppressed alert reached Slack")
			}
			if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", first.Rule); got != float64(tt.wantRequests) {
				t.Errorf("fraudwatch_alerts_sent_total = %v, want %d", got, tt.wantRequests)
			}
			if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", first.Rule, "reason", "cooldown"); got != 2*tt.wantSuppressed {
				t.Errorf("suppressed{reason=cooldown} = %v, want %v (once per delivery)", got, 2*tt.wantSuppressed)
			}
			ctx := context.Background()
			val, err := env.rdb.Get(ctx, first.CooldownKey).Result()
			switch {
			case tt.cooldown == 0:
				if !errors.Is(err, redis.Nil) {
					t.Errorf("cooldown 0 wrote the key: %q, %v", val, err)
				}
			case err != nil || val != first.ID:
				t.Errorf("cooldown key holds %q (%v), want the first alert's id", val, err)
			default:
				if ttl := env.rdb.TTL(ctx, first.CooldownKey).Val(); ttl <= 0 || ttl > tt.cooldown {
					t.Errorf("cooldown key TTL %v, want in (0, %v]", ttl, tt.cooldown)
				}
			}
		})
	}
}

func TestDispatcherShadow(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	a := env.alert("g1", "evt-1")
	a.Mode = alert.ModeShadow
	if err := env.deliver(t, a); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(); got != 0 {
		t.Errorf("Slack got %d requests for a shadow alert", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", a.Rule, "reason", "shadow"); got != 1 {
		t.Errorf("suppressed{reason=shadow} = %v, want 1", got)
	}
	if got := env.total(t, "fraudwatch_alerts_suppressed_total"); got != 1 {
		t.Errorf("%v suppressed, want only the shadow one", got)
	}
	if n := env.rdb.Exists(context.Background(), a.CooldownKey, a.RecordKey).Val(); n != 0 {
		t.Error("a shadow alert took the cooldown or wrote a record")
	}
}

func TestHandleMessagesHonoursContext(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{hang: true} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	env.knowRule()
	msg := env.message(t, env.alert("g1", "evt-1"), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := handleOne(ctx, env.d, msg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("HandleMessages = %v, want the context's deadline", err)
	}
}

// A rule in force has its series at 0 before its first alert.
func TestSetRulesExportsZeroSeries(t *testing.T) {
	env := testDispatcher(t, alert.NotifierFunc(func(context.Context, alert.Alert) error { return nil }), dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{"quiet-rule": {Mode: alert.ModeAlert}})
	for _, name := range []string{"fraudwatch_alerts_sent_total", "fraudwatch_alert_failures_total",
		"fraudwatch_alerts_suppressed_total", "fraudwatch_alert_delivery_errors_total"} {
		if n := env.series(t, name); n == 0 {
			t.Errorf("%s: no series, want the rule's zero series", name)
		}
	}
}

// The outcome of a post Slack took is recorded even when the caller's
// context ends right then (a shutdown, or a rebalance cutting work short):
// otherwise the redelivered alert would be posted again.
func TestSentIsRecordedEvenWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSlack(t, func(int) reply { return reply{} })
	slackN := f.webhook(t)
	n := alert.NotifierFunc(func(c context.Context, a alert.Alert) error {
		err := slackN.Notify(c, a)
		cancel() // the context ends just after Slack took the post
		return err
	})
	env := testDispatcher(t, n, dispatch.DispatcherConfig{})
	env.knowRule()
	a := env.alert("g1", "evt-1")
	if err := handleOne(ctx, env.d, env.message(t, a, 1)); err != nil {
		t.Fatalf("HandleMessages = %v", err)
	}
	if err := env.deliver(t, a); err != nil { // the redelivery
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 1 {
		t.Fatalf("Slack accepted %d posts, want 1", got)
	}
}

// The dispatcher is the alerts group's handler: it reads each message of
// the alerts topic, skips what it cannot or must not post, and delivers
// the rest.
func TestHandleMessage(t *testing.T) {
	fresh := time.Now()
	tests := []struct {
		name      string
		value     func(a alert.Alert) []byte
		at        time.Time // the message's Kafka timestamp
		wantPosts int
		dropped   string // the reason label it is dropped with, if it is
	}{
		{"a fresh alert is delivered", encode, fresh, 1, ""},
		{"an alert within its records' lifetime is delivered", encode, fresh.Add(-6 * 24 * time.Hour), 1, ""},
		// Its record may be gone: posting it could post it twice.
		{"an alert older than its records is skipped", encode, fresh.Add(-7*24*time.Hour - time.Minute), 0, dispatch.DroppedStale},
		{"an unreadable message is skipped", func(alert.Alert) []byte { return []byte(`{"id":`) }, fresh, 0, dispatch.DroppedUnreadable},
		// The message's keys, id, mode, cooldown and channel are not
		// trusted: the dispatcher builds them from the rule and group.
		{"a message's keys are not used", func(a alert.Alert) []byte {
			a.CooldownKey, a.RecordKey, a.SilenceKey, a.RuleSilence, a.ID = "x", "x:y", "", "", "forged"
			a.Mode, a.Cooldown, a.Channel = alert.ModeShadow, 0, "#elsewhere"
			return encode(a)
		}, fresh, 1, ""},
		{"a group no encoding makes is dropped", func(a alert.Alert) []byte { a.Group = "a}{b"; return encode(a) }, fresh, 0, dispatch.DroppedMalformed},
		{"an event id too long is dropped", func(a alert.Alert) []byte { a.EventID = strings.Repeat("e", 129); return encode(a) }, fresh, 0, dispatch.DroppedMalformed},
		{"group fields without values are dropped", func(a alert.Alert) []byte { a.GroupValues = nil; return encode(a) }, fresh, 0, dispatch.DroppedMalformed},
		{"evidence within bounds is delivered", func(a alert.Alert) []byte {
			a.Evidence = slices.Repeat([]alert.Evidence{{OrderID: strings.Repeat("o", 128), EventID: "e", Value: strings.Repeat("v", 128)}}, 20)
			return encode(a)
		}, fresh, 1, ""},
		{"too much evidence is dropped", func(a alert.Alert) []byte {
			a.Evidence = make([]alert.Evidence, 21)
			return encode(a)
		}, fresh, 0, dispatch.DroppedMalformed},
		{"an evidence value too long is dropped", func(a alert.Alert) []byte {
			a.Evidence = []alert.Evidence{{OrderID: "o", EventID: "e", Value: strings.Repeat("v", 1000)}}
			return encode(a)
		}, fresh, 0, dispatch.DroppedMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, func(int) reply { return reply{} })
			env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
			env.knowRule()
			dead := &fakeDeadLetters{}
			env.d.SetDeadLetters(dead)
			a := env.alert("g1", "evt-1")
			env.cross(t, a)
			msg := kafka.Message{Topic: "alerts", Partition: 1, Offset: 7, Time: tt.at, Value: tt.value(a)}
			if err := handleOne(t.Context(), env.d, msg); err != nil {
				t.Fatalf("HandleMessage = %v, want nil: the message may be committed", err)
			}
			if got := f.deliveredCount(); got != tt.wantPosts {
				t.Errorf("Slack accepted %d posts, want %d", got, tt.wantPosts)
			}
			recorded := env.rdb.Exists(t.Context(), a.RecordKey).Val() == 1
			if recorded != (tt.wantPosts == 1) {
				t.Errorf("delivery record written: %v, want %v", recorded, tt.wantPosts == 1)
			}
			// The cooldown is the rule's (30m), whatever the message says.
			if ttl := env.rdb.TTL(t.Context(), a.CooldownKey).Val(); tt.wantPosts == 1 && (ttl <= 29*time.Minute || ttl > 30*time.Minute) {
				t.Errorf("cooldown TTL %v, want the rule's 30m", ttl)
			}
			if n := env.rdb.Exists(t.Context(), "x", "x:y").Val(); n != 0 {
				t.Error("the message's own keys were written")
			}
			dropped := env.total(t, "fraudwatch_alerts_dropped_total")
			if (dropped == 1) != (tt.dropped != "") {
				t.Errorf("%v alerts dropped", dropped)
			}
			if tt.dropped != "" && env.metric(t, "fraudwatch_alerts_dropped_total", "reason", tt.dropped) != 1 {
				t.Errorf("not dropped as %s", tt.dropped)
			}
			// Every dropped message but a stale one is dead-lettered, its
			// reason in fraudwatch-error, never a value from it.
			stale := tt.at.Before(fresh.Add(-7 * 24 * time.Hour))
			if wantDead := tt.wantPosts == 0 && !stale; (len(dead.whys) == 1) != wantDead || (wantDead && !strings.HasPrefix(dead.whys[0], "alert ")) {
				t.Errorf("dead letters %q, want one: %v", dead.whys, wantDead)
			}
			for _, why := range dead.whys {
				if strings.Contains(why, "a}{b") || strings.Contains(why, "eeeeeeee") {
					t.Errorf("a dead letter's reason carries a value: %q", why)
				}
			}
		})
	}
}

type fakeDeadLetters struct {
	whys []string
	err  error
}

func (f *fakeDeadLetters) DeadLetter(_ context.Context, _ kafka.Message, why string) error {
	if f.err != nil {
		return f.err
	}
	f.whys = append(f.whys, why)
	return nil
}

// A message that cannot be dead-lettered is not dropped either: it comes
// round again.
func TestHandleMessageKeepsWhatItCannotDeadLetter(t *testing.T) {
	env := testDispatcher(t, alert.NotifierFunc(func(context.Context, alert.Alert) error { return nil }), dispatch.DispatcherConfig{})
	env.knowRule()
	env.d.SetDeadLetters(&fakeDeadLetters{err: errors.New("kafka down")})
	msg := kafka.Message{Topic: "alerts", Time: time.Now(), Value: []byte(`{"id":`)}
	if err := handleOne(t.Context(), env.d, msg); err == nil {
		t.Fatal("an unreadable alert was acknowledged without its dead letter")
	}
	if got := env.total(t, "fraudwatch_alerts_dropped_total"); got != 0 {
		t.Errorf("%v counted as dropped", got)
	}
}

// An alert of a rule this replica does not know is retried for a while,
// since a rules file reloaded elsewhere may be reloaded here a moment
// later; the rule's settings then apply.
func TestHandleMessageWaitsForANewRule(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	env.knowRule()
	a := env.alert("g1", "evt-1")
	a.Rule = "new-rule"
	msg := env.message(t, a, 0)
	if err := handleOne(t.Context(), env.d, msg); err == nil {
		t.Fatal("an alert of an unknown rule was settled at once")
	}
	env.d.SetRules(map[string]dispatch.RuleSettings{"new-rule": {Mode: alert.ModeShadow}})
	if err := handleOne(t.Context(), env.d, msg); err != nil {
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 0 {
		t.Errorf("%d posts: the rule in force is a shadow rule", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", "new-rule", "reason", "shadow"); got != 1 {
		t.Errorf("suppressed{shadow} = %v", got)
	}
}

// The channel is the rule's, or the configured one: never the message's,
// which anyone who can write to the alerts topic could set.
func TestMessagesChannelIsNotUsed(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{body: okJSON} })
	env := testDispatcher(t, f.token(t), dispatch.DispatcherConfig{})
	env.knowRule() // a rule without a channel of its own
	a := env.alert("g1", "evt-1")
	a.Channel = "#elsewhere"
	msg := env.message(t, a, 7)
	if err := handleOne(t.Context(), env.d, msg); err != nil {
		t.Fatal(err)
	}
	bodies := f.allBodies()
	if len(bodies) != 1 {
		t.Fatalf("%d posts, want 1", len(bodies))
	}
	form, err := url.ParseQuery(bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := form.Get("channel"); got != "#fraud-alerts" {
		t.Errorf("posted to %q, want the configured #fraud-alerts", got)
	}
}

// Failed attempts wait longer each time, doubling from MinBackoff up to
// MaxBackoff (docs/alerts.md: 0.5 s doubling to 30 s by default).
func TestDeliveryBackoffDoubles(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{status: 503} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MinBackoff: 40 * time.Millisecond, MaxBackoff: 160 * time.Millisecond, MaxAttempts: 5})
	if err := env.deliver(t, env.alert("g1", "evt-1")); !errors.Is(err, dispatch.ErrNotDelivered) {
		t.Fatalf("HandleMessages = %v, want ErrNotDelivered", err)
	}
	f.mu.Lock()
	arrivals := slices.Clone(f.arrivals)
	f.mu.Unlock()
	if len(arrivals) != 5 {
		t.Fatalf("%d attempts, want 5", len(arrivals))
	}
	// At least: a wait may run long on a busy machine, never short.
	for i, want := range []time.Duration{40, 80, 160, 160} {
		if gap := arrivals[i+1].Sub(arrivals[i]); gap < want*time.Millisecond {
			t.Errorf("wait %d was %v, want at least %v", i+1, gap, want*time.Millisecond)
		}
	}
}

// refusingClaims is the scripts, but alert_claim refuses every alert's
// arguments.
type refusingClaims struct{ *lua.Scripts }

func (refusingClaims) ClaimAlert(context.Context, string, string, string, time.Duration, ...string) (lua.Claim, error) {
	return 0, fmt.Errorf("lua: alert_claim: %w", lua.ErrInvalidArguments)
}

// An alert the claim script refuses would be refused on every retry: it is
// dropped as refused and dead-lettered, and the partition goes on. Dropped
// messages are logged with their topic, partition and offset, never their
// contents.
func TestRefusedClaimIsDropped(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	env.reg = prometheus.NewRegistry()
	var logs bytes.Buffer // written by HandleMessage, read after it returns
	d, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{KeyPrefix: env.pfx}, f.webhook(t), refusingClaims{env.scripts},
		slog.New(slog.NewJSONHandler(&logs, nil)), env.reg)
	if err != nil {
		t.Fatal(err)
	}
	env.d = d
	env.knowRule()
	dead := &fakeDeadLetters{}
	d.SetDeadLetters(dead)
	a := env.alert("g1", "evt-1")
	msg := env.message(t, a, 7)
	msg.Partition = 1
	if err := handleOne(t.Context(), d, msg); err != nil {
		t.Fatalf("HandleMessage = %v, want nil: retrying would hold the partition for ever", err)
	}
	if n := f.requests(); n != 0 {
		t.Errorf("%d posts, want none", n)
	}
	if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedRefused); got != 1 {
		t.Errorf("dropped as refused: %v, want 1", got)
	}
	if len(dead.whys) != 1 || !strings.HasPrefix(dead.whys[0], "alert refused: ") {
		t.Errorf("dead letters %q, want one saying the alert was refused", dead.whys)
	}
	// Where it was, and never what the message holds.
	line := logLine(t, logs.String(), "alert dropped")
	if line["topic"] != "alerts" || line["partition"] != 1.0 || line["offset"] != 7.0 || line["reason"] != dispatch.DroppedRefused {
		t.Errorf("the dropped alert's log line %v, want topic alerts, partition 1, offset 7, reason refused", line)
	}
	if strings.Contains(logs.String(), "g1") {
		t.Errorf("the log holds the alert's group:\n%s", logs.String())
	}
	// A message that is no alert at all is logged the same way.
	logs.Reset()
	if err := handleOne(t.Context(), d, kafka.Message{Topic: "alerts", Partition: 2, Offset: 9, Time: time.Now(), Value: []byte(`{"rule":`)}); err != nil {
		t.Fatal(err)
	}
	line = logLine(t, logs.String(), "alert dropped")
	if line["topic"] != "alerts" || line["partition"] != 2.0 || line["offset"] != 9.0 || line["reason"] != dispatch.DroppedUnreadable {
		t.Errorf("the unreadable message's log line %v, want topic alerts, partition 2, offset 9, reason unreadable", line)
	}
}

// logLine is the JSON log line of msg in logs, decoded.
func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	lines := logLines(logs, msg)
	if len(lines) == 0 {
		t.Fatalf("no log line %q in:\n%s", msg, logs)
	}
	return lines[0]
}

func encode(a alert.Alert) []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic(err)
	}
	return b
}

// channelNotifier refuses the channel "#gone" while gone is set, and
// records what it posts.
type channelNotifier struct {
	mu    sync.Mutex
	gone  bool
	posts []string
	// second, when set, is closed by a second post to "#gone": the first
	// waits for it a while, so that two replicas posting one parked alert
	// at once would both post.
	second chan struct{}
	calls  int
}

func (n *channelNotifier) Notify(_ context.Context, a alert.Alert) error {
	n.mu.Lock()
	if n.gone && a.Channel == "#gone" {
		n.mu.Unlock()
		return &alert.ChannelError{Channel: a.Channel, Err: errors.New("slack: channel_not_found")}
	}
	if n.second != nil && a.Channel == "#gone" {
		n.calls++
		if n.calls == 2 {
			close(n.second)
		} else {
			n.mu.Unlock()
			select {
			case <-n.second:
			case <-time.After(300 * time.Millisecond):
			}
			n.mu.Lock()
		}
	}
	defer n.mu.Unlock()
	n.posts = append(n.posts, a.Rule+" "+a.EventID)
	return nil
}

func (n *channelNotifier) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.posts...)
}

// A rule whose channel Slack refuses parks its own alerts; the alerts of
// other rules behind it on the same partition go on. Retried once the
// channel is back, a parked alert is posted once, whichever replica
// retries it.
func TestChannelRefusalParksOnlyItsAlerts(t *testing.T) {
	n := &channelNotifier{gone: true}
	var logs bytes.Buffer // read while no retry runs
	env := testDispatcherLogging(t, n, dispatch.DispatcherConfig{}, slog.New(slog.NewJSONHandler(&logs, nil)))
	env.d.SetRules(map[string]dispatch.RuleSettings{
		"r-gone": {Mode: alert.ModeAlert, Channel: "#gone"},
		"r-ok":   {Mode: alert.ModeAlert, Channel: "#ok"},
	})
	gone, ok := env.alert("g1", "e1"), env.alert("g2", "e2")
	gone.Rule, ok.Rule = "r-gone", "r-ok"
	msgs := []kafka.Message{env.message(t, gone, 0), env.message(t, ok, 1)}
	done, err := env.d.HandleMessages(t.Context(), msgs)
	if err != nil || done != 2 {
		t.Fatalf("HandleMessages = %d, %v; want both acknowledged", done, err)
	}
	if got := n.snapshot(); len(got) != 1 || got[0] != "r-ok e2" {
		t.Fatalf("posts %v, want the other channel's alert", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#gone"); got != 1 {
		t.Errorf("parked{#gone} = %v, want 1", got)
	}
	if line := logLine(t, logs.String(), "alert parked: slack refuses its channel; other channels' alerts go on, and it is retried"); line["channel"] != "#gone" {
		t.Errorf("the parked alert's log line %v, want it to name #gone", line)
	}
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := n.snapshot(); len(got) != 1 {
		t.Fatalf("posts %v while the channel is still refused", got)
	}

	// The channel is back; two replicas retry at once.
	n.mu.Lock()
	n.gone, n.second = false, make(chan struct{})
	n.mu.Unlock()
	other := testDispatcher(t, n, dispatch.DispatcherConfig{KeyPrefix: env.pfx})
	var wg sync.WaitGroup
	for _, d := range []*dispatch.Dispatcher{env.d, other.d} {
		wg.Go(func() {
			if err := d.RetryParked(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := n.snapshot(); len(got) != 2 || got[1] != "r-gone e1" {
		t.Fatalf("posts %v, want the parked alert once", got)
	}
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#gone"); got != 0 {
		t.Errorf("parked{#gone} = %v after delivery", got)
	}
	if left := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); left != 0 {
		t.Errorf("%d alerts still parked", left)
	}
}

// RetryParkedEvery tries the parked alerts every ParkedRetry: once the
// channel is back, the parked alert is posted without anyone asking, once.
func TestParkedAlertsAreRetriedEveryParkedRetry(t *testing.T) {
	n := &channelNotifier{gone: true}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{ParkedRetry: 20 * time.Millisecond})
	gone := dispatch.RuleSettings{Mode: alert.ModeAlert, Channel: "#gone"}
	env.d.SetRules(map[string]dispatch.RuleSettings{"r-gone": gone, "r-later": gone})
	park := func(rule, event string, offset int64) {
		t.Helper()
		a := env.alert("g1", event)
		a.Rule = rule
		if done, err := env.d.HandleMessages(t.Context(), []kafka.Message{env.message(t, a, offset)}); err != nil || done != 1 {
			t.Fatalf("HandleMessages = %d, %v", done, err)
		}
	}
	setGone := func(v bool) {
		n.mu.Lock()
		n.gone = v
		n.mu.Unlock()
	}
	park("r-gone", "e1", 0)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { env.d.RetryParkedEvery(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	setGone(false)
	testkit.WaitFor(t, 10*time.Second, "the parked alert posted", func() bool { return len(n.snapshot()) > 0 })
	// Posted, it is not tried again. A second alert parked now is posted by
	// a later pass, which tries r-gone's alerts first (passes go by rule):
	// a retry of e1 would be posted before it.
	setGone(true)
	park("r-later", "e2", 1)
	setGone(false)
	testkit.WaitFor(t, 10*time.Second, "the second parked alert posted", func() bool { return len(n.snapshot()) > 1 })
	if got := n.snapshot(); !slices.Equal(got, []string{"r-gone e1", "r-later e2"}) {
		t.Fatalf("posts %v, want each parked alert once", got)
	}
	testkit.WaitFor(t, 10*time.Second, "the posted alerts unparked", func() bool {
		return env.rdb.HLen(t.Context(), env.keys.Parked()).Val() == 0
	})
}

// An alert of a rule without a channel of its own goes to slack.channel;
// parked, it counts under "(default)" from the start, as RetryParked and
// the zero series count it, whatever channel Slack's refusal names.
func TestParkedDefaultChannel(t *testing.T) {
	refuse := alert.NotifierFunc(func(context.Context, alert.Alert) error {
		return &alert.ChannelError{Channel: "#fraud", Err: errors.New("slack: not_in_channel")}
	})
	env := testDispatcher(t, refuse, dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert}})
	a := env.alert("g1", "e1")
	a.Rule = "r"
	if done, err := env.d.HandleMessages(t.Context(), []kafka.Message{env.message(t, a, 0)}); err != nil || done != 1 {
		t.Fatalf("HandleMessages = %d, %v; want it parked and acknowledged", done, err)
	}
	for _, when := range []string{"parked", "retried"} {
		if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "(default)"); got != 1 {
			t.Errorf("%s: parked{(default)} = %v, want 1", when, got)
		}
		if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#fraud"); got != 0 {
			t.Errorf("%s: parked{#fraud} = %v, want no such series", when, got)
		}
		if err := env.d.RetryParked(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A crossing published again after a crash can sit in one batch with its
// first message. Past the budget, both would read "pending" at claim time:
// the digest must carry the alert once, and the batch settle both.
func TestABatchPostsAnAlertOnceHoweverOftenItCarriesIt(t *testing.T) {
	tests := []struct {
		name   string
		order  []string // event ids, in the batch's order; each a group of its own
		posts  int      // what Slack takes: the first alert alone, then one digest
		listed map[string]int
	}{
		{"copies past the budget", []string{"e1", "e2", "e3", "e2", "e3", "e4"}, 2,
			map[string]int{"g-e1": 1, "g-e2": 1, "g-e3": 1, "g-e4": 1}},
		{"a copy of the alert sent alone", []string{"e1", "e2", "e1", "e1"}, 2,
			map[string]int{"g-e1": 1, "g-e2": 1}},
		{"copies only", []string{"e1", "e2", "e2", "e2"}, 2,
			map[string]int{"g-e1": 1, "g-e2": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, func(int) reply { return reply{} })
			env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
			// The first alert takes the budget's last message, the second
			// finds it spent; then the budget allows the digest.
			env.withBudget(t, f.webhook(t), true, false)
			var msgs []kafka.Message
			for i, id := range tt.order {
				a := env.alert("g-"+id, id)
				msgs = append(msgs, env.message(t, a, int64(i)))
			}
			n, err := env.d.HandleMessages(t.Context(), msgs)
			if err != nil || n != len(msgs) {
				t.Fatalf("HandleMessages = %d, %v; want %d, nil", n, err, len(msgs))
			}
			if got := f.deliveredCount(); got != tt.posts {
				t.Errorf("Slack took %d posts, want %d", got, tt.posts)
			}
			listed := map[string]int{}
			for _, body := range f.allBodies() {
				var post struct{ Text string } // a line an alert, in a digest too
				if err := json.Unmarshal([]byte(body), &post); err != nil {
					t.Fatal(err)
				}
				for g := range tt.listed {
					listed[g] += strings.Count(post.Text, "card_fingerprint="+g)
				}
			}
			for g, want := range tt.listed {
				if listed[g] != want {
					t.Errorf("%s posted %d times, want %d", g, listed[g], want)
				}
			}
			if got, want := env.metric(t, "fraudwatch_alerts_sent_total", "rule", sampleAlert().Rule), float64(len(tt.listed)); got != want {
				t.Errorf("sent_total = %v, want %v", got, want)
			}
			// Read again, the batch posts nothing more.
			if _, err := env.d.HandleMessages(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
			if got := f.deliveredCount(); got != tt.posts {
				t.Errorf("read again, Slack took %d posts, want still %d", got, tt.posts)
			}
		})
	}
}

// An alert takes one message from the budget when it is to be sent; the
// retries of that delivery take none, so a failed first attempt does not
// push the next alert past the budget.
func TestRetriesTakeNoBudget(t *testing.T) {
	f := newFakeSlack(t, func(n int) reply {
		if n == 0 {
			return reply{status: http.StatusServiceUnavailable}
		}
		return reply{}
	})
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	// Two messages, then none: a retry that took one would leave e2 past
	// the budget, and e2 and e3 would go out as one digest.
	budget := env.withBudget(t, f.webhook(t), true, true, false)
	var msgs []kafka.Message
	for i, id := range []string{"e1", "e2", "e3"} {
		msgs = append(msgs, env.message(t, env.alert("g-"+id, id), int64(i)))
	}
	if n, err := env.d.HandleMessages(t.Context(), msgs); err != nil || n != len(msgs) {
		t.Fatalf("HandleMessages = %d, %v; want %d, nil", n, err, len(msgs))
	}
	// e1 after a 503, e2 alone, e3 alone once the budget allowed it.
	if got := f.deliveredCount(); got != 3 {
		t.Errorf("Slack took %d posts, want 3: the first alert, retried, the second, and the third", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_digested_total", "rule", sampleAlert().Rule); got != 0 {
		t.Errorf("digested_total = %v, want 0", got)
	}
	// e1, e2, e3 refused, and e3 once the budget allowed it.
	if budget.calls != 4 {
		t.Errorf("the budget was asked %d times, want 4", budget.calls)
	}
}

// digestNotifier posts single alerts, and answers digests with digestErr.
type digestNotifier struct {
	mu        sync.Mutex
	digestErr error
	singles   int
	digests   int
}

func (n *digestNotifier) Notify(context.Context, alert.Alert) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.singles++
	return nil
}

func (n *digestNotifier) NotifyDigest(context.Context, alert.Digest) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.digests++
	return n.digestErr
}

// What becomes of the alerts of a digest Slack does not take
// (docs/alerts.md, Floods): refused for good, they are settled failed and their cooldowns
// given back; failing on, their messages stay uncommitted to come round
// again; refused for their channel, they are parked.
func TestDigestOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		committed  int     // messages HandleMessages lets commit, of 3
		failures   float64 // fraudwatch_alert_failures_total
		parked     int64   // alerts parked in Redis
		cooldowns  int64   // the held alerts' cooldown keys still held
		wantErr    bool
		wantPosted int    // digests tried
		recent     string // the held alerts' outcome on the status page, if settled
	}{
		{"taken", nil, 3, 0, 0, 2, false, 1, dispatch.OutcomeDigested},
		{"refused for good", alert.Permanent(errors.New("slack: invalid_blocks")), 3, 2, 0, 0, false, 1, dispatch.OutcomeFailed},
		{"failing on", errors.New("slack: 503"), 1, 0, 0, 2, true, 4, ""},
		{"its channel refused", &alert.ChannelError{Channel: "#gone", Err: errors.New("slack: is_archived")}, 3, 0, 2, 2, false, 1, dispatch.OutcomeParked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &digestNotifier{digestErr: tt.err}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{})
			env.withBudget(t, n, true, false)
			var msgs []kafka.Message
			var held []alert.Alert
			for i, id := range []string{"e1", "e2", "e3"} {
				a := env.alert("g-"+id, id)
				if i > 0 {
					held = append(held, a)
				}
				msgs = append(msgs, env.message(t, a, int64(i)))
			}
			committed, err := env.d.HandleMessages(t.Context(), msgs)
			if committed != tt.committed || (err != nil) != tt.wantErr {
				t.Fatalf("HandleMessages = %d, %v; want %d, error %v", committed, err, tt.committed, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, dispatch.ErrNotDelivered) {
				t.Errorf("error %v, want ErrNotDelivered", err)
			}
			if n.singles != 1 || n.digests != tt.wantPosted {
				t.Errorf("%d single posts, %d digests tried; want 1 and %d", n.singles, n.digests, tt.wantPosted)
			}
			if got := env.total(t, "fraudwatch_alert_failures_total"); got != tt.failures {
				t.Errorf("failures = %v, want %v", got, tt.failures)
			}
			if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != tt.parked {
				t.Errorf("%d alerts parked, want %d", got, tt.parked)
			}
			var cooldowns int64
			for _, a := range held {
				cooldowns += env.rdb.Exists(t.Context(), a.CooldownKey).Val()
			}
			if cooldowns != tt.cooldowns {
				t.Errorf("%d of the digest's cooldowns held, want %d", cooldowns, tt.cooldowns)
			}
			env.wantListed(t, held, tt.recent)
		})
	}
}

// Recent lists what this dispatcher settled, newest first, at most 50,
// with the group's fields and never its values.
func TestRecent(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	sent := env.alert("g1", "e1")
	again := env.alert("g1", "e2") // the same group: its cooldown
	shadow := env.alert("g2", "e3")
	shadow.Mode = alert.ModeShadow
	for _, a := range []alert.Alert{sent, again, shadow, sent} { // sent again: settled before, not listed again
		if err := env.deliver(t, a); err != nil {
			t.Fatal(err)
		}
	}
	got := env.d.Recent()
	var outcomes []string
	for _, s := range got {
		outcomes = append(outcomes, s.ID+" "+s.Outcome)
		if strings.Join(s.GroupBy, ",") != "card_fingerprint" || s.At.IsZero() {
			t.Errorf("%+v: want its group's field and when", s)
		}
	}
	want := []string{sent.Rule + "/e3 shadow", sent.Rule + "/e2 cooldown", sent.Rule + "/e1 sent"}
	if !slices.Equal(outcomes, want) {
		t.Fatalf("Recent = %q, want %q", outcomes, want)
	}
	for i := range 60 {
		a := env.alert(fmt.Sprint("many-", i), fmt.Sprint("m", i))
		a.Mode = alert.ModeShadow
		if err := env.deliver(t, a); err != nil {
			t.Fatal(err)
		}
	}
	if got := env.d.Recent(); len(got) != 50 || got[0].ID != sent.Rule+"/m59" || got[49].ID != sent.Rule+"/m10" {
		t.Errorf("Recent holds %d, first %s, last %s; want the latest 50", len(got), got[0].ID, got[len(got)-1].ID)
	}
}

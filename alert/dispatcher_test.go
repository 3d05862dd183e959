package alert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

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
func (f *fakeSlack) webhook(t *testing.T) Notifier {
	t.Helper()
	n, err := NewSlack(SlackConfig{WebhookURL: f.URL + testWebhookPath})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// token returns a bot-token notifier posting to f.
func (f *fakeSlack) token(t *testing.T) Notifier {
	t.Helper()
	n, err := NewSlack(SlackConfig{Token: testToken, Channel: "#fraud-alerts", APIURL: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const okJSON = `{"ok":true,"channel":"C1","ts":"1.2"}`

type testEnv struct {
	d   *Dispatcher
	reg *prometheus.Registry
	rdb *redis.Client
	pfx string
}

// testDispatcher starts a dispatcher with small backoffs, a real Redis as
// its cooldown store and its own registry.
func testDispatcher(t *testing.T, n Notifier, cfg DispatcherConfig) *testEnv {
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
	env := &testEnv{reg: prometheus.NewRegistry(), rdb: redistest.Client(t), pfx: redistest.Prefix(t)}
	d, err := NewDispatcher(cfg, n, env.rdb, nil, env.reg)
	if err != nil {
		t.Fatalf("NewDispatcher: %v", err)
	}
	env.d = d
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
	return env
}

// alert returns an alert whose cooldown key is group's under the test's
// prefix.
func (e *testEnv) alert(group, eventID string) Alert {
	a := sampleAlert()
	a.EventID = eventID
	a.CooldownKey = e.pfx + ":{" + a.Rule + ":" + group + "}:cooldown"
	return a
}

func (e *testEnv) publish(t *testing.T, a Alert) {
	t.Helper()
	if err := e.d.Publish(context.Background(), a); err != nil {
		t.Fatalf("Publish(%s): %v", a.EventID, err)
	}
}

// close drains the dispatcher: after it, every delivery has ended.
func (e *testEnv) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.d.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
		wantRequests int
		wantSent     float64
		wantFailures float64
	}{
		{"delivered first time", false, always(reply{}), 1, 1, 0},
		{"5xx twice then 200", false, seq(reply{status: 503}, reply{status: 500}, reply{}), 3, 1, 0},
		{"429 without Retry-After then 200", false, seq(reply{status: 429}, reply{}), 2, 1, 0},
		{"5xx forever gives up after MaxAttempts", false, always(reply{status: 502}), 4, 0, 1},
		{"permanent 404", false, always(reply{status: 404, body: "no_service"}), 1, 0, 1},
		{"permanent 403", false, always(reply{status: 403, body: "action_prohibited"}), 1, 0, 1},
		{"token ok", true, always(reply{body: okJSON}), 1, 1, 0},
		{"token ok:false channel_not_found", true, always(reply{body: `{"ok":false,"error":"channel_not_found"}`}), 1, 0, 1},
		{"token ok:false invalid_auth", true, always(reply{body: `{"ok":false,"error":"invalid_auth"}`}), 1, 0, 1},
		{"token ok:false internal_error then ok", true, seq(reply{body: `{"ok":false,"error":"internal_error"}`}, reply{body: okJSON}), 2, 1, 0},
		{"token ok:false ratelimited forever", true, always(reply{body: `{"ok":false,"error":"ratelimited"}`}), 4, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, tt.script)
			n := f.webhook(t)
			if tt.token {
				n = f.token(t)
			}
			env := testDispatcher(t, n, DispatcherConfig{MaxAttempts: 4})
			env.publish(t, env.alert("g1", "evt-1"))
			env.close(t)

			if got := f.requests(); got != tt.wantRequests {
				t.Errorf("Slack got %d requests, want %d", got, tt.wantRequests)
			}
			if got := f.deliveredCount(); float64(got) != tt.wantSent {
				t.Errorf("Slack accepted %d messages, want %v", got, tt.wantSent)
			}
			if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", "amount-per-card-10m"); got != tt.wantSent {
				t.Errorf("fraudwatch_alerts_sent_total = %v, want %v", got, tt.wantSent)
			}
			if got := env.metric(t, "fraudwatch_alert_failures_total", "rule", "amount-per-card-10m"); got != tt.wantFailures {
				t.Errorf("fraudwatch_alert_failures_total = %v, want %v", got, tt.wantFailures)
			}
			if got := env.series(t, "fraudwatch_alerts_suppressed_total"); got != 0 {
				t.Errorf("%d suppressed series, want none", got)
			}
		})
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
	env := testDispatcher(t, f.webhook(t), DispatcherConfig{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	env.publish(t, env.alert("g1", "evt-1"))
	env.close(t)

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
	if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", "amount-per-card-10m"); got != 1 {
		t.Errorf("fraudwatch_alerts_sent_total = %v, want 1", got)
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
			env := testDispatcher(t, f.webhook(t), DispatcherConfig{})
			first, second := env.alert("g1", "evt-first"), env.alert("g1", "evt-second")
			first.Cooldown, second.Cooldown = tt.cooldown, tt.cooldown
			env.publish(t, first)
			env.publish(t, second)
			env.close(t)

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
			if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", first.Rule, "reason", "cooldown"); got != tt.wantSuppressed {
				t.Errorf("suppressed{reason=cooldown} = %v, want %v", got, tt.wantSuppressed)
			}
			if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", first.Rule, "reason", "shadow"); got != 0 {
				t.Errorf("suppressed{reason=shadow} = %v, want 0", got)
			}

			ctx := context.Background()
			val, err := env.rdb.Get(ctx, first.CooldownKey).Result()
			switch {
			case tt.cooldown == 0:
				if !errors.Is(err, redis.Nil) {
					t.Errorf("cooldown 0 wrote the key: %q, %v", val, err)
				}
			case err != nil || val != "evt-first":
				t.Errorf("cooldown key holds %q (%v), want the first event id", val, err)
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
	env := testDispatcher(t, f.webhook(t), DispatcherConfig{})
	a := env.alert("g1", "evt-1")
	a.Mode = "shadow"
	env.publish(t, a)
	env.close(t)

	if got := f.requests(); got != 0 {
		t.Errorf("Slack got %d requests for a shadow alert", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", a.Rule, "reason", "shadow"); got != 1 {
		t.Errorf("suppressed{reason=shadow} = %v, want 1", got)
	}
	if got := env.series(t, "fraudwatch_alerts_suppressed_total"); got != 1 {
		t.Errorf("%d suppressed series, want only the shadow one", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", a.Rule); got != 0 {
		t.Errorf("fraudwatch_alerts_sent_total = %v, want 0", got)
	}
	if n := env.rdb.Exists(context.Background(), a.CooldownKey).Val(); n != 0 {
		t.Error("a shadow alert took the cooldown")
	}
}

func TestDispatcherCloseDrainsQueue(t *testing.T) {
	gate := make(chan struct{})
	f := newFakeSlack(t, func(int) reply { return reply{gate: gate} })
	env := testDispatcher(t, f.webhook(t), DispatcherConfig{QueueSize: 16})
	const alerts = 5
	for i := range alerts {
		env.publish(t, env.alert(fmt.Sprintf("g%d", i), fmt.Sprintf("evt-%d", i)))
	}
	waitFor(t, "the first delivery to reach Slack", func() bool { return f.requests() == 1 })

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closed <- env.d.Close(ctx)
	}()
	// Close has begun while four alerts still wait in the queue.
	waitFor(t, "Close to stop taking alerts", func() bool {
		env.d.mu.RLock()
		defer env.d.mu.RUnlock()
		return env.d.closed
	})
	if got := env.metric(t, "fraudwatch_alert_queue_length"); got != alerts-1 {
		t.Fatalf("queue length %v when Close began, want %d", got, alerts-1)
	}
	close(gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := f.deliveredCount(); got != alerts {
		t.Errorf("Slack accepted %d messages, want %d", got, alerts)
	}
	if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", "amount-per-card-10m"); got != alerts {
		t.Errorf("fraudwatch_alerts_sent_total = %v, want %d", got, alerts)
	}
	if got := env.metric(t, "fraudwatch_alert_queue_length"); got != 0 {
		t.Errorf("queue length %v after Close, want 0", got)
	}
}

func TestDispatcherCloseTwiceAndPublishAfterClose(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), DispatcherConfig{})
	env.publish(t, env.alert("g1", "evt-1"))
	env.close(t)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := env.d.Close(cancelled); err != nil {
		t.Errorf("second Close = %v, want the first result (nil)", err)
	}
	err := env.d.Publish(context.Background(), env.alert("g2", "evt-2"))
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
	if got := f.requests(); got != 1 {
		t.Errorf("Slack got %d requests, want 1", got)
	}
}

func TestDispatcherCloseTimesOutWhileSlackHangs(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{hang: true} })
	// Attempts would outlast the test: only Close can end them.
	env := testDispatcher(t, f.webhook(t), DispatcherConfig{AttemptTimeout: 10 * time.Minute})
	for i := range 3 {
		env.publish(t, env.alert(fmt.Sprintf("g%d", i), fmt.Sprintf("evt-%d", i)))
	}
	waitFor(t, "the first delivery to reach Slack", func() bool { return f.requests() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := env.d.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want a deadline error", err)
	}
	if got := env.metric(t, "fraudwatch_alert_failures_total", "rule", "amount-per-card-10m"); got != 3 {
		t.Errorf("fraudwatch_alert_failures_total = %v, want 3 (one in flight, two queued)", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", "amount-per-card-10m"); got != 0 {
		t.Errorf("fraudwatch_alerts_sent_total = %v, want 0", got)
	}
	if got := f.requests(); got != 1 {
		t.Errorf("Slack got %d requests, want 1: abandoned alerts are not attempted", got)
	}
	if err2 := env.d.Close(context.Background()); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Close = %v, want the first result %v", err2, err)
	}
}

// A Publish waiting on a full queue holds the dispatcher's read lock; Close
// must still end by its deadline.
func TestDispatcherCloseReleasesBlockedPublish(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{hang: true} })
	env := testDispatcher(t, f.webhook(t), DispatcherConfig{QueueSize: 1, AttemptTimeout: 10 * time.Minute})
	env.publish(t, env.alert("g0", "evt-0"))
	waitFor(t, "the first delivery to reach Slack", func() bool { return f.requests() == 1 })
	env.publish(t, env.alert("g1", "evt-1")) // fills the queue

	published := make(chan error, 1)
	go func() { published <- env.d.Publish(context.Background(), env.alert("g2", "evt-2")) }()
	waitFor(t, "Publish to wait on the full queue", publishBlocked)

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		closed <- env.d.Close(ctx)
	}()
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want a deadline error", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close ignored its deadline while a Publish waited on the full queue")
	}
	if err := <-published; !errors.Is(err, ErrClosed) {
		t.Errorf("the waiting Publish = %v, want ErrClosed", err)
	}
	if got := env.metric(t, "fraudwatch_alert_failures_total", "rule", "amount-per-card-10m"); got != 2 {
		t.Errorf("fraudwatch_alert_failures_total = %v, want 2", got)
	}
}

// publishBlocked reports whether a goroutine waits inside Publish.
func publishBlocked() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(g, "alert.(*Dispatcher).Publish(") {
			return true
		}
	}
	return false
}

func TestDispatcherPublishHonoursContext(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{hang: true} })
	env := testDispatcher(t, f.webhook(t), DispatcherConfig{QueueSize: 1, AttemptTimeout: 10 * time.Minute})
	env.publish(t, env.alert("g0", "evt-0"))
	waitFor(t, "the first delivery to reach Slack", func() bool { return f.requests() == 1 })
	env.publish(t, env.alert("g1", "evt-1"))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := env.d.Publish(ctx, env.alert("g2", "evt-2")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Publish on a full queue = %v, want a deadline error", err)
	}
	// Slack still hangs: give up on the two alerts rather than wait.
	stop, cancelStop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelStop()
	if err := env.d.Close(stop); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want a deadline error", err)
	}
}

func TestTrackExportsZeroSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, err := NewDispatcher(DispatcherConfig{}, NotifierFunc(func(context.Context, Alert) error { return nil }),
		redistest.Client(t), nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	d.Track("quiet-rule")
	for _, name := range []string{"fraudwatch_alerts_sent_total", "fraudwatch_alert_failures_total", "fraudwatch_alerts_suppressed_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n == 0 {
			t.Errorf("%s: %d series (%v), want the rule's zero series", name, n, err)
		}
	}
}

func TestCloseWithExpiredContextAfterDrainIsClean(t *testing.T) {
	d, err := NewDispatcher(DispatcherConfig{}, NotifierFunc(func(context.Context, Alert) error { return nil }),
		redistest.Client(t), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Nothing was queued, so nothing was abandoned, whatever the context.
	if err := d.Close(ctx); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
}

package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// A producer's retries (the same event_id at later offsets) are dropped by
// the consumer before any rule: counted once, in orders and refunds.
func TestProducerRetriesCountOnce(t *testing.T) {
	p := newPipeline(t, 1, amountRules)
	r := p.start()
	order := ev{id: "o1", customer: "c", card: "card-1", amount: 400}
	p.orders(0, order, order, order)
	waitFor(t, 20*time.Second, "one order and two retries", func() bool {
		return r.metric("fraudwatch_events_consumed_total", "type", "order") == 1 &&
			r.metric("fraudwatch_events_retried_total", "topic", p.cfg.Kafka.OrdersTopic) == 2
	})
	refund := ev{id: "r1", customer: "c", card: "card-1", amount: 150}
	p.refunds(0, refund, refund)
	waitFor(t, 20*time.Second, "one refund and a retry", func() bool {
		return r.metric("fraudwatch_events_consumed_total", "type", "refund") == 1 &&
			r.metric("fraudwatch_events_retried_total", "topic", p.cfg.Kafka.RefundsTopic) == 1
	})
	if got := p.counter("orders-per-customer", "c"); got != 1 {
		t.Fatalf("count = %d, want 1: one event, however often produced", got)
	}
	if got := p.counter("amount-per-card", "card-1"); got != 250 {
		t.Fatalf("amount = %d, want 400 - 150 once = 250", got)
	}
}

// A crossing redelivered (the group's offsets rewound, as after a crash
// before a commit) hands its alert off again, since a crash could have lost
// the first hand-off, and the dispatcher posts it once.
func TestRedeliveredCrossingHandsItsAlertOffAgainButPostsOnce(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	e1, e2, e3 := ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1}
	r := p.start()
	p.orders(0, e1, e2, e3)
	waitFor(t, 20*time.Second, "the alert", func() bool { return len(p.notes.list()) == 1 })
	r.stop(t) // commits offset 3
	p.rewind(t)
	r = p.start()
	waitFor(t, 20*time.Second, "the crossing redelivered", func() bool {
		return r.metric("fraudwatch_threshold_crossings_total", "rule", "orders-per-customer") == 1 &&
			r.metric("fraudwatch_events_consumed_total", "type", "order") == 3
	})
	alerts := p.kafka.ReadAll(t, p.cfg.Kafka.AlertsTopic, 2, 20*time.Second)
	for _, m := range alerts {
		a, err := alert.Decode(m.Value)
		if err != nil || a.ID != "orders-per-customer/3" {
			t.Fatalf("alerts topic holds %q (%v), want the crossing of event 3", m.Value, err)
		}
	}
	if got := p.counter("orders-per-customer", "c"); got != 3 {
		t.Fatalf("count = %d, want 3: the redelivered events counted once", got)
	}
	r.stop(t) // every alert message is settled and committed by now
	if got := len(p.notes.list()); got != 1 {
		t.Fatalf("alerts posted = %d, want 1", got)
	}
}

// flakySlack is an incoming webhook whose answers the test switches.
type flakySlack struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	retry    string // Retry-After on 429
	arrivals []time.Time
	answered []time.Time
	posts    []string // bodies answered 200
}

func newFlakySlack(t *testing.T) *flakySlack {
	f := &flakySlack{status: 200}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.arrivals = append(f.arrivals, time.Now())
		if f.retry != "" && f.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", f.retry)
		}
		w.WriteHeader(f.status)
		if f.status == 200 {
			f.posts = append(f.posts, string(body))
		}
		f.answered = append(f.answered, time.Now())
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *flakySlack) set(status int, retryAfter string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.retry = status, retryAfter
}

func (f *flakySlack) counts() (requests, posts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.arrivals), len(f.posts)
}

func (p *pipeline) withSlack(f *flakySlack) Options {
	p.cfg.Slack.WebhookURL = config.Secret(f.URL + "/hook")
	// One post an alert: these tests count posts (TestFlood lowers it).
	p.cfg.Slack.Rate, p.cfg.Slack.Burst, p.cfg.Slack.OverallRate, p.cfg.Slack.OverallBurst = 1000, 1000, 1000, 1000
	opts := p.options()
	opts.Notifier = nil // the configuration decides: the real Slack notifier
	return opts
}

func TestSlackOutageLongerThanTheRetryBudget(t *testing.T) {
	p := newPipeline(t, 2, countRule)
	slack := newFlakySlack(t)
	slack.set(http.StatusServiceUnavailable, "")
	opts := p.withSlack(slack)
	opts.Dispatcher = dispatch.DispatcherConfig{MaxAttempts: 2, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	r := p.startWith(opts)
	const customers = 4
	for c := range customers {
		for i := range 3 {
			p.orders(c%2, ev{id: fmt.Sprint(c, "-", i), customer: fmt.Sprint("c", c), amount: 1})
		}
	}
	// Far more requests than one call's two attempts: the alerts stayed
	// queued in their topic and came round again.
	waitFor(t, 30*time.Second, "retries past the budget", func() bool { req, _ := slack.counts(); return req >= 12 })
	// Events kept flowing meanwhile.
	if got := r.metric("fraudwatch_events_consumed_total", "type", "order"); got != 3*customers {
		t.Fatalf("consumed %v orders during the outage, want all %d", got, 3*customers)
	}
	slack.set(http.StatusOK, "")
	waitFor(t, 30*time.Second, "every alert after the outage", func() bool { _, posts := slack.counts(); return posts == customers })
	r.stop(t)
	_, posts := slack.counts()
	if posts != customers {
		t.Fatalf("posts = %d, want exactly %d, once each", posts, customers)
	}
	seen := map[string]bool{}
	slack.mu.Lock()
	for _, body := range slack.posts {
		for c := range customers {
			if strings.Contains(body, fmt.Sprintf("c%d", c)) {
				seen[fmt.Sprint(c)] = true
			}
		}
	}
	slack.mu.Unlock()
	if len(seen) != customers {
		t.Fatalf("alerts for %d customers arrived, want %d", len(seen), customers)
	}
	if got := r.metric("fraudwatch_alert_failures_total"); got != 0 {
		t.Fatalf("alert failures = %v, want 0: an outage is not a reason to give up", got)
	}
}

func TestRetryAfterIsHonouredWhileEventsFlow(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	slack := newFlakySlack(t)
	slack.set(http.StatusTooManyRequests, "2")
	r := p.startWith(p.withSlack(slack))
	p.orders(0, ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "the 429", func() bool { req, _ := slack.counts(); return req == 1 })
	slack.set(http.StatusOK, "")
	// While the dispatcher waits out Retry-After, events are consumed.
	for i := range 20 {
		p.orders(0, ev{id: fmt.Sprint("later-", i), customer: fmt.Sprint("other-", i), amount: 1})
	}
	waitFor(t, 20*time.Second, "the later orders", func() bool {
		return r.metric("fraudwatch_events_consumed_total", "type", "order") == 23
	})
	slack.mu.Lock()
	waiting := len(slack.arrivals) == 1
	slack.mu.Unlock()
	if !waiting {
		t.Fatal("the dispatcher did not wait for Retry-After before the events were consumed")
	}
	waitFor(t, 20*time.Second, "the alert", func() bool { _, posts := slack.counts(); return posts == 1 })
	slack.mu.Lock()
	defer slack.mu.Unlock()
	if gap := slack.arrivals[1].Sub(slack.answered[0]); gap < 2*time.Second {
		t.Fatalf("second request %v after the 429, want at least Retry-After's 2s", gap)
	}
}

func TestRedisOutageAndScriptFlushMidStream(t *testing.T) {
	p := newPipeline(t, 2, countRule)
	srv := redistest.Start(t)                                          // a private Redis this test restarts
	p.cfg.Redis.Addrs, p.cfg.Redis.Cluster = []string{srv.Addr}, false // a private single Redis, to break
	r := p.start()
	waitFor(t, 20*time.Second, "ready", func() bool { return r.ready(t) })
	rdb := redistest.Connect(t, srv.Addr)

	produce := func(from, to int) {
		for i := from; i < to; i++ {
			p.orders(i%2, ev{id: fmt.Sprint("e", i), customer: fmt.Sprint("c", i%5), amount: 1})
		}
	}
	consumed := func() float64 { return r.metric("fraudwatch_events_consumed_total", "type", "order") }

	produce(0, 20)
	waitFor(t, 20*time.Second, "the first 20", func() bool { return consumed() == 20 })
	// SCRIPT FLUSH mid-stream: the next calls reload the scripts.
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	produce(20, 40)
	waitFor(t, 20*time.Second, "20 more after SCRIPT FLUSH", func() bool { return consumed() == 40 })
	if got := r.metric("fraudwatch_script_errors_total"); got != 0 {
		t.Fatalf("script errors after SCRIPT FLUSH = %v, want 0 (NOSCRIPT is recovered)", got)
	}

	// Redis down: nothing is processed and nothing committed past it;
	// /readyz says why; the process keeps running.
	srv.Stop()
	produce(40, 60)
	waitFor(t, 20*time.Second, "/readyz to report Redis", func() bool { return !r.ready(t) })
	committedBefore := p.committed(t)
	// Wait until the stuck events were tried and failed several times:
	// commits had every chance to (wrongly) move on meanwhile.
	waitFor(t, 20*time.Second, "failed attempts on the stuck events", func() bool {
		return r.metric("fraudwatch_script_errors_total") >= 5
	})
	if got := consumed(); got != 40 {
		t.Fatalf("consumed %v with Redis down, want still 40", got)
	}
	if got := p.committed(t); got != committedBefore || got > 40 {
		t.Fatalf("committed %d (was %d) with Redis down: an offset passed unprocessed events", got, committedBefore)
	}

	srv.Restart(t) // an empty Redis: counters restart, as after a failover without persistence
	waitFor(t, 30*time.Second, "processing to resume", func() bool { return consumed() == 60 })
	waitFor(t, 20*time.Second, "/readyz 200", func() bool { return r.ready(t) })
	waitFor(t, 10*time.Second, "every offset committed", func() bool { return p.committed(t) == 60 })
	select {
	case err := <-r.done:
		t.Fatalf("the process stopped during the outage: %v", err)
	default:
	}
}

// A flood of alerts past the budget goes out as a digest of its rule:
// none dropped, each settled once, by the message that carried it; read
// again, none is posted again.
func TestFlood(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	slack := newFlakySlack(t)
	opts := p.withSlack(slack)
	// Two at once, then one every 2 s: the crossings arrive within
	// milliseconds, and those past the budget wait for one digest.
	p.cfg.Slack.Rate, p.cfg.Slack.Burst, p.cfg.Slack.OverallRate, p.cfg.Slack.OverallBurst = 0.5, 2, 100, 100
	r := p.startWith(opts)
	const customers = 12
	var evs []ev
	for c := range customers {
		for i := range 3 {
			evs = append(evs, ev{id: fmt.Sprint(c, "-", i), customer: fmt.Sprint("c", c), amount: 1})
		}
	}
	p.orders(0, evs...)
	waitFor(t, 30*time.Second, "every alert, digested or not", func() bool {
		return r.metric("fraudwatch_alerts_sent_total", "rule", "orders-per-customer") == customers
	})
	_, posts := slack.counts()
	digested := r.metric("fraudwatch_alerts_digested_total", "rule", "orders-per-customer")
	if posts >= customers || digested == 0 || float64(posts) != customers-digested+countDigests(slack) {
		t.Errorf("%d posts, %v alerts in digests: want fewer posts than alerts, the rest in digests", posts, digested)
	}
	slack.mu.Lock()
	var digest string
	for _, post := range slack.posts {
		if strings.Contains(post, "[DIGEST] orders-per-customer") {
			digest = post
		}
	}
	slack.mu.Unlock()
	if !strings.Contains(digest, "orders-per-customer customer_id=c") || !strings.Contains(digest, "more") && digested > 10 {
		t.Errorf("the digest lists no alerts: %s", digest)
	}
	r.stop(t)

	// Read again from the start, nothing is posted again.
	p.cfg.Kafka.GroupID += "-again"
	again := p.startWith(p.withSlack(slack))
	waitFor(t, 30*time.Second, "the alerts read again", func() bool {
		return again.metric("fraudwatch_alerts_suppressed_total", "rule", "orders-per-customer") == 0 &&
			again.metric("fraudwatch_consumer_lag", "topic", p.cfg.Kafka.AlertsTopic) == 0 && again.ready(t)
	})
	if _, now := slack.counts(); now != posts {
		t.Errorf("%d posts after reading the alerts again, want %d", now, posts)
	}
}

// countDigests counts the digest posts the webhook took.
func countDigests(f *flakySlack) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, post := range f.posts {
		if strings.Contains(post, "[DIGEST]") {
			n++
		}
	}
	return float64(n)
}

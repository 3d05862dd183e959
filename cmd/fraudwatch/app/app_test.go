package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// notes records every alert a pipeline delivers.
type notes struct {
	mu     sync.Mutex
	alerts []alert.Alert
}

func (n *notes) Name() string { return "notes" }

func (n *notes) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.alerts = append(n.alerts, a)
	return alert.Receipt{}, nil
}

func (n *notes) list() []alert.Alert {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]alert.Alert(nil), n.alerts...)
}

// pipeline is one test's Kafka topics, Redis key space and rules; any
// number of App replicas can be started on it.
type pipeline struct {
	t          *testing.T
	partitions int
	kafka      *kafkatest.Cluster
	cfg        config.Config
	rdb        redis.UniversalClient
	notes      *notes
	keys       lua.Keys
	started    []*replica
}

type replica struct {
	app    *App
	cancel context.CancelFunc
	done   chan error
	logs   *testkit.Buffer // its log, when the test keeps it (startOnFile)
}

func newPipeline(t *testing.T, partitions int, rulesYAML string) *pipeline {
	t.Helper()
	k := kafkatest.New(t)
	rs, err := config.ParseRules([]byte(rulesYAML), "test-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Kafka.Brokers = k.Brokers
	cfg.Kafka.GroupID = kafkatest.Group(t, "fw")
	cfg.Kafka.OrdersTopic = k.Topic(t, "orders", partitions)
	cfg.Kafka.RefundsTopic = k.Topic(t, "refunds", partitions)
	cfg.Kafka.DeadLetterTopic = k.Topic(t, "dlq", 1)
	cfg.Kafka.AlertsTopic = k.Topic(t, "alerts", 2)
	cfg.Kafka.OutcomesTopic = k.Topic(t, "outcomes", 1)
	cfg.Kafka.StartOffset = config.StartEarliest
	cfg.Redis.Addrs, cfg.Redis.Cluster = redistest.Addrs(t), redistest.Cluster()
	cfg.Redis.KeyPrefix = redistest.Prefix(t)
	cfg.Metrics.Listen = "127.0.0.1:0"
	cfg.ShutdownTimeout = 20 * time.Second
	cfg.Rules = rs
	keys, err := lua.NewKeysIn(cfg.Redis.KeyPrefix, cfg.Redis.CountingBuckets())
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline{t: t, partitions: partitions, kafka: k, cfg: cfg, rdb: redistest.Client(t), notes: &notes{}, keys: keys}
}

func (p *pipeline) options() Options {
	return Options{
		Notifier:   p.notes,
		Dispatcher: dispatch.DispatcherConfig{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		Groups: func(c *consumer.GroupConfig) {
			c.CommitInterval = 50 * time.Millisecond
			c.HeartbeatInterval = 200 * time.Millisecond
			c.SessionTimeout = 6 * time.Second
			c.RebalanceTimeout = 5 * time.Second
			c.RetryMin = 10 * time.Millisecond
			c.RetryMax = 100 * time.Millisecond
		},
	}
}

// start runs one more replica; it is stopped when the test ends.
func (p *pipeline) start() *replica {
	p.t.Helper()
	return p.startWith(p.options())
}

func (p *pipeline) startWith(opts Options) *replica {
	p.t.Helper()
	cfg := p.cfg
	a, err := New(&cfg, opts)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{app: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	p.started = append(p.started, r)
	p.t.Cleanup(func() { r.stop(p.t) })
	return r
}

// stop shuts the replica down as SIGTERM would and returns Run's error.
func (r *replica) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if !ok {
			return nil
		}
		close(r.done)
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("replica did not stop within 60s")
		return nil
	}
}

func (r *replica) ready(t *testing.T) bool {
	resp, err := http.Get("http://" + r.app.Addr() + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// metric sums a counter or gauge over the replica's series whose labels
// include the given ones.
func (r *replica) metric(name string, labels ...string) float64 {
	mfs, err := r.app.Registry().Gather()
	if err != nil {
		panic(err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !matches(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// total sums a metric over every replica started so far.
func (p *pipeline) total(name string, labels ...string) float64 {
	var sum float64
	for _, r := range p.started {
		sum += r.metric(name, labels...)
	}
	return sum
}

// waitFor is testkit.WaitFor, under the name these tests call it by.
var waitFor = testkit.WaitFor

type ev struct {
	id, typ, customer, card, currency string
	amount                            int64
}

func (e ev) json() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"event_id":%q,"order_id":"o-%s","customer_id":%q,"amount":%d`, e.id, e.id, e.customer, e.amount)
	if e.typ != "" {
		fmt.Fprintf(&b, `,"type":%q`, e.typ)
	}
	if e.card != "" {
		fmt.Fprintf(&b, `,"card_fingerprint":%q`, e.card)
	}
	if e.currency != "" {
		fmt.Fprintf(&b, `,"currency":%q`, e.currency)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func (p *pipeline) orders(partition int, evs ...ev) {
	p.t.Helper()
	vals := make([][]byte, len(evs))
	for i, e := range evs {
		vals[i] = e.json()
	}
	p.kafka.ProduceTo(p.t, p.cfg.Kafka.OrdersTopic, partition, vals...)
}

func (p *pipeline) refunds(partition int, evs ...ev) {
	p.t.Helper()
	vals := make([][]byte, len(evs))
	for i, e := range evs {
		vals[i] = e.json()
	}
	p.kafka.ProduceTo(p.t, p.cfg.Kafka.RefundsTopic, partition, vals...)
}

// state is what the keys of a rule's windows call it.
func (p *pipeline) state(rule string) string {
	for _, r := range p.cfg.Rules {
		if r.Name == rule {
			return r.State()
		}
	}
	p.t.Fatalf("no rule %s", rule)
	return ""
}

// counter reads a fixed rule's window's count.
func (p *pipeline) counter(rule string, values ...string) int64 {
	key := p.keys.Counter(p.keys.Group(values), p.state(rule))
	v, err := redistest.FixedCount(context.Background(), p.rdb, key)
	if err != nil && err != redis.Nil {
		p.t.Fatalf("read %s: %v", key, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && v != "" {
		p.t.Fatalf("read %s: %q: %v", key, v, err)
	}
	return n
}

// committed sums the events group's committed offsets on the orders topic:
// with offsets starting at 0, the number of orders committed.
func (p *pipeline) committed(t *testing.T) int64 {
	t.Helper()
	parts := make([]int, p.partitions)
	for i := range parts {
		parts[i] = i
	}
	client := &kafka.Client{Addr: kafka.TCP(p.kafka.Brokers...), Timeout: 5 * time.Second}
	resp, err := client.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{
		GroupID: p.cfg.Kafka.GroupID, Topics: map[string][]int{p.cfg.Kafka.OrdersTopic: parts},
	})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	var sum int64
	for _, po := range resp.Topics[p.cfg.Kafka.OrdersTopic] {
		if po.Error == nil && po.CommittedOffset > 0 {
			sum += po.CommittedOffset
		}
	}
	return sum
}

// rewind commits offset 0 for the events group on every orders partition,
// as if it had never committed: the group must have no member.
func (p *pipeline) rewind(t *testing.T) {
	t.Helper()
	offsets := make([]kafka.OffsetCommit, p.partitions)
	for i := range offsets {
		offsets[i] = kafka.OffsetCommit{Partition: i, Offset: 0}
	}
	client := &kafka.Client{Addr: kafka.TCP(p.kafka.Brokers...), Timeout: 5 * time.Second}
	resp, err := client.OffsetCommit(context.Background(), &kafka.OffsetCommitRequest{
		GroupID: p.cfg.Kafka.GroupID, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{p.cfg.Kafka.OrdersTopic: offsets},
	})
	if err != nil {
		t.Fatalf("offset commit: %v", err)
	}
	for _, po := range resp.Topics[p.cfg.Kafka.OrdersTopic] {
		if po.Error != nil {
			t.Fatalf("offset commit, partition %d: %v", po.Partition, po.Error)
		}
	}
}

const countRule = `
rules:
  - name: orders-per-customer
    description: Three orders by one customer within a minute
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 3
    severity: high
`

func TestOneAlertAcrossReplicas(t *testing.T) {
	const partitions, orders = 6, 12
	p := newPipeline(t, partitions, countRule)
	replicas := []*replica{p.start(), p.start(), p.start()}
	waitFor(t, 30*time.Second, "all replicas ready", func() bool {
		for _, r := range replicas {
			if !r.ready(t) {
				return false
			}
		}
		return true
	})
	// One customer's orders on every partition: replicas race on one key.
	for i := range orders {
		p.orders(i%partitions, ev{id: fmt.Sprint("e", i), customer: "c-1", amount: 100})
	}
	waitFor(t, 30*time.Second, "every order consumed", func() bool {
		return p.total("fraudwatch_events_consumed_total", "type", "order") == orders
	})
	busy := 0
	for _, r := range replicas {
		if r.metric("fraudwatch_events_consumed_total", "type", "order") > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Fatalf("only %d replica(s) consumed: the race was not exercised", busy)
	}
	waitFor(t, 10*time.Second, "the alert", func() bool { return len(p.notes.list()) >= 1 })
	for _, r := range replicas {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(p.notes.list()); got != 1 {
		t.Fatalf("alerts = %d, want exactly 1", got)
	}
	if got := p.total("fraudwatch_threshold_crossings_total", "rule", "orders-per-customer"); got != 1 {
		t.Fatalf("crossings = %v, want 1", got)
	}
	if got := p.counter("orders-per-customer", "c-1"); got != orders {
		t.Fatalf("counter = %d, want %d", got, orders)
	}
	a := p.notes.list()[0]
	if a.Rule != "orders-per-customer" || a.Current != 3 || a.Threshold != 3 || a.GroupValues[0] != "c-1" {
		t.Fatalf("alert = %+v", a)
	}
	// Its evidence: the crossing order first, then the two before it
	// (the threshold is within evidence), unless another replica counted
	// one of them and had not written its entry yet when the crossing read
	// the list (docs/alerts.md, Evidence).
	seen := map[string]bool{}
	for _, e := range a.Evidence {
		seen[e.EventID] = true
	}
	if n := len(a.Evidence); n < 1 || n > 3 || a.Evidence[0].EventID != a.EventID || len(seen) != n {
		t.Fatalf("evidence %+v, want the crossing order, and at most the two before it", a.Evidence)
	}
}

const amountRules = `
rules:
  - name: orders-per-customer
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 10
  - name: amount-per-card
    description: More than 1,500 won by one card within ten minutes
    metric: amount
    group_by: [card_fingerprint]
    window: 10m
    threshold: 1500
`

func TestRefundsLowerAmountRulesOnly(t *testing.T) {
	p := newPipeline(t, 1, amountRules)
	r := p.start()
	consumed := func(typ string, n float64) func() bool {
		return func() bool { return r.metric("fraudwatch_events_consumed_total", "type", typ) == n }
	}
	p.orders(0,
		ev{id: "o1", customer: "c", card: "card-1", amount: 400, currency: "KRW"},
		ev{id: "o2", customer: "c", card: "card-1", amount: 400, currency: "KRW"},
		ev{id: "o3", customer: "c", card: "card-1", amount: 400, currency: "KRW"})
	waitFor(t, 20*time.Second, "three orders", consumed("order", 3))
	p.refunds(0, ev{id: "r1", customer: "c", card: "card-1", amount: 500})
	waitFor(t, 20*time.Second, "the refund", consumed("refund", 1))
	if got := p.counter("amount-per-card", "card-1"); got != 700 {
		t.Fatalf("amount after refund = %d, want 700", got)
	}
	if got := p.counter("orders-per-customer", "c"); got != 3 {
		t.Fatalf("count after refund = %d, want 3 (refunds never lower counts)", got)
	}
	// 700 + 700 stays under 1500 only because the refund was subtracted.
	p.orders(0, ev{id: "o4", customer: "c", card: "card-1", amount: 700, currency: "KRW"})
	waitFor(t, 20*time.Second, "the fourth order", consumed("order", 4))
	if got := p.counter("amount-per-card", "card-1"); got != 1400 {
		t.Fatalf("amount = %d, want 1400", got)
	}
	p.orders(0, ev{id: "o5", customer: "c", card: "card-1", amount: 100, currency: "KRW"})
	waitFor(t, 20*time.Second, "the amount alert", func() bool { return len(p.notes.list()) == 1 })
	if a := p.notes.list()[0]; a.Rule != "amount-per-card" || a.Current != 1500 || a.Currency != "KRW" || a.OrderID != "o-o5" {
		t.Fatalf("alert = %+v", a)
	}

	// A refund larger than what is left clamps at zero and is counted.
	p.refunds(0, ev{id: "r2", customer: "c", card: "card-1", amount: 1_000_000})
	waitFor(t, 20*time.Second, "the clamped refund", func() bool {
		return r.metric("fraudwatch_refunds_clamped_total", "rule", "amount-per-card") == 1
	})
	if got := p.counter("amount-per-card", "card-1"); got != 0 {
		t.Fatalf("amount after clamp = %d, want 0", got)
	}
}

func TestCooldownSuppressesASecondCrossing(t *testing.T) {
	p := newPipeline(t, 1, `
rules:
  - name: burst
    metric: count
    group_by: [customer_id]
    window: 1s
    threshold: 2
    cooldown: 1h
`)
	r := p.start()
	p.orders(0, ev{id: "a1", customer: "c", amount: 1}, ev{id: "a2", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "first alert", func() bool { return r.metric("fraudwatch_alerts_sent_total", "rule", "burst") == 1 })
	key := p.keys.Counter(p.keys.Group([]string{"c"}), p.state("burst"))
	waitFor(t, 10*time.Second, "the 1s window to end", func() bool { return p.rdb.Exists(context.Background(), key).Val() == 0 })
	p.orders(0, ev{id: "b1", customer: "c", amount: 1}, ev{id: "b2", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "the suppressed crossing", func() bool {
		return r.metric("fraudwatch_alerts_suppressed_total", "rule", "burst", "reason", "cooldown") == 1
	})
	if got := r.metric("fraudwatch_threshold_crossings_total", "rule", "burst"); got != 2 {
		t.Fatalf("crossings = %v, want 2", got)
	}
	if got := len(p.notes.list()); got != 1 {
		t.Fatalf("alerts = %d, want 1", got)
	}
}

func TestShadowRulesNeverNotify(t *testing.T) {
	p := newPipeline(t, 1, `
rules:
  - name: shadow-burst
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 2
    mode: shadow
  - name: live-burst
    metric: count
    group_by: [customer_id]
    window: 1m
    threshold: 3
`)
	r := p.start()
	p.orders(0, ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "the live alert", func() bool { return len(p.notes.list()) == 1 })
	// The two crossings travel under different keys, so the dispatcher
	// may take the live one first: wait for the shadow one too.
	waitFor(t, 20*time.Second, "the shadow suppression", func() bool {
		return r.metric("fraudwatch_alerts_suppressed_total", "rule", "shadow-burst", "reason", "shadow") >= 1
	})
	if got := r.metric("fraudwatch_alerts_suppressed_total", "rule", "shadow-burst", "reason", "shadow"); got != 1 {
		t.Fatalf("shadow suppressions = %v, want 1", got)
	}
	if got := r.metric("fraudwatch_threshold_crossings_total", "rule", "shadow-burst"); got != 1 {
		t.Fatalf("shadow crossings = %v, want 1", got)
	}
	for _, a := range p.notes.list() {
		if a.Rule == "shadow-burst" {
			t.Fatal("a shadow rule notified")
		}
	}
}

func TestInvalidEventsDoNotStopTheStream(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	r := p.start()
	p.kafka.ProduceTo(t, p.cfg.Kafka.OrdersTopic, 0,
		ev{id: "1", customer: "c", amount: 1}.json(),
		[]byte(`{"broken`),
		ev{id: "2", customer: "c", amount: -5}.json(),
		ev{id: "3", customer: "c", amount: 1}.json(),
		ev{id: "4", customer: "c", amount: 1}.json())
	waitFor(t, 20*time.Second, "the alert past the invalid events", func() bool { return len(p.notes.list()) == 1 })
	dead := p.kafka.ReadAll(t, p.cfg.Kafka.DeadLetterTopic, 2, 20*time.Second)
	if len(dead) != 2 {
		t.Fatalf("dead letters = %d, want 2", len(dead))
	}
	if got := r.metric("fraudwatch_events_invalid_total"); got != 2 {
		t.Fatalf("invalid events = %v, want 2", got)
	}
}

func TestShutdownCommitsAndARestartReAlertsNothing(t *testing.T) {
	p := newPipeline(t, 2, countRule)
	first := p.start()
	for i := range 5 {
		p.orders(i%2, ev{id: fmt.Sprint("e", i), customer: "c", amount: 1})
	}
	waitFor(t, 20*time.Second, "five orders", func() bool {
		return first.metric("fraudwatch_events_consumed_total", "type", "order") == 5
	})
	waitFor(t, 10*time.Second, "the alert", func() bool { return len(p.notes.list()) == 1 })
	start := time.Now()
	if err := first.stop(t); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if d := time.Since(start); d > p.cfg.ShutdownTimeout {
		t.Fatalf("shutdown took %v, more than shutdown_timeout", d)
	}

	second := p.start()
	p.orders(0, ev{id: "sentinel", customer: "other", amount: 1})
	waitFor(t, 20*time.Second, "the sentinel", func() bool {
		return second.metric("fraudwatch_events_consumed_total", "type", "order") >= 1
	})
	if got := second.metric("fraudwatch_events_consumed_total", "type", "order"); got != 1 {
		t.Fatalf("restart consumed %v orders, want only the sentinel", got)
	}
	if got := len(p.notes.list()); got != 1 {
		t.Fatalf("alerts after restart = %d, want still 1", got)
	}
	if got := p.counter("orders-per-customer", "c"); got != 5 {
		t.Fatalf("counter = %d, want 5 (nothing counted twice)", got)
	}
}

// Until every topic it needs exists, a replica is not ready, and /readyz
// names the missing ones (README, Running it for real); fraudwatch_ready
// is 0 meanwhile.
func TestReadyzNamesMissingTopics(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	p.cfg.Kafka.AlertsTopic += ".later"
	r := p.start()
	var body string
	waitFor(t, 20*time.Second, "/readyz to name the alerts topic", func() bool {
		resp, err := http.Get("http://" + r.app.Addr() + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable &&
			strings.Contains(body, "kafka events group: waiting for missing topics: "+p.cfg.Kafka.AlertsTopic) &&
			strings.Contains(body, "kafka alerts group: waiting for missing topics: "+p.cfg.Kafka.AlertsTopic)
	})
	if got := r.metric("fraudwatch_ready"); got != 0 {
		t.Errorf("fraudwatch_ready = %v without the alerts topic, want 0", got)
	}
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	p := newPipeline(t, 1, amountRules)
	srv := redistest.Start(t)                                          // a private Redis this test may stop
	p.cfg.Redis.Addrs, p.cfg.Redis.Cluster = []string{srv.Addr}, false // a private single Redis, to break
	r := p.start()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + r.app.Addr() + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	waitFor(t, 20*time.Second, "/readyz 200", func() bool { code, _ := get("/readyz"); return code == 200 })
	// What Prometheus sees of readiness (the groups': Redis shows in
	// script errors).
	if got := r.metric("fraudwatch_ready"); got != 1 {
		t.Errorf("fraudwatch_ready = %v while ready, want 1", got)
	}

	srv.Stop()
	code, body := get("/readyz")
	// It names the address, so that a typo in redis.addrs shows.
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "redis at "+srv.Addr+": not answering") {
		t.Fatalf("/readyz with Redis down = %d %q, want 503 naming %s", code, body, srv.Addr)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz with Redis down = %d, want 200 (the process is alive)", code)
	}
	srv.Restart(t)
	waitFor(t, 20*time.Second, "/readyz 200 again", func() bool { code, _ := get("/readyz"); return code == 200 })

	p.orders(0, ev{id: "1", customer: "c", amount: 1})
	waitFor(t, 20*time.Second, "one order", func() bool { return r.metric("fraudwatch_events_consumed_total", "type", "order") == 1 })
	_, metrics := get("/metrics")
	for _, name := range []string{
		"fraudwatch_events_consumed_total", "fraudwatch_events_invalid_total",
		"fraudwatch_threshold_crossings_total", "fraudwatch_alerts_sent_total",
		"fraudwatch_alerts_suppressed_total", "fraudwatch_alert_failures_total",
		"fraudwatch_refunds_clamped_total", "fraudwatch_script_errors_total",
		"fraudwatch_event_processing_seconds", "fraudwatch_consumer_lag",
	} {
		if !strings.Contains(metrics, "# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// Lag is reported for every partition this replica holds, the alerts
	// topic's included.
	for _, topic := range []string{p.cfg.Kafka.OrdersTopic, p.cfg.Kafka.RefundsTopic, p.cfg.Kafka.AlertsTopic} {
		waitFor(t, 10*time.Second, "a lag series of "+topic, func() bool {
			_, metrics := get("/metrics")
			return strings.Contains(metrics, `fraudwatch_consumer_lag{group="`) &&
				strings.Contains(metrics, `",partition="0",topic="`+topic+`"}`)
		})
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestSlackWebhookFromConfig(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer hook.Close()
	p := newPipeline(t, 1, countRule)
	p.cfg.Slack.WebhookURL = config.Secret(hook.URL + "/services/T/B/X")
	opts := p.options()
	opts.Notifier = nil // the configuration decides
	p.startWith(opts)
	p.orders(0, ev{id: "1", customer: "cust-77", amount: 1}, ev{id: "2", customer: "cust-77", amount: 1}, ev{id: "3", customer: "cust-77", amount: 1})
	waitFor(t, 20*time.Second, "the webhook post", func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) == 1 })
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"orders-per-customer", "cust-77", "o-3", "Latest orders* (3, newest first)", "o-1 · "} {
		if !strings.Contains(bodies[0], want) {
			t.Errorf("webhook body lacks %q: %s", want, bodies[0])
		}
	}
}

// Produce keys each event by its customer_id and partitions by the Java
// client's murmur2, so that its events land where a Java producer's would.
// The hashes are the Java client's own test vectors (Utils.murmur2).
func TestProducePartitionsAsJavaDoes(t *testing.T) {
	p := newPipeline(t, 8, countRule)
	murmur2 := map[string]int32{"21": -973932308, "foobar": -790332482, "abc": 479470107,
		"a-little-bit-long-string": -985981536, "a-little-bit-longer-string": -1486304829}
	var in strings.Builder
	for key := range murmur2 {
		fmt.Fprintf(&in, `{"type":"order","event_id":%q,"order_id":"o","customer_id":%q,"amount":5}`+"\n", key, key)
	}
	if _, err := Produce(t.Context(), p.cfg.Kafka, strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.kafka.ReadAll(t, p.cfg.Kafka.OrdersTopic, len(murmur2), 10*time.Second) {
		h, ok := murmur2[string(m.Key)]
		if want := int(uint32(h)&0x7fffffff) % 8; !ok || m.Partition != want {
			t.Errorf("key %q on partition %d, want %d", m.Key, m.Partition, want)
		}
	}
}

func TestProduceRoutesByType(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	in := strings.NewReader(`{"type":"order","event_id":"1","order_id":"o","customer_id":"c","amount":5}

{"type":"refund","event_id":"2","order_id":"o","customer_id":"c","amount":5}
{"type":"order","event_id":"3","order_id":"o","customer_id":"c","amount":"not valid, still sent"}
`)
	stats, err := Produce(t.Context(), p.cfg.Kafka, in)
	if err != nil {
		t.Fatal(err)
	}
	if stats != (ProduceStats{Orders: 2, Refunds: 1}) {
		t.Fatalf("stats = %+v", stats)
	}
	orders := p.kafka.ReadAll(t, p.cfg.Kafka.OrdersTopic, 2, 10*time.Second)
	refunds := p.kafka.ReadAll(t, p.cfg.Kafka.RefundsTopic, 1, 10*time.Second)
	if len(orders) != 2 || len(refunds) != 1 || string(orders[0].Key) != "c" {
		t.Fatalf("orders %d, refunds %d, key %q", len(orders), len(refunds), orders[0].Key)
	}

	stats, err = Produce(t.Context(), p.cfg.Kafka, strings.NewReader("{\"type\":\"order\",\"event_id\":\"before-the-bad-line\"}\n{\"no\":\"type\"}\n"))
	bad, ok := err.(*InputError)
	if !ok || bad.Line != 2 || bad.Sent != 1 || stats.Orders != 1 {
		t.Fatalf("err = %v, stats %+v; want an InputError on line 2 after the line before it was sent", err, stats)
	}
	// The line before the bad one really is on the topic.
	var all strings.Builder
	for _, m := range p.kafka.ReadAll(t, p.cfg.Kafka.OrdersTopic, 3, 10*time.Second) {
		all.Write(m.Value)
	}
	if !strings.Contains(all.String(), "before-the-bad-line") {
		t.Fatal("the line before the bad one was not sent")
	}
}

// Whatever redis.buckets says, a crossing is counted in its bucket's keys
// and its alert delivered: the alert's keys stay in their bucket of 256,
// which on a Redis Cluster is another slot than the counting keys' (make
// test-cluster and CI's Redis 8 cluster run this).
func TestAnyCountingBucketsDeliver(t *testing.T) {
	for _, buckets := range []int{1, 16, 256} {
		t.Run(fmt.Sprint(buckets), func(t *testing.T) {
			p := newPipeline(t, 1, countRule)
			p.cfg.Redis.Buckets = buckets
			var err error
			if p.keys, err = lua.NewKeysIn(p.cfg.Redis.KeyPrefix, buckets); err != nil {
				t.Fatal(err)
			}
			r := p.start()
			p.orders(0, ev{id: "a1", customer: "c-7", amount: 1}, ev{id: "a2", customer: "c-7", amount: 1},
				ev{id: "a3", customer: "c-7", amount: 1})
			waitFor(t, 20*time.Second, "the alert", func() bool {
				return r.metric("fraudwatch_alerts_sent_total", "rule", "orders-per-customer") == 1
			})
			if got := p.counter("orders-per-customer", "c-7"); got != 3 {
				t.Fatalf("counter among %d buckets = %d, want 3", buckets, got)
			}
			if got := r.metric("fraudwatch_alerts_dropped_total", "reason", "unverified"); got != 0 {
				t.Fatalf("%v alerts dropped as unverified, want none", got)
			}
		})
	}
}

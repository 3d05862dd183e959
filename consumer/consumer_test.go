package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// recorder is a Handler that remembers the events it took. Like the
// engine, it takes a batch whole or not at all: a batch with an event that
// fails leaves no trace and is handed over again.
type recorder struct {
	mu     sync.Mutex
	events []*event.Event
	fail   func(ev *event.Event) error
	cond   chan struct{} // pinged on every call
}

func newRecorder() *recorder { return &recorder{cond: make(chan struct{}, 1)} }

func (r *recorder) Handle(_ context.Context, evs []*event.Event) (map[int]error, error) {
	defer func() {
		select {
		case r.cond <- struct{}{}:
		default:
		}
	}()
	var unprocessable map[int]error
	if r.fail != nil {
		for i, ev := range evs {
			err := r.fail(ev)
			switch {
			case errors.Is(err, event.ErrUnprocessable):
				if unprocessable == nil {
					unprocessable = map[int]error{}
				}
				unprocessable[i] = err
			case err != nil:
				return nil, err
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ev := range evs {
		if unprocessable[i] == nil {
			r.events = append(r.events, ev)
		}
	}
	return unprocessable, nil
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = e.EventID
	}
	return out
}

// perEvent adapts a function of one event to a Handler: a batch fails as a
// whole at its first event that fails (as the engine's does), and an event
// whose error wraps event.ErrUnprocessable is reported unprocessable.
type perEvent func(ctx context.Context, ev *event.Event) error

func (f perEvent) Handle(ctx context.Context, evs []*event.Event) (map[int]error, error) {
	var unprocessable map[int]error
	for i, ev := range evs {
		err := f(ctx, ev)
		switch {
		case errors.Is(err, event.ErrUnprocessable):
			if unprocessable == nil {
				unprocessable = map[int]error{}
			}
			unprocessable[i] = err
		case err != nil:
			return nil, err
		}
	}
	return unprocessable, nil
}

// waitFor is testkit.WaitFor, under the name these tests call it by.
var waitFor = testkit.WaitFor

type env struct {
	cluster              *kafkatest.Cluster
	orders, refunds, dlq string
	group                string
}

func newEnv(t *testing.T, partitions int) *env {
	c := kafkatest.New(t)
	return &env{
		cluster: c,
		orders:  c.Topic(t, "orders", partitions),
		refunds: c.Topic(t, "refunds", partitions),
		dlq:     c.Topic(t, "dlq", 1),
		group:   kafkatest.Group(t, "fw"),
	}
}

func (e *env) config() Config {
	return Config{
		GroupConfig: GroupConfig{
			Brokers:           e.cluster.Brokers,
			GroupID:           e.group,
			ClientID:          "fraudwatch-test",
			StartEarliest:     true,
			CommitInterval:    50 * time.Millisecond,
			HeartbeatInterval: 200 * time.Millisecond,
			SessionTimeout:    6 * time.Second,
			RebalanceTimeout:  5 * time.Second,
			RetryMin:          10 * time.Millisecond,
			RetryMax:          50 * time.Millisecond,
		},
		OrdersTopic:     e.orders,
		RefundsTopic:    e.refunds,
		DeadLetterTopic: e.dlq,
		MaxEventBytes:   64 << 10,
		RetryWindow:     4096,
	}
}

// running is a consumer started in the background.
type running struct {
	c      *Consumer
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg Config, h Handler) *running {
	t.Helper()
	return startWith(t, cfg, h, nil)
}

// startWith is start with a chance to adjust the consumer before it runs.
func startWith(t *testing.T, cfg Config, h Handler, prepare func(*Consumer)) *running {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(cfg, h, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
			_ = r.c.Close()
			return err
		}
		return nil
	case <-time.After(30 * time.Second):
		t.Fatal("consumer did not stop")
		return nil
	}
}

func order(id, customer string, amount int) []byte {
	return fmt.Appendf(nil, `{"event_id":%q,"order_id":"o-%s","customer_id":%q,"amount":%d}`, id, id, customer, amount)
}

func TestConsumesBothTopicsWithTheirTypes(t *testing.T) {
	e := newEnv(t, 2)
	rec := newRecorder()
	r := start(t, e.config(), rec)
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c1", 100))
	e.cluster.ProduceTo(t, e.refunds, 1, order("e2", "c1", 40))
	waitFor(t, 20*time.Second, "two events", func() bool { return len(rec.ids()) == 2 })
	types := map[string]event.Type{}
	rec.mu.Lock()
	for _, ev := range rec.events {
		types[ev.EventID] = ev.Type
		if ev.Source.Topic == "" {
			t.Errorf("event %s has no source", ev.EventID)
		}
	}
	rec.mu.Unlock()
	if types["e1"] != event.Order || types["e2"] != event.Refund {
		t.Fatalf("types = %v", types)
	}
	if !r.c.Ready() {
		t.Fatal("consumer not ready while holding its assignment")
	}
	// A batch is counted after its handler returns: wait for the counts
	// before reading what else it observed.
	waitFor(t, 10*time.Second, "both events counted", func() bool {
		var m, p dto.Metric
		return r.c.m.latency.Write(&m) == nil && m.GetHistogram().GetSampleCount() >= 2 &&
			r.c.m.processing.Write(&p) == nil && p.GetHistogram().GetSampleCount() >= 1 &&
			testutil.ToFloat64(r.c.m.consumed.WithLabelValues("order")) >= 1 &&
			testutil.ToFloat64(r.c.m.consumed.WithLabelValues("refund")) >= 1
	})
	// Each batch's processing and each event's latency are observed.
	for name, h := range map[string]prometheus.Histogram{"processing": r.c.m.processing, "latency": r.c.m.latency} {
		var m dto.Metric
		if err := h.Write(&m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetHistogram().GetSampleCount(); n == 0 || (name == "latency" && n != 2) {
			t.Errorf("%s histogram holds %d samples", name, n)
		}
	}
	for typ, want := range map[string]float64{"order": 1, "refund": 1} {
		if got := testutil.ToFloat64(r.c.m.consumed.WithLabelValues(typ)); got != want {
			t.Errorf("consumed{type=%s} = %v, want %v", typ, got, want)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if r.c.Ready() {
		t.Fatal("consumer still ready after Run returned")
	}
}

// One topic may carry both types: then each event says which it is, and
// one that does not is dead-lettered as missing_field.
func TestASharedTopicTakesTheEventsType(t *testing.T) {
	e := newEnv(t, 1)
	rec := newRecorder()
	cfg := e.config()
	cfg.RefundsTopic = cfg.OrdersTopic
	start(t, cfg, rec)
	e.cluster.Produce(t, e.orders,
		kafka.Message{Value: []byte(`{"event_id":"o1","type":"order","order_id":"o","customer_id":"c","amount":5}`)},
		kafka.Message{Value: []byte(`{"event_id":"r1","type":"refund","order_id":"o","customer_id":"c","amount":5}`)},
		kafka.Message{Value: []byte(`{"event_id":"x1","order_id":"o","customer_id":"c","amount":5}`)},
	)
	waitFor(t, 20*time.Second, "two events", func() bool { return len(rec.ids()) == 2 })
	rec.mu.Lock()
	types := map[string]event.Type{}
	for _, ev := range rec.events {
		types[ev.EventID] = ev.Type
	}
	rec.mu.Unlock()
	if types["o1"] != event.Order || types["r1"] != event.Refund {
		t.Errorf("types = %v, want o1 an order and r1 a refund", types)
	}
	dead := e.cluster.ReadAll(t, e.dlq, 1, 20*time.Second)
	if len(dead) != 1 || !strings.HasPrefix(headerValue(dead[0], HeaderError), string(event.ReasonMissingField)) {
		t.Fatalf("dead letters %v, want the event without a type, as missing_field", dead)
	}
}

func headerValue(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// runLogging runs a consumer of cfg, its log as JSON lines in the buffer
// it returns, until t ends.
func runLogging(t *testing.T, cfg Config) *testkit.Buffer {
	t.Helper()
	logs, _ := runLoggingConsumer(t, cfg)
	return logs
}

// runLoggingConsumer is runLogging, and returns the consumer too.
func runLoggingConsumer(t *testing.T, cfg Config) (*testkit.Buffer, *Consumer) {
	t.Helper()
	logs := &testkit.Buffer{}
	c, err := New(cfg, newRecorder(), slog.New(slog.NewJSONHandler(logs, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = c.Close() })
	return logs, c
}

// A dead letter is logged with its topic, partition, offset and reason,
// never with the event's values.
func TestDeadLettersAreLoggedWithoutTheirValues(t *testing.T) {
	e := newEnv(t, 1)
	logs := runLogging(t, e.config())

	e.cluster.Produce(t, e.orders, kafka.Message{Value: []byte(`{"event_id":"x","order_id":"o","amount":5,"email":"kim@example.com","ip":"203.0.113.9"}`)})
	e.cluster.ReadAll(t, e.dlq, 1, 20*time.Second)
	waitFor(t, 10*time.Second, "the dead letter's log line", func() bool { return strings.Contains(logs.String(), `"reason":"missing_field"`) })
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"reason":"missing_field"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["topic"] != e.orders || line["partition"] != float64(0) || line["offset"] != float64(0) {
		t.Errorf("log line %v, want the topic, partition and offset", line)
	}
	for _, value := range []string{"kim@example.com", "203.0.113.9", `"o"`} {
		if strings.Contains(logs.String(), value) {
			t.Errorf("the log carries the event's %s:\n%s", value, logs.String())
		}
	}
}

// A dead letter is acknowledged by every in-sync replica before the
// event's offset may be committed (docs/design.md, Delivery guarantees).
func TestDeadLettersWaitForAllReplicas(t *testing.T) {
	c, err := New(newEnvConfigOnly(), newRecorder(), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.dlq.RequiredAcks != kafka.RequireAll {
		t.Errorf("RequiredAcks = %v, want all in-sync replicas", c.dlq.RequiredAcks)
	}
}

// newEnvConfigOnly is a configuration for a consumer that never runs.
func newEnvConfigOnly() Config {
	e := &env{cluster: &kafkatest.Cluster{Brokers: []string{"127.0.0.1:9092"}}, orders: "orders", refunds: "refunds", dlq: "dlq", group: "fw"}
	return e.config()
}

func TestInvalidEventsGoToTheDeadLetterTopic(t *testing.T) {
	e := newEnv(t, 1)
	rec := newRecorder()
	cfg := e.config()
	cfg.MaxEventBytes = 1024
	r := start(t, cfg, rec)
	big := make([]byte, 2000)
	for i := range big {
		big[i] = 'x'
	}
	inputs := []struct {
		value  []byte
		reason event.Reason
	}{
		{[]byte(`not json`), event.ReasonMalformedJSON},
		{order("ok-1", "c1", 10), ""},
		{[]byte(`{"event_id":"x","order_id":"o","amount":5}`), event.ReasonMissingField},
		{order("ok-2", "c1", 0), event.ReasonInvalidAmount},
		{[]byte(`{"event_id":"r","type":"refund","order_id":"o","customer_id":"c","amount":5}`), event.ReasonTypeMismatch},
		{big, event.ReasonOversized},
		{order("ok-3", "c1", 10), ""},
	}
	msgs := make([]kafka.Message, len(inputs))
	for i, in := range inputs {
		msgs[i] = kafka.Message{Key: []byte("key-" + strconv.Itoa(i)), Value: in.value,
			Headers: []kafka.Header{{Key: "trace", Value: []byte("t" + strconv.Itoa(i))}}}
	}
	e.cluster.Produce(t, e.orders, msgs...)

	waitFor(t, 20*time.Second, "valid events", func() bool { return len(rec.ids()) == 2 })
	dead := e.cluster.ReadAll(t, e.dlq, 5, 20*time.Second)
	if len(dead) != 5 {
		t.Fatalf("dead letters = %d, want 5", len(dead))
	}
	for _, d := range dead {
		h := map[string]string{}
		for _, kv := range d.Headers {
			h[kv.Key] = string(kv.Value)
		}
		i, err := strconv.Atoi(h["trace"][1:])
		if err != nil {
			t.Fatalf("original headers lost: %v", h)
		}
		in := inputs[i]
		if string(d.Key) != "key-"+strconv.Itoa(i) || string(d.Value) != string(in.value) {
			t.Errorf("dead letter %d: key/value not the original", i)
		}
		if got := h[HeaderError]; !strings.HasPrefix(got, string(in.reason)) {
			t.Errorf("dead letter %d: %s = %q, want reason %q", i, HeaderError, got, in.reason)
		}
		if h[HeaderSourceTopic] != e.orders || h[HeaderSourcePartition] != "0" || h[HeaderSourceOffset] != strconv.Itoa(i) {
			t.Errorf("dead letter %d: source headers %v", i, h)
		}
	}
	// The batch counts its invalid events after it has written their dead
	// letters: the last letter read can come before the counts.
	for _, in := range inputs {
		if in.reason == "" {
			continue
		}
		m := r.c.m.invalid.WithLabelValues(string(in.reason))
		waitFor(t, 10*time.Second, "invalid{reason="+string(in.reason)+"}", func() bool { return testutil.ToFloat64(m) >= 1 })
		if got := testutil.ToFloat64(m); got != 1 {
			t.Errorf("invalid{reason=%s} = %v, want 1", in.reason, got)
		}
	}
	if got := rec.ids(); got[0] != "ok-1" || got[1] != "ok-3" {
		t.Fatalf("valid events = %v", got)
	}
}

func TestFailedEventIsRetriedInOrderAndNotCommittedPast(t *testing.T) {
	e := newEnv(t, 1)
	rec := newRecorder()
	var mu sync.Mutex
	failures := 0
	rec.fail = func(ev *event.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if ev.EventID == "e2" && failures < 3 {
			failures++
			return errors.New("redis down")
		}
		return nil
	}
	start(t, e.config(), rec)
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1), order("e2", "c", 1), order("e3", "c", 1))
	waitFor(t, 20*time.Second, "three events", func() bool { return len(rec.ids()) == 3 })
	if got := rec.ids(); fmt.Sprint(got) != "[e1 e2 e3]" {
		t.Fatalf("order = %v", got)
	}
	if failures != 3 {
		t.Fatalf("failures = %d, want 3 retries", failures)
	}
}

func TestStuckEventIsNotCommittedAcrossShutdown(t *testing.T) {
	e := newEnv(t, 1)
	rec := newRecorder()
	var tried atomic.Bool
	rec.fail = func(ev *event.Event) error {
		if ev.EventID == "e2" {
			tried.Store(true)
			return errors.New("redis down")
		}
		return nil
	}
	cfg := e.config()
	cfg.DrainTimeout = 500 * time.Millisecond
	r := start(t, cfg, rec)
	// e1 alone first, so that it is a batch of its own.
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1))
	waitFor(t, 20*time.Second, "e1", func() bool { return len(rec.ids()) == 1 })
	e.cluster.ProduceTo(t, e.orders, 0, order("e2", "c", 1), order("e3", "c", 1))
	waitFor(t, 20*time.Second, "e2 to be tried", func() bool { return tried.Load() })
	r.stop(t)

	// The next member resumes at e2: e1 was committed, e2 never was.
	rec2 := newRecorder()
	start(t, cfg, rec2)
	waitFor(t, 20*time.Second, "e2 and e3 again", func() bool { return len(rec2.ids()) == 2 })
	if got := rec2.ids(); fmt.Sprint(got) != "[e2 e3]" {
		t.Fatalf("after restart = %v, want [e2 e3]", got)
	}
}

func TestShutdownCommitsAndRestartResumes(t *testing.T) {
	e := newEnv(t, 3)
	cfg := e.config()
	cfg.CommitInterval = time.Hour // only the shutdown commit can save us
	rec := newRecorder()
	r := start(t, cfg, rec)
	var msgs []kafka.Message
	for i := range 30 {
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: order("a"+strconv.Itoa(i), "c", 1)})
	}
	e.cluster.Produce(t, e.orders, msgs...)
	waitFor(t, 20*time.Second, "30 events", func() bool { return len(rec.ids()) == 30 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	rec2 := newRecorder()
	start(t, cfg, rec2)
	e.cluster.Produce(t, e.orders, kafka.Message{Key: []byte("k"), Value: order("b1", "c", 1)})
	waitFor(t, 20*time.Second, "the new event", func() bool { return len(rec2.ids()) >= 1 })
	if got := rec2.ids(); fmt.Sprint(got) != "[b1]" {
		t.Fatalf("after restart = %v, want only [b1]", got)
	}
}

func TestStartOffsetForANewGroup(t *testing.T) {
	tests := []struct {
		name     string
		earliest bool
		want     string
	}{
		{"earliest reads what is already there", true, "[old new]"},
		{"latest starts after it", false, "[new]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.cluster.ProduceTo(t, e.orders, 0, order("old", "c", 1))
			cfg := e.config()
			cfg.StartEarliest = tt.earliest
			rec := newRecorder()
			r := start(t, cfg, rec)
			waitFor(t, 20*time.Second, "assignment", r.c.Ready)
			// The resolved start offset is committed at once; wait for it
			// so "new" is produced after the group's starting point.
			waitFor(t, 20*time.Second, "start offset committed", func() bool {
				return committed(t, e, e.orders, 0) >= 0
			})
			e.cluster.ProduceTo(t, e.orders, 0, order("new", "c", 1))
			waitFor(t, 20*time.Second, "new", func() bool {
				ids := rec.ids()
				return len(ids) > 0 && ids[len(ids)-1] == "new"
			})
			if got := fmt.Sprint(rec.ids()); got != tt.want {
				t.Fatalf("events = %s, want %s", got, tt.want)
			}
		})
	}
}

// committed reads the group's committed offset of a partition (-1: none).
func committed(t *testing.T, e *env, topic string, partition int) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(e.cluster.Brokers...)}
	resp, err := client.OffsetFetch(t.Context(), &kafka.OffsetFetchRequest{
		GroupID: e.group, Topics: map[string][]int{topic: {partition}},
	})
	if err != nil {
		return -1
	}
	for _, p := range resp.Topics[topic] {
		if p.Partition == partition && p.Error == nil {
			return p.CommittedOffset
		}
	}
	return -1
}

func TestLagIsReportedPerPartition(t *testing.T) {
	e := newEnv(t, 1)
	entered, release := make(chan struct{}), make(chan struct{})
	rec := newRecorder()
	rec.fail = func(ev *event.Event) error {
		if ev.EventID == "e2" {
			close(entered)
			<-release
		}
		return nil
	}
	cfg := e.config()
	cfg.LagInterval = 50 * time.Millisecond
	r := start(t, cfg, rec)
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1))
	waitFor(t, 20*time.Second, "e1", func() bool { return len(rec.ids()) == 1 })
	e.cluster.ProduceTo(t, e.orders, 0, order("e2", "c", 1), order("e3", "c", 1))
	<-entered
	// e1 is done, e2 and e3 are not: two behind the high-water mark, which
	// the lag shows while e2 is stuck.
	lag := func() float64 { v, _ := r.lag(t, e.orders, 0); return v }
	waitFor(t, 5*time.Second, "lag 2 while e2 is in flight", func() bool { return lag() == 2 })
	close(release)
	waitFor(t, 20*time.Second, "all events", func() bool { return len(rec.ids()) == 3 })
	waitFor(t, 5*time.Second, "lag 0", func() bool { return lag() == 0 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(r.c.lag); n != 0 {
		t.Fatalf("%d lag series left for partitions no longer held", n)
	}
}

// lag reads a partition's lag series from the registry; ok is false when
// there is none. (Reading it through the GaugeVec would create it.)
func (r *running) lag(t *testing.T, topic string, partition int) (v float64, ok bool) {
	t.Helper()
	return partitionGauge(t, r.reg, "fraudwatch_consumer_lag", topic, partition)
}

// partitionGauge reads the series of gauge name for one partition from
// reg; ok is false when there is none.
func partitionGauge(t *testing.T, reg *prometheus.Registry, name, topic string, partition int) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["topic"] == topic && labels["partition"] == strconv.Itoa(partition) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// While the first message is retried for ever (Redis down), the lag must
// exist and keep growing with new events, not freeze or stay absent until
// a message succeeds.
func TestLagGrowsWhileProcessingIsStalled(t *testing.T) {
	e := newEnv(t, 1)
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1), order("e2", "c", 1), order("e3", "c", 1))
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder()
	rec.fail = func(*event.Event) error {
		if down.Load() {
			return errors.New("redis down")
		}
		return nil
	}
	cfg := e.config()
	cfg.LagInterval = 50 * time.Millisecond
	r := start(t, cfg, rec)
	lagIs := func(want float64) func() bool {
		return func() bool { v, ok := r.lag(t, e.orders, 0); return ok && v == want }
	}
	waitFor(t, 20*time.Second, "lag 3 before any event succeeded", lagIs(3))
	e.cluster.ProduceTo(t, e.orders, 0, order("e4", "c", 1), order("e5", "c", 1))
	waitFor(t, 20*time.Second, "lag 5 once two more events arrived", lagIs(5))
	if n := len(rec.ids()); n != 0 {
		t.Fatalf("%d events handled while Redis was down", n)
	}
	down.Store(false)
	waitFor(t, 20*time.Second, "all events", func() bool { return len(rec.ids()) == 5 })
	waitFor(t, 20*time.Second, "lag 0", lagIs(0))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.lag(t, e.orders, 0); ok {
		t.Fatal("lag series left for a partition no longer held")
	}
}

// Run reports a drain timeout only when a message was actually given up,
// not whenever the drain timer fired.
func TestDrainTimeoutIsReportedOnlyForAbortedMessages(t *testing.T) {
	tests := []struct {
		name string
		// finish is what the in-flight handler returns once its context
		// is cancelled.
		finish        func(ctx context.Context) error
		wantErr       bool
		wantCommitted int64
	}{
		{"work finished after the timer", func(context.Context) error { return nil }, false, 1},
		{"work aborted", func(ctx context.Context) error { return ctx.Err() }, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 1)
			cfg := e.config()
			cfg.DrainTimeout = 200 * time.Millisecond
			entered := make(chan struct{})
			h := perEvent(func(ctx context.Context, ev *event.Event) error {
				close(entered)
				<-ctx.Done() // outlives the drain timeout
				return tt.finish(ctx)
			})
			r := start(t, cfg, h)
			e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1))
			<-entered
			err := r.stop(t)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("Run = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "1 in-flight messages were aborted") {
				t.Fatalf("Run = %v, want it to count the one aborted message", err)
			}
			if got := committed(t, e, e.orders, 0); got != tt.wantCommitted {
				t.Fatalf("committed offset = %d, want %d", got, tt.wantCommitted)
			}
		})
	}
}

// Validate notices settings left unset; their rules (a heartbeat below
// the session timeout, a dead-letter topic apart from the sources) are
// package config's, which checks them once for the operator.
func TestConfigValidate(t *testing.T) {
	good := (&env{cluster: &kafkatest.Cluster{Brokers: []string{"b:9092"}}, group: "g", orders: "o", refunds: "r", dlq: "d"}).config()
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }},
		{"no group", func(c *Config) { c.GroupID = "" }},
		{"no dead-letter topic", func(c *Config) { c.DeadLetterTopic = "" }},
		{"topics given", func(c *Config) { c.Topics = []string{"o"} }},
		{"no session timeout", func(c *Config) { c.SessionTimeout = 0 }},
		{"no commit interval", func(c *Config) { c.CommitInterval = 0 }},
		{"no event size", func(c *Config) { c.MaxEventBytes = 0 }},
		{"backoff upside down", func(c *Config) { c.RetryMin, c.RetryMax = time.Second, time.Millisecond }},
		{"negative retry window", func(c *Config) { c.RetryWindow = -1 }},
		{"retry window negative", func(c *Config) { c.RetryWindow = -1 }},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			if err := c.Validate(); err == nil {
				t.Fatal("want an error")
			}
			if _, err := New(c, perEvent(func(context.Context, *event.Event) error { return nil }), nil, nil); err == nil {
				t.Fatal("New accepted a config Validate refuses")
			}
		})
	}
}

// A handler stuck when a rebalance starts (Slack down, say) is cut short
// after half the rebalance timeout, so that its member can rejoin; the
// event is not committed and is handled again. The member is not ready
// meanwhile.
func TestRebalanceCutsStuckWorkShort(t *testing.T) {
	e := newEnv(t, 1)
	cfg := e.config()
	cfg.RebalanceTimeout = 4 * time.Second
	var mu sync.Mutex
	var cut error
	first := true
	stuck := newRecorder()
	h := perEvent(func(ctx context.Context, ev *event.Event) error {
		mu.Lock()
		block := first
		first = false
		mu.Unlock()
		if block {
			<-ctx.Done() // stuck until the consumer gives up on it
			mu.Lock()
			cut = ctx.Err()
			mu.Unlock()
			return ctx.Err()
		}
		_, err := stuck.Handle(ctx, []*event.Event{ev})
		return err
	})
	a := start(t, cfg, h)
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1))
	waitFor(t, 20*time.Second, "e1 in flight", func() bool { mu.Lock(); defer mu.Unlock(); return !first })
	other := newRecorder()
	b := start(t, cfg, other) // joins: a rebalance while e1 is stuck
	// While the rebalance waits on e1 (half the rebalance timeout), a is
	// not ready, and says why: /readyz is 503 during a rebalance.
	waitFor(t, 20*time.Second, "a unready while the rebalance waits on its stuck work", func() bool {
		return !a.c.Ready() && a.c.Status() == "rebalancing"
	})
	waitFor(t, 30*time.Second, "e1 handled after the rebalance", func() bool {
		return len(stuck.ids())+len(other.ids()) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if cut == nil {
		t.Fatal("the stuck handler's context was never cancelled")
	}
	waitFor(t, 20*time.Second, "both members ready", func() bool { return a.c.Ready() && b.c.Ready() })
}

package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/event"
)

func headerMap(m kafka.Message) map[string]string {
	h := map[string]string{}
	for _, kv := range m.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h
}

// An oversized event that the dead-letter topic (or the writer) cannot
// take whole is dead-lettered without its value, instead of being retried
// for ever while its partition stops.
func TestOversizedDeadLetters(t *testing.T) {
	const large = 4 << 20 // max.message.bytes of the topics that take it whole
	tests := []struct {
		name string
		// dlqMax is the dead-letter topic's max.message.bytes ("" for the
		// broker default).
		dlqMax string
		// srcMax is the source topic's max.message.bytes.
		srcMax     string
		valueBytes int
		// writerBatchBytes, when set, replaces the dead-letter writer's.
		writerBatchBytes int64
		wantDropped      bool
	}{
		{name: "the broker refuses it", dlqMax: "2048", valueBytes: 4000, wantDropped: true},
		{name: "the writer refuses it", valueBytes: 4000, writerBatchBytes: 2048, wantDropped: true},
		// Above kafka-go's default BatchBytes (1 MiB): the writer must be
		// sized for what the group can fetch.
		{name: "a topic that takes it whole gets it whole", dlqMax: strconv.Itoa(large), srcMax: strconv.Itoa(large),
			valueBytes: 3 << 19},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvTopics(t, tt.srcMax, tt.dlqMax)
			rec := newRecorder()
			cfg := e.config()
			cfg.MaxEventBytes = 1024
			r := startWith(t, cfg, rec, func(c *Consumer) {
				if tt.writerBatchBytes != 0 {
					c.dlq.BatchBytes = tt.writerBatchBytes
				}
			})
			big := bytes.Repeat([]byte("x"), tt.valueBytes)
			msgs := []kafka.Message{
				{Key: []byte("k-big"), Value: big, Headers: []kafka.Header{{Key: "trace", Value: []byte("t-big")}}},
				{Key: []byte("k-bad"), Value: []byte("not json")},
				{Key: []byte("k-ok"), Value: order("ok", "c", 1)},
			}
			produceLarge(t, e, e.orders, msgs...)

			waitFor(t, 30*time.Second, "the valid event after the oversized one", func() bool { return len(rec.ids()) == 1 })
			dead := e.cluster.ReadAll(t, e.dlq, 2, 20*time.Second)
			if len(dead) != 2 {
				t.Fatalf("dead letters = %d, want 2", len(dead))
			}
			byKey := map[string]kafka.Message{}
			for _, d := range dead {
				byKey[string(d.Key)] = d
			}
			d, ok := byKey["k-big"]
			if !ok {
				t.Fatalf("no dead letter keyed k-big among %d", len(dead))
			}
			h := headerMap(d)
			if h["trace"] != "t-big" || !strings.HasPrefix(h[HeaderError], string(event.ReasonOversized)) ||
				h[HeaderSourceTopic] != e.orders || h[HeaderSourceOffset] != "0" {
				t.Errorf("oversized dead letter lost its headers: %v", h)
			}
			if tt.wantDropped {
				if len(d.Value) != 0 {
					t.Errorf("oversized dead letter has a %d-byte value, want none", len(d.Value))
				}
				if got, want := h[HeaderValueDropped], strconv.Itoa(tt.valueBytes); got != want {
					t.Errorf("%s = %q, want %q", HeaderValueDropped, got, want)
				}
			} else {
				if !bytes.Equal(d.Value, big) {
					t.Errorf("oversized dead letter has a %d-byte value, want the original %d bytes", len(d.Value), len(big))
				}
				if _, ok := h[HeaderValueDropped]; ok {
					t.Errorf("%s set on a dead letter written whole", HeaderValueDropped)
				}
			}
			if small := byKey["k-bad"]; string(small.Value) != "not json" {
				t.Errorf("small dead letter value = %q, want the original", small.Value)
			}
			// Counted once its write returns, which may be a moment after
			// the dead letter is readable.
			oversized := func() float64 {
				return testutil.ToFloat64(r.c.m.invalid.WithLabelValues(string(event.ReasonOversized)))
			}
			waitFor(t, 10*time.Second, "invalid{reason=oversized} counted", func() bool { return oversized() >= 1 })
			if got := oversized(); got != 1 {
				t.Errorf("invalid{reason=oversized} = %v, want 1", got)
			}
		})
	}
}

// A dead letter that is too large even without its value (a huge key, huge
// headers) is written with fraudwatch's own headers only, the sizes of what
// was dropped in headers, so that it cannot stop its partition either.
func TestDeadLettersDropKeyAndHeadersWhenStillTooLarge(t *testing.T) {
	const limit = 2048 // the dead-letter topic's max.message.bytes, or the writer's
	big := func(n int) []byte { return bytes.Repeat([]byte("k"), n) }
	tests := []struct {
		name    string
		key     []byte
		headers []kafka.Header
		value   []byte
		// writer: the writer refuses, not the broker.
		writer bool
		// wantStripped: written without key and headers; otherwise only
		// the value is dropped.
		wantStripped bool
	}{
		{name: "a large value alone is dropped alone", key: []byte("k-1"),
			headers: []kafka.Header{{Key: "trace", Value: []byte("t")}}, value: big(4000)},
		{name: "a huge key", key: big(4000), headers: []kafka.Header{{Key: "trace", Value: []byte("t")}},
			value: []byte("not json"), wantStripped: true},
		{name: "huge headers", key: []byte("k-1"),
			headers: []kafka.Header{{Key: "a", Value: big(1500)}, {Key: "b", Value: big(1500)}},
			value:   []byte("not json"), wantStripped: true},
		{name: "a huge key, headers and value", key: big(3000),
			headers: []kafka.Header{{Key: "a", Value: big(3000)}}, value: big(4000), wantStripped: true},
		{name: "the writer refuses a huge key", key: big(4000), value: []byte("not json"), writer: true,
			wantStripped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dlqMax := strconv.Itoa(limit)
			if tt.writer {
				dlqMax = ""
			}
			e := newEnvTopics(t, "", dlqMax)
			rec := newRecorder()
			cfg := e.config()
			cfg.MaxEventBytes = 1024
			startWith(t, cfg, rec, func(c *Consumer) {
				if tt.writer {
					c.dlq.BatchBytes = limit
				}
			})
			produceLarge(t, e, e.orders,
				kafka.Message{Key: tt.key, Value: tt.value, Headers: tt.headers},
				kafka.Message{Key: []byte("k-ok"), Value: order("ok", "c", 1)},
			)

			waitFor(t, 30*time.Second, "the valid event after the dead letter", func() bool { return len(rec.ids()) == 1 })
			dead := e.cluster.ReadAll(t, e.dlq, 1, 20*time.Second)
			if len(dead) != 1 {
				t.Fatalf("dead letters = %d, want 1", len(dead))
			}
			d := dead[0]
			h := headerMap(d)
			if h[HeaderError] == "" || h[HeaderSourceTopic] != e.orders || h[HeaderSourcePartition] != "0" || h[HeaderSourceOffset] != "0" {
				t.Errorf("dead letter lost fraudwatch's headers: %v", h)
			}
			if len(d.Value) != 0 && len(tt.value) > limit {
				t.Errorf("dead letter has a %d-byte value, want none", len(d.Value))
			}
			if !tt.wantStripped {
				if !bytes.Equal(d.Key, tt.key) || h["trace"] != "t" {
					t.Errorf("key %q, headers %v: want the original key and headers", d.Key, h)
				}
				for _, k := range []string{HeaderKeyDropped, HeaderHeadersDropped} {
					if _, ok := h[k]; ok {
						t.Errorf("%s set on a dead letter that kept its key and headers", k)
					}
				}
				return
			}
			headerBytes := 0
			for _, kv := range tt.headers {
				headerBytes += len(kv.Key) + len(kv.Value)
			}
			want := map[string]string{
				HeaderKeyDropped:     strconv.Itoa(len(tt.key)),
				HeaderHeadersDropped: strconv.Itoa(headerBytes),
				HeaderValueDropped:   strconv.Itoa(len(tt.value)),
			}
			for k, v := range want {
				if h[k] != v {
					t.Errorf("%s = %q, want %q", k, h[k], v)
				}
			}
			if len(d.Key) != 0 || len(d.Value) != 0 {
				t.Errorf("stripped dead letter has a %d-byte key and a %d-byte value, want neither", len(d.Key), len(d.Value))
			}
			if len(d.Headers) != 4+len(want) {
				t.Errorf("stripped dead letter has headers %v, want fraudwatch's only", h)
			}
		})
	}
}

func TestClipHeader(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijkl", 10, "abcdefg…"},
		{"가나다라마", 8, "가…"}, // 3-byte runes: never half of one
	}
	for _, tt := range tests {
		got := string(clipHeader([]byte(tt.in), tt.n))
		if got != tt.want || len(got) > tt.n || !utf8.ValidString(got) {
			t.Errorf("clipHeader(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// newEnvTopics is newEnv with max.message.bytes set on the source (orders)
// and dead-letter topics ("" keeps the broker default).
func newEnvTopics(t *testing.T, srcMax, dlqMax string) *env {
	cfgs := func(maxBytes string) []kafka.ConfigEntry {
		if maxBytes == "" {
			return nil
		}
		return []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: maxBytes}}
	}
	c := kafkatest.New(t)
	return &env{
		cluster: c,
		orders:  c.Topic(t, "orders", 1, cfgs(srcMax)...),
		refunds: c.Topic(t, "refunds", 1),
		dlq:     c.Topic(t, "dlq", 1, cfgs(dlqMax)...),
		group:   kafkatest.Group(t, "fw"),
	}
}

// produceLarge writes msgs in order to partition 0 of topic, allowing
// messages above kafka-go's default 1 MiB batch limit.
func produceLarge(t *testing.T, e *env, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(e.cluster.Brokers...),
		Topic:        topic,
		Balancer:     fixed0{},
		RequiredAcks: kafka.RequireAll,
		BatchBytes:   8 << 20,
		BatchSize:    1,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One at a time: each on its own is under the topic's limit, together
	// they might not be.
	for i, m := range msgs {
		if err := w.WriteMessages(ctx, m); err != nil {
			t.Fatalf("produce message %d to %s: %v", i, topic, err)
		}
	}
}

type fixed0 struct{}

func (fixed0) Balance(kafka.Message, ...int) int { return 0 }

func TestTooLarge(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"refused by the writer", kafka.MessageTooLargeError{Message: kafka.Message{Value: []byte("v")}}, true},
		{"refused by the broker", kafka.WriteErrors{kafka.MessageSizeTooLarge}, true},
		{"larger than a segment", kafka.WriteErrors{nil, kafka.RecordListTooLarge}, true},
		{"wrapped", fmt.Errorf("write: %w", kafka.MessageSizeTooLarge), true},
		{"a transient broker error", kafka.WriteErrors{kafka.NotLeaderForPartition}, false},
		{"cancelled", context.Canceled, false},
		{"other", errors.New("connection refused"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TooLarge(tt.err); got != tt.want {
				t.Fatalf("TooLarge(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// An event the engine can never process goes to the dead-letter topic
// instead of being retried for ever; the events after it are handled.
func TestUnprocessableEventsGoToTheDeadLetterTopic(t *testing.T) {
	e := newEnv(t, 1)
	rec := newRecorder()
	rec.fail = func(ev *event.Event) error {
		if ev.EventID != "bad" {
			return nil
		}
		return fmt.Errorf("rules: eval incr_and_check for rule r1: %w", event.ErrUnprocessable)
	}
	r := start(t, e.config(), rec)
	e.cluster.Produce(t, e.orders,
		kafka.Message{Key: []byte("k1"), Value: order("e1", "c", 1)},
		kafka.Message{Key: []byte("k2"), Value: order("bad", "c", 1), Headers: []kafka.Header{{Key: "trace", Value: []byte("t2")}}},
		kafka.Message{Key: []byte("k3"), Value: order("e3", "c", 1)},
	)
	waitFor(t, 20*time.Second, "the events around the unprocessable one", func() bool { return len(rec.ids()) == 2 })
	if got := fmt.Sprint(rec.ids()); got != "[e1 e3]" {
		t.Fatalf("handled = %s, want [e1 e3]", got)
	}
	dead := e.cluster.ReadAll(t, e.dlq, 1, 20*time.Second)
	if len(dead) != 1 {
		t.Fatalf("dead letters = %d, want 1", len(dead))
	}
	d := dead[0]
	h := headerMap(d)
	if string(d.Key) != "k2" || string(d.Value) != string(order("bad", "c", 1)) || h["trace"] != "t2" {
		t.Errorf("dead letter is not the original message: key %q, headers %v", d.Key, h)
	}
	if got := h[HeaderError]; !strings.HasPrefix(got, string(event.ReasonUnprocessable)+":") || !strings.Contains(got, "rule r1") {
		t.Errorf("%s = %q, want the unprocessable reason and the engine's error", HeaderError, got)
	}
	if h[HeaderSourceTopic] != e.orders || h[HeaderSourceOffset] != "1" {
		t.Errorf("source headers = %v", h)
	}
	// The batch counts its events after it has written their dead letters.
	invalid := r.c.m.invalid.WithLabelValues(string(event.ReasonUnprocessable))
	waitFor(t, 10*time.Second, "invalid{reason=unprocessable}", func() bool { return testutil.ToFloat64(invalid) >= 1 })
	if got := testutil.ToFloat64(invalid); got != 1 {
		t.Errorf("invalid{reason=unprocessable} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.c.m.consumed.WithLabelValues(string(event.Order))); got != 2 {
		t.Errorf("consumed{type=order} = %v, want 2: the unprocessable event is not consumed", got)
	}
}

// A dead letter stripped to fraudwatch's own headers carries its error
// cut to 1 KiB: the alerts group's reasons can be long, and a header no
// cut bounds could keep even the stripped letter off the topic.
func TestStrippedDeadLetterCutsItsError(t *testing.T) {
	e := newEnvTopics(t, "", "2048")
	r := start(t, e.config(), newRecorder())
	why := "alert malformed: " + strings.Repeat("x", 3000)
	msg := kafka.Message{Topic: e.orders, Partition: 0, Offset: 7, Key: bytes.Repeat([]byte("k"), 4000), Value: []byte("v")}
	if err := r.c.DeadLetter(t.Context(), msg, why); err != nil {
		t.Fatalf("DeadLetter = %v: the stripped letter did not fit", err)
	}
	dead := e.cluster.ReadAll(t, e.dlq, 1, 20*time.Second)
	if len(dead) != 1 {
		t.Fatalf("dead letters = %d, want 1", len(dead))
	}
	got := headerMap(dead[0])[HeaderError]
	if len(got) > maxErrorHeader || !strings.HasPrefix(got, "alert malformed: xxx") || !strings.HasSuffix(got, "…") {
		t.Errorf("error header of %d bytes %.40q…, want the error cut to at most %d bytes, marked", len(got), got, maxErrorHeader)
	}
}

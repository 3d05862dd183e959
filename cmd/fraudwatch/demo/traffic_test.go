package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/event"
)

// sent is one generated message, decoded as the consumer would.
type sent struct {
	at    time.Duration
	p     planned
	msg   kafka.Message
	ev    *event.Event // nil when invalid or an outcome
	inval *event.InvalidError
	out   *outcome.Outcome // an outcome's
}

// simStart is when simulated traffic starts.
var simStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testTopics are the topics of simulated traffic.
var testTopics = topics{orders: "orders", refunds: "refunds", outcomes: "outcomes"}

// simulate runs a generator for d of simulated time, in ticks, and decodes
// what it sends.
func simulate(t *testing.T, seed uint64, d time.Duration) []sent {
	t.Helper()
	out, _ := simulateTruth(t, seed, d)
	return out
}

// simulateTruth is simulate, which also says what the traffic planted; each
// message counts as acknowledged. Outcomes are decoded as the outcome
// consumer would (into out).
func simulateTruth(t *testing.T, seed uint64, d time.Duration) ([]sent, Truth) {
	t.Helper()
	g := newGenerator(seed)
	var out []sent
	for el := time.Duration(0); el <= d; el += tick {
		for _, p := range g.step(el) {
			p.sent()
			msg, err := p.message(testTopics, simStart.Add(el))
			if err != nil {
				t.Fatal(err)
			}
			s := sent{at: el, p: p, msg: msg}
			if p.kind == kindOutcome {
				o, err := outcome.Decode(msg.Value, simStart.Add(el))
				if err != nil {
					t.Fatalf("an outcome is invalid (%v): %s", err, msg.Value)
				}
				s.out = &o
				out = append(out, s)
				continue
			}
			topicType := event.Order
			if msg.Topic == "refunds" {
				topicType = event.Refund
			}
			ev, err := event.Decode(msg.Value, topicType)
			if err != nil {
				if !errors.As(err, &s.inval) {
					t.Fatalf("Decode: %v", err)
				}
			} else {
				s.ev = ev
			}
			out = append(out, s)
		}
	}
	return out, g.truth()
}

func TestTrafficIsRepeatable(t *testing.T) {
	a, b, c := simulate(t, 5, 5*time.Second), simulate(t, 5, 5*time.Second), simulate(t, 6, 5*time.Second)
	same := func(x, y []sent) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !bytes.Equal(x[i].msg.Value, y[i].msg.Value) || x[i].at != y[i].at {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("the same seed gave different traffic")
	}
	if same(a, c) {
		t.Error("different seeds gave the same traffic")
	}
}

// groupState follows one (rule, group) over a simulated cycle, which is
// shorter than every built-in window, so that windows never end.
type groupState struct {
	value   int64
	crossed bool
	fraud   bool // some event of the group was planted: fraud or a look-alike
	at      time.Duration
}

func TestTrafficMixesFraudIntoOrdinaryShopping(t *testing.T) {
	rs, err := config.ParseRules(builtinRules, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	traffic := simulate(t, 42, cycle-tick)

	var orders, ordinary, refunds, clamps int
	reasons := map[event.Reason]bool{}
	state := map[string]*groupState{}
	firstCross := map[string]time.Duration{}
	for _, s := range traffic {
		if string(s.msg.Key) != s.p.key {
			t.Fatalf("message key %q, want %q", s.msg.Key, s.p.key)
		}
		if s.p.kind == kindOutcome {
			continue // TestTruthHolds
		}
		if s.p.kind == kindInvalid {
			if s.inval == nil {
				t.Errorf("an invalid event decoded: %s", s.msg.Value)
				continue
			}
			reasons[s.inval.Reason] = true
			continue
		}
		if s.ev == nil {
			t.Fatalf("a generated event is invalid (%v): %s", s.inval, s.msg.Value)
		}
		ev := s.ev
		key := ev.CustomerID
		if s.p.burst != nil && ev.Type == event.Order {
			key = s.p.burst.Key() // a burst's orders on one partition
		}
		if string(s.msg.Key) != key || ev.Currency != demoCurrency || ev.OccurredAt.IsZero() {
			t.Errorf("event %s: key %q, currency %q, occurred_at %v", ev.EventID, s.msg.Key, ev.Currency, ev.OccurredAt)
		}
		// A refund of a fraud has no burst, but a fraudster's customer id.
		fraud := s.p.burst != nil || strings.HasPrefix(ev.CustomerID, "cust-f")
		if ev.Type == event.Order {
			orders++
			if !fraud {
				ordinary++
			}
		} else {
			refunds++
		}
		for _, r := range rs {
			if r.Metric == alert.Distinct {
				continue // card testing takes minutes: TestCardTesting
			}
			var vals []string
			for _, f := range r.GroupBy {
				v, ok := ev.Field(f)
				if !ok {
					t.Fatalf("event %s lacks %s", ev.EventID, f)
				}
				vals = append(vals, v)
			}
			key := r.Name + "/" + strings.Join(vals, ",")
			g := state[key]
			if g == nil {
				g = &groupState{}
				state[key] = g
			}
			g.fraud = g.fraud || fraud
			switch {
			case ev.Type == event.Order && r.Metric == alert.Count:
				g.value++
			case ev.Type == event.Order:
				g.value += ev.Amount
			case r.Metric == alert.Amount && g.value > 0:
				if ev.Amount > g.value {
					clamps++
				}
				g.value = max(0, g.value-ev.Amount)
			}
			if !g.crossed && g.value >= r.Threshold {
				g.crossed, g.at = true, s.at
				if _, ok := firstCross[r.Name]; !ok {
					firstCross[r.Name] = s.at
				}
				if !g.fraud {
					t.Errorf("rule %s crossed by ordinary shoppers (%s)", r.Name, key)
				}
			}
		}
	}

	secs := (cycle - tick).Seconds()
	if lo, hi := int(minRate*(secs-1)), int(maxRate*(secs+1)); ordinary < lo || ordinary > hi {
		t.Errorf("%d ordinary orders in %.1fs, want %d-%d", ordinary, secs, lo, hi)
	}
	if refunds == 0 || clamps == 0 {
		t.Errorf("%d refunds, %d of them clamped; want both", refunds, clamps)
	}
	if len(reasons) < 2 {
		t.Errorf("invalid events only for reasons %v", reasons)
	}
	for _, r := range rs {
		at, ok := firstCross[r.Name]
		if !ok && r.Metric == alert.Distinct {
			continue
		}
		if !ok {
			t.Errorf("rule %s never crossed in a cycle", r.Name)
			continue
		}
		t.Logf("rule %s first crossed at %v", r.Name, at)
	}
	if at, ok := firstCross["orders-per-customer-1m"]; ok && at > 3*time.Second {
		t.Errorf("the first burst crosses at %v, want within 3s so that a short run shows it", at)
	}
}

func TestTrafficAmountsAndIdentities(t *testing.T) {
	for _, s := range simulate(t, 9, 10*time.Second) {
		ev := s.ev
		if ev == nil || ev.Type != event.Order || s.p.burst != nil {
			continue
		}
		if ev.Amount < 5_000 || ev.Amount > 150_000 {
			t.Errorf("ordinary order of %d KRW, want 5,000-150,000", ev.Amount)
		}
		// A shopper keeps their card, IP and device.
		if again := shopper(mustAtoi(t, strings.TrimPrefix(ev.CustomerID, "cust-"))); again.card != ev.CardFingerprint ||
			again.ip != ev.IP || again.device != ev.DeviceID || again.email != ev.Email {
			t.Errorf("customer %s has a different identity in a new order", ev.CustomerID)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recordingWriter stands in for kafka.Writer.
type recordingWriter struct {
	mu    sync.Mutex
	msgs  []kafka.Message
	fail  error
	ready chan struct{}
	once  sync.Once
}

func (w *recordingWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if w.fail != nil {
		return w.fail
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msgs...)
	if len(w.msgs) >= 50 {
		w.once.Do(func() { close(w.ready) })
	}
	return nil
}

func TestSendCountsWhatKafkaAcknowledged(t *testing.T) {
	w := &recordingWriter{ready: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan produced, 1)
	var reports int
	go func() {
		p, err := sender{g: newGenerator(3), w: w, to: topics{"o", "r", "c"}, turn: &sync.Mutex{}, report: func(produced) { reports++ }}.send(ctx)
		if err != nil {
			t.Errorf("send: %v", err)
		}
		done <- p
	}()
	<-w.ready
	cancel()
	p := <-done
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.total()+p.outcomes() != len(w.msgs) || reports == 0 {
		t.Errorf("send counted %+v (%d), the writer got %d messages", p, p.total(), len(w.msgs))
	}
	for _, m := range w.msgs {
		if m.Topic != "o" && m.Topic != "r" && m.Topic != "c" {
			t.Errorf("message to topic %q", m.Topic)
		}
	}

	broken := &recordingWriter{fail: errors.New("broker gone")}
	if _, err := (sender{g: newGenerator(3), w: broken, to: topics{"o", "r", "c"}, turn: &sync.Mutex{}, report: func(produced) {}}).send(t.Context()); err == nil ||
		!strings.Contains(err.Error(), "broker gone") {
		t.Errorf("send with a failing writer: err = %v", err)
	}
}

// Card testing is one customer trying several cards with small orders,
// never 3 within a minute: the distinct rule catches it, and no rule that
// counts orders or amounts does. Every other customer keeps one card.
func TestCardTesting(t *testing.T) {
	type customer struct {
		cards  map[string]bool
		orders []time.Duration
		max    int64
	}
	customers := map[string]*customer{}
	for _, s := range simulate(t, 42, 4*time.Minute) {
		if s.ev == nil || s.ev.Type != event.Order {
			continue
		}
		c := customers[s.ev.CustomerID]
		if c == nil {
			c = &customer{cards: map[string]bool{}}
			customers[s.ev.CustomerID] = c
		}
		c.cards[s.ev.CardFingerprint] = true
		c.orders = append(c.orders, s.at)
		c.max = max(c.max, s.ev.Amount)
	}
	testers := 0
	for id, c := range customers {
		if len(c.cards) == 1 {
			continue
		}
		// A test that began in the last two minutes may not be over.
		complete := c.orders[0] < 2*time.Minute
		if (complete && len(c.cards) < 3) || len(c.cards) != len(c.orders) {
			t.Errorf("%s: %d cards in %d orders", id, len(c.cards), len(c.orders))
		}
		testers++
		for i := 2; i < len(c.orders); i++ {
			if c.orders[i]-c.orders[i-2] <= time.Minute {
				t.Errorf("%s: 3 orders within %v, which orders-per-customer-1m would catch", id, c.orders[i]-c.orders[i-2])
			}
		}
		if c.max >= 1_000 {
			t.Errorf("%s: a card test of %d KRW, want small ones", id, c.max)
		}
	}
	if testers < 3 {
		t.Errorf("%d card testers in 4 minutes, want one a minute", testers)
	}
}

// What Kafka acknowledged, and only that, is in the truth: the orders of
// each burst, and its outcomes, counted by label.
func TestSendNotesTheTruth(t *testing.T) {
	g := newGenerator(3)
	to := topics{"o", "r", "c"}
	start := time.Now().Add(-30 * time.Second) // one step sends the first 30 s
	broken := &recordingWriter{fail: errors.New("broker gone")}
	var done produced
	if err := (sender{g: g, w: broken, to: to, report: func(produced) {}}).sendDue(t.Context(), start, &done); err == nil {
		t.Fatal("sendDue with a failing writer: no error")
	}
	for _, b := range g.truth().Bursts {
		if len(b.Orders) > 0 || b.Outcome != "" {
			t.Fatalf("burst %d (%s) has %d orders and outcome %q sent, though Kafka took nothing", b.ID, b.Pattern, len(b.Orders), b.Outcome)
		}
	}

	g = newGenerator(3)
	w := &recordingWriter{ready: make(chan struct{})}
	done = produced{}
	// A message that must follow the pipeline (planned.settle) is written
	// once everything before it was processed: the events written by then.
	waits, wrong := 0, []string(nil)
	settled := func(_ context.Context, sent int) bool {
		waits++
		events := 0
		for _, m := range w.msgs {
			if m.Topic != "c" {
				events++
			}
		}
		if sent != events {
			wrong = append(wrong, fmt.Sprintf("waited for %d events, %d written", sent, events))
		}
		return true
	}
	if err := (sender{g: g, w: w, to: to, report: func(produced) {}, settled: settled}).sendDue(t.Context(), start, &done); err != nil {
		t.Fatal(err)
	}
	if waits == 0 || len(wrong) > 0 {
		t.Errorf("the pipeline was waited for %d times (want some: a card that returns after a refund), %v", waits, wrong)
	}
	byTopic := map[string]int{}
	for _, m := range w.msgs {
		byTopic[m.Topic]++
	}
	labels := map[alert.Label]int{}
	for _, b := range g.truth().Bursts {
		if b.Outcome != "" {
			labels[b.Outcome] += len(b.Orders)
			if !b.Complete() {
				t.Errorf("burst %d (%s) has its outcome sent, but only %d of its %d orders", b.ID, b.Pattern, len(b.Orders), b.Planned)
			}
		}
	}
	if byTopic["c"] == 0 || byTopic["c"] != done.outcomes() || done.orders+done.invalid != byTopic["o"] {
		t.Errorf("messages by topic %v, counted %+v", byTopic, done)
	}
	if labels[alert.LabelFraud] != done.fraud || labels[alert.LabelLegit] != done.legit || labels[alert.LabelUnclear] != done.unclear {
		t.Errorf("the truth has outcomes %v on its orders, send counted %+v", labels, done)
	}
}

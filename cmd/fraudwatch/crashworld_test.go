package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// crashRules are what the crash test's replicas count: a rule of each kind.
const crashRules = `rules:
  - name: orders-per-customer
    metric: count
    group_by: [customer_id]
    window: 1h
    threshold: 40
    severity: high
  - name: amount-per-card
    metric: amount
    group_by: [card_fingerprint]
    window: 1h
    threshold: 2300000
    severity: critical
  - name: sliding-orders-per-customer
    metric: count
    group_by: [customer_id]
    window_type: sliding
    window: 1h
    threshold: 40
  - name: devices-per-customer
    metric: distinct
    field: device_id
    group_by: [customer_id]
    window: 1h
    threshold: 5
`

// slackLog is an incoming webhook that records which (rule, group) each
// post is about, and when it arrived.
type slackLog struct {
	mu      sync.Mutex
	posts   map[string][]time.Time
	twice   []string // (rule, group)s that one post carried twice
	bare    []string // alerts posted without their evidence
	other   []string
	digests int
	texts   map[string][]string // each key's posts, to show a doubled one
}

func newSlackLog() *slackLog {
	return &slackLog{posts: map[string][]time.Time{}, texts: map[string][]string{}}
}

var groupRE = regexp.MustCompile(`(sliding-orders-per-customer|orders-per-customer|amount-per-card|devices-per-customer)[\s\S]*?((?:cust|card)-\d{4})`)

func (s *slackLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Text string `json:"text"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	// A digest lists many alerts, a line each with rule and group.
	if ms := groupRE.FindAllStringSubmatch(msg.Text, -1); ms != nil {
		now := time.Now()
		for _, m := range ms {
			key := m[1] + " " + m[2]
			if at := s.posts[key]; len(at) > 0 && at[len(at)-1].Equal(now) {
				// Twice in one post: no crash explains that.
				s.twice = append(s.twice, key)
			}
			s.posts[key] = append(s.posts[key], now)
			s.texts[key] = append(s.texts[key], msg.Text)
		}
		if strings.HasPrefix(msg.Text, "[DIGEST]") {
			s.digests++
		} else if !strings.Contains(msg.Text, "\nlatest orders: ") {
			// Every rule keeps evidence (its default): through the
			// kills too, an alert lists the orders behind it.
			s.bare = append(s.bare, ms[0][1]+" "+ms[0][2])
		}
	} else {
		s.other = append(s.other, msg.Text)
	}
	_, _ = w.Write([]byte("ok"))
}

// crashWorld is the input of the crash test and the truth it implies.
type crashWorld struct {
	orders, refunds []kafka.Message
	count           map[string]int64 // customer -> orders
	amount          map[string]int64 // card -> paid - refunded
	devices         map[string]int64 // customer -> distinct devices, at most 6 (threshold + 1)
	alerts          map[string]bool  // "rule group" expected to alert, once
}

func newCrashWorld(seed uint64, customers, orders, refunds int) *crashWorld {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &crashWorld{count: map[string]int64{}, amount: map[string]int64{}, devices: map[string]int64{}, alerts: map[string]bool{}}
	seen := map[string]map[string]bool{}
	paid := map[string]int64{}
	type placed struct {
		customer, card string
		amount         int64
	}
	var all []placed
	for i := range orders {
		c := rng.IntN(customers)
		customer, card := fmt.Sprintf("cust-%04d", c), fmt.Sprintf("card-%04d", c)
		amount := int64(10_000 + rng.IntN(90_000))
		// Customer c uses up to c%8+1 devices: some never reach the
		// distinct rule's 5.
		device := fmt.Sprintf("dev-%d", rng.IntN(c%8+1))
		if seen[customer] == nil {
			seen[customer] = map[string]bool{}
		}
		seen[customer][device] = true
		w.count[customer]++
		paid[card] += amount
		all = append(all, placed{customer, card, amount})
		w.orders = append(w.orders, kafka.Message{Key: []byte(customer), Value: fmt.Appendf(nil,
			`{"event_id":"o-%d","order_id":"ord-%d","customer_id":%q,"card_fingerprint":%q,"device_id":%q,"amount":%d,"currency":"KRW"}`,
			i, i, customer, card, device, amount)})
	}
	for customer, n := range w.count {
		if n >= 40 {
			w.alerts["orders-per-customer "+customer] = true
			// No order carries occurred_at: the sliding window runs on
			// the records' times, all within its hour.
			w.alerts["sliding-orders-per-customer "+customer] = true
		}
	}
	for customer, devices := range seen {
		w.devices[customer] = min(int64(len(devices)), 6)
		if len(devices) >= 5 {
			w.alerts["devices-per-customer "+customer] = true
		}
	}
	for card, total := range paid {
		w.amount[card] = total
		if total >= 2_300_000 {
			w.alerts["amount-per-card "+card] = true
		}
	}
	// Refunds come after every order is counted, so that no refund finds
	// its window empty; each refunds a distinct order in full.
	for i, j := range rng.Perm(len(all))[:refunds] {
		o := all[j]
		w.amount[o.card] -= o.amount
		w.refunds = append(w.refunds, kafka.Message{Key: []byte(o.customer), Value: fmt.Appendf(nil,
			`{"event_id":"r-%d","order_id":"ord-%d","customer_id":%q,"card_fingerprint":%q,"amount":%d}`,
			i, j, o.customer, o.card, o.amount)})
	}
	return w
}

// replica is one fraudwatch process of the crash test.
type replica struct {
	cmd  *exec.Cmd
	logs *testkit.Buffer
	done chan error
}

// replicaConfig writes the configuration p of a fault test's replica,
// whose group settles fast (heartbeats, session and rebalance timeouts,
// commits), so that kills and rejoins take seconds.
func replicaConfig(t *testing.T, p testkit.Process, rules string) string {
	t.Helper()
	p.Kafka = append(p.Kafka, "heartbeat_interval: 200ms", "session_timeout: 6s", "rebalance_timeout: 10s",
		"commit_interval: 200ms")
	p.Shutdown, p.Rules = "20s", "rules.yaml"
	return writeConfig(t, p.YAML(), rules)
}

func tail(b interface{ String() string }) string {
	s := b.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

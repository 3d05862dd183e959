package app

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// EnvPython names a python that has confluent-kafka (scripts/pyclient.sh
// makes one), and EnvJavaProducer the launcher of testdata/clients/java
// (scripts/javaclient.sh builds it); scripts/test.sh sets both.
const (
	EnvPython       = "FRAUDWATCH_TEST_PYTHON"
	EnvJavaProducer = "FRAUDWATCH_TEST_JAVA_PRODUCER"
)

// realClient finds the program env names, made by script. In CI the test
// fails without one; a developer's quick run skips.
func realClient(t *testing.T, env, script string) string {
	t.Helper()
	if path := os.Getenv(env); path != "" {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the client test needs a real client: scripts/test.sh makes it (" + script + ") and sets " + env)
	}
	t.Skip("no real client: set " + env + " (" + script + ") or run scripts/test.sh")
	return ""
}

// The same rule twice, with and without evidence: a window of each layout
// (a hash, a plain string: lua/incr_and_check.lua).
const clientRules = `
rules:
  - name: orders
    metric: count
    group_by: [customer_id]
    window: 10m
    threshold: 3
  - name: orders-plain
    metric: count
    group_by: [customer_id]
    window: 10m
    threshold: 3
    evidence: 0
  - name: amount
    metric: amount
    group_by: [card_fingerprint]
    window: 10m
    threshold: 1000000
  - name: amount-plain
    metric: amount
    group_by: [card_fingerprint]
    window: 10m
    threshold: 1000000
    evidence: 0
`

// Events as real clients write them: librdkafka, through Python's
// confluent-kafka, and Java's kafka-clients. Each writes idempotent
// batches, every codec, and transactions, one of them aborted, whose
// events must count nowhere (docs/events.md). The windows of both layouts
// count them, refunds included.
func TestEventsFromAPythonProducer(t *testing.T) {
	py := realClient(t, EnvPython, "scripts/pyclient.sh")
	script, err := filepath.Abs("../../../testdata/clients/produce.py")
	if err != nil {
		t.Fatal(err)
	}
	eventsFromARealClient(t, py, script)
}

func TestEventsFromAJavaProducer(t *testing.T) {
	eventsFromARealClient(t, realClient(t, EnvJavaProducer, "scripts/javaclient.sh"))
}

// eventsFromARealClient runs the client command (a program and its first
// arguments: testdata/clients/produce.py's protocol) against a pipeline.
func eventsFromARealClient(t *testing.T, client ...string) {
	p := newPipeline(t, 2, clientRules)
	produce := producer(t, p, client)
	p.start()
	order := func(id, customer, card string, amount int64) string {
		return string(ev{id: id, customer: customer, card: card, amount: amount, currency: "KRW"}.json())
	}
	orders, refunds := p.cfg.Kafka.OrdersTopic, p.cfg.Kafka.RefundsTopic
	crossed := func(rule, id string) func() bool {
		return func() bool {
			return slices.ContainsFunc(p.notes.list(), func(a alert.Alert) bool { return a.Rule == rule && a.EventID == id })
		}
	}

	produce(orders, "zstd", "idempotent", 0, order("a1", "cust-a", "card-a", 1), order("a2", "cust-a", "card-a", 1), order("a3", "cust-a", "card-a", 1))
	// One partition, so that the last commit's event, once counted, says
	// the aborted ones before it were read past.
	produce(orders, "lz4", "transactions", 1,
		order("t1", "cust-t", "card-t", 1), order("t2", "cust-t", "card-t", 1), order("t3", "cust-t", "card-t", 1), "COMMIT",
		order("x1", "cust-x", "card-x", 1), order("x2", "cust-x", "card-x", 1), order("x3", "cust-x", "card-x", 1), "ABORT",
		order("z1", "cust-z", "card-z", 1), "COMMIT")
	for _, rule := range []string{"orders", "orders-plain"} {
		waitFor(t, 30*time.Second, rule+"'s committed event after the aborted ones", func() bool { return p.counter(rule, "cust-z") == 1 })
		waitFor(t, 30*time.Second, rule+"'s idempotent batch crossing", crossed(rule, "a3"))
		waitFor(t, 30*time.Second, rule+"'s committed transaction crossing", crossed(rule, "t3"))
		if n := p.counter(rule, "cust-x"); n != 0 {
			t.Errorf("%s counted %d events of an aborted transaction", rule, n)
		}
	}

	// An amount window of each layout, a refund between its orders.
	amounts := func(what string, want int64) {
		for _, rule := range []string{"amount", "amount-plain"} {
			waitFor(t, 30*time.Second, rule+"'s "+what, func() bool { return p.counter(rule, "card-c") == want })
		}
	}
	produce(orders, "gzip", "idempotent", 0, order("c1", "cust-c1", "card-c", 600_000))
	amounts("first order", 600_000)
	produce(refunds, "snappy", "acks-all", 0, string(ev{id: "r1", customer: "cust-c1", card: "card-c", amount: 600_000}.json()))
	amounts("refund", 0)
	produce(orders, "gzip", "idempotent", 0, order("c2", "cust-c2", "card-c", 600_000), order("c3", "cust-c3", "card-c", 500_000))
	for _, rule := range []string{"amount", "amount-plain"} {
		waitFor(t, 30*time.Second, rule+"'s crossing at 1,100,000", crossed(rule, "c3"))
	}
	for _, a := range p.notes.list() {
		if strings.HasPrefix(a.EventID, "x") {
			t.Errorf("an aborted event alerted: %+v", a)
		}
		if a.Rule == "amount" && (a.Current != 1_100_000 || len(a.Evidence) != 2) {
			t.Errorf("the amount alert: current %d, %d orders listed; want 1,100,000 and c3, c2", a.Current, len(a.Evidence))
		}
	}
	if n := len(p.notes.list()); n != 6 {
		t.Errorf("%d alerts, want 6: a3 and t3 in both count rules, c3 in both amount rules", n)
	}
}

// producer runs client against p's broker: lines (events, and COMMIT or
// ABORT in a transaction) to one partition of topic, compressed by codec,
// in mode (idempotent, acks-all, transactions).
func producer(t *testing.T, p *pipeline, client []string) func(topic, codec, mode string, partition int, lines ...string) {
	return func(topic, codec, mode string, partition int, lines ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append(client[1:len(client):len(client)], strings.Join(p.kafka.Brokers, ","), topic, codec, mode, strconv.Itoa(partition))
		cmd := exec.CommandContext(ctx, client[0], args...)
		cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s %s: %v\n%s", topic, codec, mode, err, out.String())
		}
	}
}

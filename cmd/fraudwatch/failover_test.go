package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

const failoverRules = `rules:
  - {name: orders-per-customer, metric: count, group_by: [customer_id], window: 1h, threshold: 20, severity: high}
`

// A master of the Redis Cluster is killed with SIGKILL while two replicas
// count a wave of orders; its replica takes over. Redis replicates
// asynchronously, so what the dead master had acknowledged and not yet
// passed on is lost: the test measures how much, and checks what must
// hold all the same: nothing is counted twice, every order is processed,
// the replicas are ready again. It prints the measurement docs/design.md quotes.
func TestMasterFailoverUnderLoad(t *testing.T) {
	if !redistest.Cluster() {
		t.Skip("make test-cluster runs it: it kills a master of a Redis Cluster of its own")
	}
	k := kafkatest.New(t)
	if k.Fake() != nil {
		t.Skip("needs a real Kafka broker: set " + kafkatest.EnvBrokers + " or run scripts/test.sh")
	}
	cluster := redistest.StartCluster(t)
	rdb := cluster.Client(t)
	orders := k.Topic(t, "orders", 4)
	refunds, dlq, alerts := k.Topic(t, "refunds", 1), k.Topic(t, "dlq", 1), k.Topic(t, "alerts", 2)
	outcomesTopic := k.Topic(t, "outcomes", 1)
	slack := newSlackLog()
	srv := httptest.NewServer(slack)
	defer srv.Close()
	prefix := redistest.Prefix(t)
	group := kafkatest.Group(t, "fw")

	const customers, perCustomer = 300, 100
	truth := map[string]int64{}
	var msgs []kafka.Message
	for i := range customers * perCustomer {
		c := fmt.Sprintf("cust-%04d", i%customers)
		truth[c]++
		msgs = append(msgs, kafka.Message{Key: []byte(c), Value: fmt.Appendf(nil,
			`{"event_id":"o-%d","order_id":"ord-%d","customer_id":%q,"amount":100,"currency":"KRW"}`, i, i, c)})
	}

	var metrics []string
	var reps []*replica
	for range 2 {
		m := freeAddr(t)
		metrics = append(metrics, m)
		// No alert budget to speak of: every alert is posted alone, and
		// counted.
		cfg := replicaConfig(t, testkit.Process{Brokers: k.Brokers[:1], Group: group, Orders: orders, Refunds: refunds,
			DeadLetter: dlq, Alerts: alerts, Outcomes: outcomesTopic, RedisAddrs: cluster.Addrs, Cluster: true, Prefix: prefix,
			Webhook: srv.URL + "/hook", Metrics: m,
			Slack: []string{"rate: 1000", "burst: 1000", "overall_rate: 1000", "overall_burst: 1000"}}, failoverRules)
		cmd := command("run", "--config", cfg, "--log-format", "text")
		r := &replica{cmd: cmd, logs: &testkit.Buffer{}, done: make(chan error, 1)}
		cmd.Stdout, cmd.Stderr = r.logs, r.logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.done <- cmd.Wait() }()
		reps = append(reps, r)
	}
	t.Cleanup(func() {
		for _, r := range reps {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			for i, r := range reps {
				t.Logf("replica %d:\n%s", i, tail(r.logs))
			}
		}
	})
	var notReady string
	ready := func(m string) bool {
		resp, err := http.Get("http://" + m + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		notReady = string(body)
		return resp.StatusCode == http.StatusOK
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last /readyz answer: %s", notReady)
		}
	})
	waitFor(t, 60*time.Second, "both replicas ready", func() bool { return ready(metrics[0]) && ready(metrics[1]) })

	keys, err := lua.NewKeysIn(prefix, config.Redis{Cluster: true}.CountingBuckets())
	if err != nil {
		t.Fatal(err)
	}
	rs, err := config.ParseRules([]byte(failoverRules), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	state := rs[0].State()
	counted := func() (sum, over, under int64) {
		for c, want := range truth {
			n, err := countOf(redistest.FixedCount(context.Background(), rdb, keys.Counter(keys.Group([]string{c}), state)))
			if err != nil && err != redis.Nil {
				rdb.ReloadState(context.Background()) // the cluster failed over: where are the slots now?
				return -1, 0, 0
			}
			sum += n
			over += max(0, n-want)
			under += max(0, want-n)
		}
		return sum, over, under
	}

	// The orders come in a steady stream of 30 chunks, so that the master
	// dies while they are being counted.
	total := int64(len(msgs))
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for chunk := range slices.Chunk(msgs, len(msgs)/30) {
			k.Produce(t, orders, chunk...)
			time.Sleep(100 * time.Millisecond) // the stream's pace, not a wait for anything
		}
	}()
	waitFor(t, 2*time.Minute, "a third of the orders counted", func() bool { s, _, _ := counted(); return s >= total/3 })
	before, _, _ := counted()
	took, err := cluster.KillMaster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-produced
	// Every order processed (consumed once at least, nothing left behind),
	// and both replicas ready again.
	waitFor(t, 3*time.Minute, "every order processed", func() bool {
		var n float64
		for _, m := range metrics {
			n += scrape(t, m, "fraudwatch_events_consumed_total", "type", "order")
		}
		return n >= float64(total) && scrape(t, metrics[0], "fraudwatch_consumer_lag")+scrape(t, metrics[1], "fraudwatch_consumer_lag") == 0
	})

	waitFor(t, 60*time.Second, "both replicas ready again", func() bool { return ready(metrics[0]) && ready(metrics[1]) })
	var sum, over, under int64
	waitFor(t, 30*time.Second, "the counters readable", func() bool { sum, over, under = counted(); return sum >= 0 })
	if over != 0 {
		t.Fatalf("after the failover %d counts more than the truth: an order counted twice", over)
	}
	crossings, posted, doubled := 0, 0, 0
	slack.mu.Lock()
	for c, n := range truth {
		if n >= 20 {
			crossings++
			switch got := len(slack.posts["orders-per-customer "+c]); {
			case got == 1:
				posted++
			case got > 1:
				posted++
				doubled++
			}
		}
	}
	slack.mu.Unlock()
	t.Logf("failover: a master killed with %d of %d orders counted; its replica took over in %v; "+
		"afterwards %d counted, %d lost (%.2f %%), none twice; of %d crossings %d posted (%d twice)",
		before, total, took.Round(time.Millisecond), sum, under, 100*float64(under)/float64(total), crossings, posted, doubled)
}

// scrape sums the samples of a counter or gauge, or the observations of a
// histogram, on a replica's /metrics
// whose labels include the given name, value pairs; 0 when absent or
// unreachable.
func scrape(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	return valueOf(scrapeAll(t, addr), name, labels...)
}

// scrapeAll reads addr's metrics once, uncompressed: a test that scrapes
// often should not spend the process's CPU on gzip. Nil when unreachable.
// Safe to call from a goroutine other than the test's.
func scrapeAll(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Errorf("scrape %s: %v", addr, err) // not Fatal: the flood test scrapes from a goroutine of its own
		return nil
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Errorf("parse %s/metrics: %v", addr, err)
		return nil
	}
	return fams
}

// valueOf sums the series of name in fams whose labels match labels
// (name, value pairs).
func valueOf(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		has := map[string]string{}
		for _, l := range m.GetLabel() {
			has[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && has[labels[i]] == labels[i+1]
		}
		if match {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

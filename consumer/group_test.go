package consumer

import (
	"context"
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"
)

// A group hands kafka-go every setting of its own: membership timings,
// start offset, client id, TLS and SASL, for the group and for the other
// clients of its cluster (docs/configuration.md).
func TestGroupHandsItsSettingsToKafkaGo(t *testing.T) {
	for _, earliest := range []bool{true, false} {
		cfg := GroupConfig{
			Brokers: []string{"127.0.0.1:9092", "127.0.0.1:9093"}, GroupID: "fw", Topics: []string{"orders", "refunds"},
			ClientID: "fraudwatch-eu", TLS: &tls.Config{ServerName: "kafka.internal"},
			SASL:              plain.Mechanism{Username: "fw", Password: "secret"},
			StartEarliest:     earliest,
			CommitInterval:    2 * time.Second,
			SessionTimeout:    45 * time.Second,
			HeartbeatInterval: 5 * time.Second,
			RebalanceTimeout:  time.Minute,
		}
		g, err := NewGroup(cfg, MessageHandlerFunc(func(context.Context, []kafka.Message) (int, error) { return 0, nil }), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		gc := g.groupConfig()
		start := kafka.LastOffset
		if earliest {
			start = kafka.FirstOffset
		}
		if gc.ID != "fw" || !slices.Equal(gc.Brokers, cfg.Brokers) || !slices.Equal(gc.Topics, cfg.Topics) ||
			gc.SessionTimeout != 45*time.Second || gc.HeartbeatInterval != 5*time.Second || gc.RebalanceTimeout != time.Minute ||
			gc.StartOffset != start {
			t.Errorf("earliest=%v: kafka-go's group config %+v", earliest, gc)
		}
		if d := gc.Dialer; d != g.dialer || d.ClientID != "fraudwatch-eu" || d.TLS != cfg.TLS || d.SASLMechanism != cfg.SASL {
			t.Errorf("the group's dialer %+v, want the group's client id, TLS and SASL", gc.Dialer)
		}
		if tr := cfg.Transport(); tr.ClientID != "fraudwatch-eu" || tr.TLS != cfg.TLS || tr.SASL != cfg.SASL {
			t.Errorf("the cluster's transport %+v, want the group's client id, TLS and SASL", tr)
		}
	}
}

// waiter is a handler that waits, as the dispatcher waits for a budget,
// until its generation ends.
type waiter struct {
	entered chan struct{}
	work    chan error // what the work context said once the wait ended
}

func (w *waiter) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	return w.HandleMessagesIn(ctx, ctx, msgs)
}

func (w *waiter) HandleMessagesIn(work, generation context.Context, _ []kafka.Message) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-generation.Done()
	w.work <- work.Err()
	return 0, generation.Err()
}

// A handler's wait that ends with the generation (HandleMessagesIn) ends at
// shutdown while its work context still runs: the message is left
// uncommitted for the next owner, and Run reports a clean shutdown, not an
// aborted one, however long the drain timeout.
func TestAWaitEndedWithTheGenerationLeavesAShutdownClean(t *testing.T) {
	e := newEnv(t, 1)
	cfg := e.config()
	cfg.DrainTimeout = time.Minute
	gc := cfg.group()
	gc.Topics = []string{e.orders}
	w := &waiter{entered: make(chan struct{}, 1), work: make(chan error, 1)}
	g, err := NewGroup(gc, w, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1))
	<-w.entered
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want a clean shutdown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still draining 30 s after shutdown began")
	}
	if err := <-w.work; err != nil {
		t.Fatalf("the work context ended (%v) before the generation's wait did", err)
	}
	if got := committed(t, e, e.orders, 0); got > 0 {
		t.Fatalf("committed offset = %d: the message waited on was committed", got)
	}
}

// Several groups read one topic in one process (an alerts group per
// receiver): each partition's series carries its group, so one group's lag
// never overwrites another's (docs/operations.md).
func TestGroupsOnOneTopicKeepTheirOwnSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	handler := MessageHandlerFunc(func(context.Context, []kafka.Message) (int, error) { return 0, nil })
	for i, id := range []string{"fw.alerts", "fw.alerts.pager"} {
		g, err := NewGroup(GroupConfig{Brokers: []string{"127.0.0.1:9092"}, GroupID: id, Topics: []string{"alerts"},
			CommitInterval: time.Second, SessionTimeout: 30 * time.Second, HeartbeatInterval: 3 * time.Second, RebalanceTimeout: 30 * time.Second}, handler, nil, reg)
		if err != nil {
			t.Fatalf("group %s: %v", id, err)
		}
		g.lag.WithLabelValues("alerts", "0").Set(float64(10 * (i + 1)))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	lags := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "fraudwatch_consumer_lag" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" {
					lags[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	if lags["fw.alerts"] != 10 || lags["fw.alerts.pager"] != 20 || len(lags) != 2 {
		t.Errorf("fraudwatch_consumer_lag by group = %v, want fw.alerts 10 and fw.alerts.pager 20", lags)
	}
}

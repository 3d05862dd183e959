package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// routedRulesYAML is one rule that every order of the routed run crosses
// (its customer's first order: each has a customer of its own), routed to
// the three receivers.
const routedRulesYAML = `rules:
  - {name: routed-order, metric: count, group_by: [customer_id], window: 10m, threshold: 1, severity: critical}
routes:
  - match: {rules: [routed-order]}
    receivers: [slack, cases, pager]
`

// pagerBurst and pagerRate are the most PagerDuty's budget takes
// (config's MaxPagerDutyRate, docs/configuration.md, Receivers): the
// routed run's alerts must fit in them, or the row would measure the
// budget.
const (
	pagerBurst = 120
	pagerRate  = 2.0
)

// checkRouted refuses, before the bench starts, a routed run PagerDuty's
// budget could not carry.
func checkRouted(n int, rate float64) error {
	if n <= 0 {
		return nil
	}
	if rate <= 0 {
		return fmt.Errorf("-routed-rate must be above 0, got %v", rate)
	}
	if float64(n) > pagerBurst+pagerRate*float64(n)/rate {
		return fmt.Errorf("-routed-alerts %d at -routed-rate %v is more than PagerDuty's budget carries (burst %d, %v a second): the row would measure the budget", n, rate, pagerBurst, pagerRate)
	}
	return nil
}

// routed measures a routed alert's latency to each receiver: fraudwatch,
// as the bench runs it, with a Slack bot, a webhook and PagerDuty (the
// stand-ins of internal/standin) all routed for one rule, over orders
// each of which crosses it, produced at -routed-rate; from each order's
// produce to the stand-in accepting its alert.
func (b *bench) routed(ctx context.Context) error {
	n, rate := b.o.routedAlerts, b.o.routedRate
	if err := flushSync(ctx, b.rdb); err != nil {
		return err
	}
	run := *b.fw
	run.dir = filepath.Join(b.dir, "routed")
	run.orders, run.refunds = "bench.routed."+b.suffix, "bench.routed-refunds."+b.suffix
	run.group, run.prefix, run.replicas, run.rules = "bench-routed-"+b.suffix, "rt", 1, routedRulesYAML
	if err := createTopics(ctx, b.brokers, b.o.partitions, run.orders, run.refunds); err != nil {
		return err
	}
	if err := createTopics(ctx, b.brokers, 1, run.orders+".dlq", run.orders+".outcomes"); err != nil {
		return err
	}
	base := "rt" + b.suffix + "-"
	rr, err := startReceivers(regexp.MustCompile(regexp.QuoteMeta(base+"o") + `[0-9]+`))
	if err != nil {
		return err
	}
	defer rr.close()
	run.extra = rr.config()
	progress("(b) a routed alert's latency to Slack, a webhook and PagerDuty: %d crossing orders at %v/s", n, rate)
	reps, err := run.start(ctx)
	defer stop(reps) // before rr.close: fraudwatch goes first
	if err != nil {
		return err
	}
	wr := &kafka.Writer{Addr: kafka.TCP(b.brokers...), Topic: run.orders, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchSize: 1}
	defer wr.Close()
	// Order 0 is not measured: it waits for fraudwatch to join its groups
	// and for each receiver to have been sent an alert once.
	warm, err := produceRouted(ctx, wr, base, 0, 1, rate)
	if err != nil {
		return err
	}
	if err := rr.waitAll(ctx, warm, time.Minute, run.dir); err != nil {
		return err
	}
	produced, err := produceRouted(ctx, wr, base, 1, n+1, rate)
	if err != nil {
		return err
	}
	if err := rr.waitAll(ctx, produced, 30*time.Second, run.dir); err != nil {
		return err
	}
	return b.routedRows(rr, produced, rate)
}

// routedRows adds a row a receiver: its latencies over the measured
// orders.
func (b *bench) routedRows(rr *routedReceivers, produced map[string]time.Time, rate float64) error {
	n := len(produced)
	for _, r := range rr.list {
		at, alerts, grouped := r.arrivals.snapshot()
		if grouped > 0 {
			return fmt.Errorf("receiver %s was sent %d digests: a budget held alerts back, and the row would measure it", r.name, grouped)
		}
		lat := make([]float64, 0, n)
		for id, t0 := range produced {
			lat = append(lat, at[id].Sub(t0).Seconds())
		}
		slices.Sort(lat)
		note := fmt.Sprintf("%s alerts, one a crossing order produced at %v/s, one rule routed to three receivers (the stand-ins of internal/standin); every budget above the load", thousands(n), rate)
		if again := alerts - (n + 1); again > 0 { // +1: order 0
			note += fmt.Sprintf("; %d alerts sent again", again)
		}
		b.tbl.add("b", "a routed alert, from its order's produce to the receiver: "+r.what,
			fmt.Sprintf("p50 %s, p99 %s, max %s", ms(rank(lat, 0.5)), ms(rank(lat, 0.99)), ms(lat[n-1])), note)
	}
	return nil
}

// rank is the q quantile of sorted, by nearest rank.
func rank(sorted []float64, q float64) float64 {
	i := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return sorted[i]
}

// produceRouted writes orders from to to-1, each by a customer of its
// own, at rate a second, and returns when each was produced: when it was
// handed to the writer, which waits for the broker's acknowledgement.
func produceRouted(ctx context.Context, wr *kafka.Writer, base string, from, to int, rate float64) (map[string]time.Time, error) {
	produced := make(map[string]time.Time, to-from)
	every := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for i := from; i < to; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(next)):
		}
		next = next.Add(every)
		n := strconv.Itoa(i)
		ev := benchEvent{EventID: base + "e" + n, Type: "order", OrderID: base + "o" + n, CustomerID: base + "c" + n,
			CardFingerprint: base + "f" + n, IP: "10.9.0.1", Amount: 10_000, Currency: "KRW"}
		value, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		at := time.Now()
		if err := wr.WriteMessages(ctx, kafka.Message{Key: []byte(ev.CustomerID), Value: value, Time: at}); err != nil {
			return nil, fmt.Errorf("produce the routed run's order %d: %w", i, err)
		}
		produced[ev.OrderID] = at
	}
	return produced, nil
}

// waitAll waits until every order of ids has reached every receiver, or
// a stand-in finds something wrong, or timeout passes.
func (rr *routedReceivers) waitAll(ctx context.Context, ids map[string]time.Time, timeout time.Duration, logs string) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := rr.t.err(); err != nil {
			return fmt.Errorf("the receivers' stand-ins: %w", err)
		}
		missing := ""
		for _, r := range rr.list {
			at, _, _ := r.arrivals.snapshot()
			got := 0
			for id := range ids {
				if _, ok := at[id]; ok {
					got++
				}
			}
			if got < len(ids) {
				missing += fmt.Sprintf(" %s: %d of %d;", r.name, got, len(ids))
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v, not every alert had arrived (%s); fraudwatch's log is in %s", timeout, missing, logs)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

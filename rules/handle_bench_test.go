package rules_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

type discardSink struct{}

func (discardSink) Publish(context.Context, ...alert.Alert) error { return nil }

// BenchmarkHandle is the hot path from a fetched batch's bytes to Redis's
// answers: decoding 500 orders and counting them into the four rules of
// make bench, against a real Redis. Its allocations per op are a batch's:
// what the Go side spends beside Redis's time. Run it with -memprofile to
// see where (docs/performance.md). Its cpu-µs/event is the process's CPU
// (all its threads, the garbage collector's included) while timed, per
// event: fraudwatch's own CPU an event without Kafka, which ns/op is not,
// for it waits on Redis. It runs with the app's default counting buckets
// on one Redis (16) and a cluster's (256): with fewer, a call holds more
// windows; and with evidence: 20 (the most a rule keeps), where the
// customer's and the IP's windows keep evidence from their first order to
// their crossing, and each batch makes evidence_add calls.
func BenchmarkHandle(b *testing.B) {
	for _, c := range []struct{ buckets, evidence int }{{16, 0}, {lua.Buckets, 0}, {16, lua.MaxEvidence}} {
		name := "buckets=" + strconv.Itoa(c.buckets)
		if c.evidence > 0 {
			name += "/evidence=" + strconv.Itoa(c.evidence)
		}
		b.Run(name, func(b *testing.B) { benchmarkHandle(b, c.buckets, c.evidence) })
	}
}

func benchmarkHandle(b *testing.B, buckets, evidence int) {
	rdb := redistest.Client(b)
	scripts, err := lua.New(lua.Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	r := func(name string, m alert.Metric, threshold int64, groupBy string) rules.Rule {
		rr := rule(name, m, threshold, groupBy)
		rr.Window, rr.Evidence = 10*time.Minute, evidence
		return rr
	}
	rs := []rules.Rule{
		r("orders-per-customer", alert.Count, 20, "customer_id"),
		r("amount-per-customer", alert.Amount, 2_000_000, "customer_id"),
		r("orders-per-card", alert.Count, 35, "card_fingerprint"),
		r("orders-per-ip", alert.Count, 12, "ip"),
	}
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: redistest.Prefix(b), Buckets: buckets}, rs, scripts, discardSink{},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	const batch = 500
	raw := make([][]byte, batch)
	evs := make([]*event.Event, batch)
	offset := int64(0)
	var (
		cpu time.Duration // the process's CPU while timed
		n   int
	)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		// Each event written over the last batch's bytes: garbage made
		// here would be collected while timed, and counted as the
		// process's CPU (json.Marshal of a map was a tenth of it).
		for i := range raw {
			raw[i] = appendOrder(raw[i][:0], offset)
			offset++
		}
		b.StartTimer()
		cpu -= processCPU(b)
		dec := event.NewBatch(raw) // as the consumer decodes a batch
		for i := range raw {
			ev, err := dec.Decode(i, event.Order)
			if err != nil {
				b.Fatal(err)
			}
			ev.Source = event.Source{Topic: "orders", Partition: 0, Offset: offset - batch + int64(i)}
			evs[i] = ev
		}
		if _, err := e.Handle(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU(b)
		n += batch
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n), "cpu-µs/event")
}

// appendOrder appends order number n of BenchmarkHandle's workload, as
// JSON: 100,000 customers, each with a card and an IP of its own.
func appendOrder(b []byte, n int64) []byte {
	c := (n * 7919) % 100_000
	b = strconv.AppendInt(append(b, `{"event_id":"ev-`...), n, 10)
	b = strconv.AppendInt(append(b, `","type":"order","order_id":"ord-`...), n, 10)
	b = strconv.AppendInt(append(b, `","customer_id":"cust-`...), c, 10)
	b = strconv.AppendInt(append(b, `","card_fingerprint":"card-`...), c, 10)
	b = strconv.AppendInt(append(b, `","ip":"10.0.`...), c, 10)
	b = strconv.AppendInt(append(b, `","amount":`...), 1000+n%200_000, 10)
	return append(b, `,"currency":"KRW"}`...)
}

// processCPU is the CPU time, user and system, that the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

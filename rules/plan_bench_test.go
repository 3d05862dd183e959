package rules

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// BenchmarkDecodeAndPlan is BenchmarkHandle's Go side without Redis:
// decoding its 500 orders and planning them for its four rules, the plan
// put back. Without Redis's answers and go-redis's writes it is steadier
// than BenchmarkHandle's cpu-µs/event on a loaded machine, for comparing
// two versions of the planner or the decoder (docs/performance.md,
// fraudwatch's own share). Like BenchmarkHandle, it runs with 16 counting
// buckets and with 256.
func BenchmarkDecodeAndPlan(b *testing.B) {
	for _, buckets := range []int{16, lua.Buckets} {
		b.Run("buckets="+strconv.Itoa(buckets), func(b *testing.B) { benchmarkDecodeAndPlan(b, buckets) })
	}
}

func benchmarkDecodeAndPlan(b *testing.B, buckets int) {
	r := func(name string, m alert.Metric, threshold int64, groupBy string) Rule {
		return Rule{Name: name, Metric: m, GroupBy: []string{groupBy}, Window: 10 * time.Minute, Threshold: threshold,
			Cooldown: time.Minute, Severity: alert.SeverityWarning, Mode: alert.ModeAlert, Enabled: true}
	}
	rs := []Rule{
		r("orders-per-customer", alert.Count, 20, "customer_id"),
		r("amount-per-customer", alert.Amount, 2_000_000, "customer_id"),
		r("orders-per-card", alert.Count, 35, "card_fingerprint"),
		r("orders-per-ip", alert.Count, 12, "ip"),
	}
	e, err := NewEngine(EngineConfig{KeyPrefix: "fw-bench", Buckets: buckets}, rs, noCounters{}, noSink{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 500
	batches := make([][][]byte, 16) // a few batches, made once, taken in turn
	offset := int64(0)
	for i := range batches {
		batches[i] = make([][]byte, batch)
		for j := range batches[i] {
			c := strconv.FormatInt((offset*7919)%100_000, 10)
			batches[i][j], _ = json.Marshal(map[string]any{
				"event_id": "ev-" + strconv.FormatInt(offset, 10), "type": "order", "order_id": "ord-" + strconv.FormatInt(offset, 10),
				"customer_id": "cust-" + c, "card_fingerprint": "card-" + c, "ip": "10.0." + c, "amount": 1000 + offset%200_000, "currency": "KRW",
			})
			offset++
		}
	}
	evs := make([]*event.Event, batch)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		raw := batches[n%len(batches)]
		dec := event.NewBatch(raw)
		for i := range raw {
			ev, err := dec.Decode(i, event.Order)
			if err != nil {
				b.Fatal(err)
			}
			ev.Source = event.Source{Topic: "orders", Partition: 0, Offset: int64(n*batch + i)}
			evs[i] = ev
		}
		e.plans.put(e.plan(*e.rules.Load(), evs))
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(n*batch), "µs/event")
}

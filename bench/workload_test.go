package main

import (
	"math"
	"testing"
)

// The latency run's traffic is (b)'s shape, in customers, cards and
// addresses of its own: none of (b)'s groups, and as many events a
// customer.
func TestLatencyWorkloadIsBsShapeInItsOwnGroups(t *testing.T) {
	b := &bench{o: options{events: 200_000, customers: 20_000, refunds: 0.05, seed: 1}}
	groups := func(w workload) (map[string]bool, float64) {
		seen := map[string]bool{}
		customers := map[string]bool{}
		if err := w.generate(func(ev benchEvent) error {
			seen[ev.CustomerID], seen[ev.CardFingerprint], seen[ev.IP] = true, true, true
			customers[ev.CustomerID] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return seen, float64(w.events) / float64(len(customers))
	}
	main, perMain := groups(b.workload(b.o.events, b.o.seed))
	lat, perLat := groups(b.latencyWorkload(50_000))
	for g := range lat {
		if main[g] {
			t.Fatalf("the latency run shares group value %q with (b)", g)
		}
	}
	if math.Abs(perLat/perMain-1) > 0.05 {
		t.Fatalf("events a customer: latency run %.2f, (b) %.2f", perLat, perMain)
	}
}

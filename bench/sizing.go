package main

import (
	"context"
	"fmt"
)

// sizing holds the figures docs/performance.md's sizing table is computed
// from.
type sizing struct {
	single  result // (b), 1 process on one Redis
	cluster []clusterFigure
}

type clusterFigure struct {
	masters int
	res     result
}

// sizingRules are one rule of each kind, each measured alone for the
// Redis memory a group it follows costs. The distinct rules and the count
// rule of threshold 3 have their threshold within evidence, and so keep
// every group's orders from its first; the same count rule without
// evidence prices that.
var sizingRules = []struct{ kind, rule, evidence string }{
	{"count, fixed window", "{name: r, metric: count, group_by: [customer_id], window: 10m, threshold: 20}", defaultEvidence},
	{"amount, fixed window", "{name: r, metric: amount, group_by: [customer_id], window: 10m, threshold: 2000000}", defaultEvidence},
	{"count, sliding window", "{name: r, metric: count, group_by: [customer_id], window_type: sliding, window: 10m, threshold: 20}", defaultEvidence},
	{"amount, sliding window", "{name: r, metric: amount, group_by: [customer_id], window_type: sliding, window: 10m, threshold: 2000000}", defaultEvidence},
	{"distinct IPs, fixed window", "{name: r, metric: distinct, field: ip, group_by: [customer_id], window: 10m, threshold: 3}", defaultEvidence},
	{"distinct IPs, sliding window", "{name: r, metric: distinct, field: ip, group_by: [customer_id], window_type: sliding, window: 10m, threshold: 3}", defaultEvidence},
	{"count, fixed window, threshold 3", "{name: r, metric: count, group_by: [customer_id], window: 10m, threshold: 3}",
		defaultEvidence + ": every order to the crossing"},
	{"count, fixed window, threshold 3, no evidence", "{name: r, metric: count, group_by: [customer_id], window: 10m, threshold: 3, evidence: 0}",
		"evidence: 0"},
}

const defaultEvidence = "evidence: 10, the default"

// eventsPerCustomer is how many events a customer sends in (b)'s workload
// (1,000,000 events from 100,000 customers).
const eventsPerCustomer = 10

// groupDensities are the events per customer of the sizing runs' workloads:
// one, and as many as in (b)'s.
var groupDensities = []int{1, eventsPerCustomer}

// sizingRuns measures, on workloads of their own:
//
//   - The Redis memory per group of each kind of rule, one rule at a time,
//     with customers sending one event and as many as (b)'s do.
//   - What one partition carries: the four rules, the orders and refunds
//     topics with one partition each.
//
// Then it derives the per-core rates of (b) and the cluster rows.
func (b *bench) sizingRuns(ctx context.Context) error {
	n := min(b.o.sizingEvents, b.o.events)
	workloadOf := func(density int) workload {
		return workload{events: n, customers: max(n/density, 1), refunds: b.o.refunds, seed: b.o.seed + 2}
	}
	for d, density := range groupDensities {
		w := workloadOf(density)
		orders, refunds := fmt.Sprintf("bench.sizing%d.orders.%s", density, b.suffix), fmt.Sprintf("bench.sizing%d.refunds.%s", density, b.suffix)
		if err := b.produceTo(ctx, w, orders, refunds, b.o.partitions); err != nil {
			return err
		}
		for i, r := range sizingRules {
			perGroup, groups, err := b.memoryPerGroup(ctx, r.rule, orders, refunds, n, fmt.Sprintf("bench-fw-sizing%d-%d-%s", d, i, b.suffix))
			if err != nil {
				return err
			}
			// Customers are drawn at random, so some send none: a group's
			// events are the events over the groups there are.
			b.tbl.add("b", fmt.Sprintf("sizing: Redis memory per active group, a rule on %s, %.1f events a group", r.kind, float64(n)/float64(max(groups, 1))),
				fmt.Sprintf("%.0f bytes", perGroup), fmt.Sprintf("%s events in %s groups; %s", thousands(n), thousands(groups), r.evidence))
		}
	}

	// One partition: its loop runs one batch at a time. Customers send as
	// many events as in (b).
	one := "bench.sizing.one." + b.suffix
	if err := b.produceTo(ctx, workloadOf(eventsPerCustomer), one+".orders", one+".refunds", 1); err != nil {
		return err
	}
	if err := flushSync(ctx, b.rdb); err != nil {
		return err
	}
	progress("(b) sizing: the four rules on one partition, over %d events", n)
	run := *b.fw
	run.orders, run.refunds, run.events, run.group = one+".orders", one+".refunds", n, "bench-fw-sizing1-"+b.suffix
	res, err := run.measure(ctx, b.redis(ctx), nil)
	if err != nil {
		return err
	}
	b.row("sizing: one partition (of orders, and one of refunds), the 4 rules", res, func() string {
		return fmt.Sprintf("%s events; redis-server %.0f %% of a core, fraudwatch %.0f %%", thousands(n), 100*res.redis.core, 100*res.cores)
	})

	s := b.sizing.single
	b.tbl.add("b", "sizing: events/s per Redis core, the 4 rules, one Redis", fmt.Sprintf("%.0f events/s", s.eventsPerSec/s.redis.core),
		fmt.Sprintf("(b)'s first row ÷ redis-server's share of a core (%.0f %%); %.0f rule evaluations/s", 100*s.redis.core, rulesPerOrder*s.eventsPerSec/s.redis.core))
	for _, c := range b.sizing.cluster {
		masters := c.res.redis.core - c.res.redis.replicas
		b.tbl.add("b", fmt.Sprintf("sizing: events/s per Redis core, the 4 rules, Redis Cluster of %d master%s", c.masters, plural(c.masters, "s")),
			fmt.Sprintf("%.0f events/s per master core", c.res.eventsPerSec/masters),
			fmt.Sprintf("%.0f per core of masters and replicas together", c.res.eventsPerSec/c.res.redis.core))
	}
	b.tbl.add("b", "sizing: events/s per fraudwatch core, the 4 rules", fmt.Sprintf("%.0f events/s", s.eventsPerSec/s.cores),
		fmt.Sprintf("(b)'s first row ÷ fraudwatch's share of a core (%.0f %%); peak RSS %s", 100*s.cores, mib(s.peakRSS)))
	return nil
}

// memoryPerGroup runs one rule alone over the events in orders and
// refunds, on an empty Redis, and returns the memory Redis holds then per
// group the rule counted.
func (b *bench) memoryPerGroup(ctx context.Context, rule, orders, refunds string, n int, group string) (float64, int, error) {
	if err := flushSync(ctx, b.rdb); err != nil {
		return 0, 0, err
	}
	mem0, err := memoryNow(ctx, b.rdb, b.slow, false)
	if err != nil {
		return 0, 0, err
	}
	progress("(b) sizing: Redis memory of %s over %d events", rule, n)
	run := *b.fw
	run.orders, run.refunds, run.events = orders, refunds, n
	run.rules, run.group = "rules:\n  - "+rule+"\n", group
	var perGroup float64
	var groups int
	_, err = run.measure(ctx, b.redis(ctx), func([]*replica, *result) error {
		mem1, err := memoryNow(ctx, b.rdb, b.slow, false) // its calls are not (b)'s
		if err != nil {
			return err
		}
		// A fixed rule's windows, else a sliding one's, else a distinct
		// rule's values.
		for _, kind := range []string{"f", "w", "d"} {
			if groups, err = countKeys(ctx, b.rdb, "fw:{*}:"+kind+":*"); err != nil || groups > 0 {
				break
			}
		}
		if err != nil {
			return err
		}
		perGroup = float64(mem1-mem0) / float64(max(groups, 1))
		return nil
	})
	return perGroup, groups, err
}

package main

import (
	"context"
	"fmt"

	"github.com/fraudwatch/fraudwatch/lua"
)

// scaling measures (b) again with more processes in the group.
func (b *bench) scaling(ctx context.Context) error {
	for _, n := range b.o.scaling {
		if err := flushSync(ctx, b.rdb); err != nil {
			return err
		}
		progress("(b) fraudwatch, %d processes, over %d events", n, b.o.events)
		run := *b.fw
		run.replicas, run.group = n, fmt.Sprintf("bench-fw%d-%s", n, b.suffix)
		res, err := run.measure(ctx, b.redis(ctx), nil)
		if err != nil {
			return err
		}
		b.row(fmt.Sprintf("fraudwatch, %d processes in one group", n), res, func() string {
			return fmt.Sprintf("%.2f × 1 process; peak RSS %s a process; redis-server %.0f %% of a core, fraudwatch %.0f %% in all",
				res.eventsPerSec/b.fwEvents, mib(res.peakRSS), 100*res.redis.core, 100*res.cores)
		})
	}
	return nil
}

// windows measures (b) again with sliding windows, with a distinct rule
// and without evidence: what event time and distinct counts cost next to
// fixed windows, and what evidence costs; each row also against the first
// with both ÷ the seed-style ceiling measured right after each
// (ceilingAfter), which a slow spell over one of them does not move.
func (b *bench) windows(ctx context.Context) error {
	for i, v := range []struct{ name, rules, vs string }{
		{"the 4 rules as sliding windows", slidingRulesYAML, "fixed windows"},
		{"the 4 fixed rules and a fifth, distinct IPs per customer (sliding)", distinctRulesYAML, "fixed windows"},
		{"the 4 fixed rules without evidence (evidence: 0)", noEvidenceRulesYAML, "with evidence (the first row)"},
	} {
		if err := flushSync(ctx, b.rdb); err != nil {
			return err
		}
		mem0, err := memoryNow(ctx, b.rdb, b.slow, false)
		if err != nil {
			return err
		}
		progress("(b) fraudwatch, 1 process, %s, over %d events", v.name, b.o.events)
		run := *b.fw
		run.rules, run.group = v.rules, fmt.Sprintf("bench-fw-windows%d-%s", i, b.suffix)
		var memPerEvent float64
		res, err := run.measure(ctx, b.redis(ctx), func([]*replica, *result) error {
			mem1, err := memoryNow(ctx, b.rdb, b.slow, true)
			memPerEvent = float64(mem1-mem0) / float64(b.o.events)
			return err
		})
		if err != nil {
			return err
		}
		if err := b.slow.since(ctx, b.rdb, res.slowFrom); err != nil {
			return err
		}
		after, err := b.ceilingAfter(ctx, b.rdb, "")
		if err != nil {
			return err
		}
		b.row("fraudwatch, 1 process, "+v.name, res, func() string {
			return fmt.Sprintf("%.2f × %s%s; Redis %.1f µs in scripts and %.0f bytes of memory per event; redis-server %.0f %% of a core, fraudwatch %.0f %%",
				res.eventsPerSec/b.fwEvents, v.vs, vsFirstNote(res.eventsPerSec, after, b.fwEvents, b.fwCeiling, b.seedCalls),
				res.redis.scripts, memPerEvent, 100*res.redis.core, 100*res.cores) + res.rest()
		})
	}
	return nil
}

// naive measures (c): the obvious consumer, one awaited script per rule.
func (b *bench) naive(ctx context.Context) error {
	n := min(b.o.naiveEvents, b.o.events)
	progress("(c) naive Go consumer over %d events", n)
	naive, err := naiveConsumer(ctx, b.brokers, b.rdb, "bench-naive-"+b.suffix, "c", []string{b.orders, b.refunds}, n)
	if err != nil {
		return err
	}
	b.tbl.add("c", fmt.Sprintf("naive Go consumer (one awaited script per rule, one commit per message), %s events", thousands(n)),
		fmt.Sprintf("%.0f events/s", naive), fmt.Sprintf("(b) is %.1f × this", b.fwEvents/naive))
	return nil
}

// node measures (d): the case study's stack, Node.js with kafkajs and
// ioredis, doing (c)'s Redis work.
func (b *bench) node(ctx context.Context) error {
	n := min(b.o.naiveEvents, b.o.events)
	progress("(d) Node.js consumer (kafkajs eachMessage, ioredis defineCommand) over %d events", n)
	rate, err := nodeConsumer(ctx, b.brokers, b.o.redis, "bench-node-"+b.suffix, "d", []string{b.orders, b.refunds}, n)
	if err != nil {
		return err
	}
	b.tbl.add("d", fmt.Sprintf("Node.js consumer, kafkajs eachMessage + ioredis defineCommand (one awaited script per rule, autoCommit), %s events", thousands(n)),
		fmt.Sprintf("%.0f events/s", rate), fmt.Sprintf("(b) is %.1f × this", b.fwEvents/rate))
	return nil
}

// streams measures (e): the same four rules as a Kafka Streams
// application, what a Kafka shop would write instead.
func (b *bench) streams(ctx context.Context) error {
	progress("(e) Kafka Streams application over %d events", b.o.events)
	rate, rss, err := kafkaStreams(ctx, b.brokers, []string{b.orders, b.refunds}, "bench-streams-"+b.suffix, b.o.events)
	if err != nil {
		return err
	}
	b.tbl.add("e", fmt.Sprintf("Kafka Streams 4.4.0 application (4 windowed aggregations, exactly_once_v2, 2 stream threads, -Xmx512m), %s events", thousands(b.o.events)),
		fmt.Sprintf("%.0f events/s", rate), fmt.Sprintf("(b) is %.1f × this; RSS %s (peak)", b.fwEvents/rate, mib(rss)))
	return nil
}

// longestCalls states the longest single call of each counting script over
// (b)'s runs on one Redis (and its windows rows'), beside the bound the
// design aims for: every other client of that Redis waits while it runs.
func (b *bench) longestCalls(context.Context) error {
	b.tbl.add("b", "longest single script call, by script, over (b)'s runs (SLOWLOG)", b.slow.String(),
		fmt.Sprintf("the design's Redis notes aim for under 1 ms a script; a call holds at most %d windows and %s", lua.MaxWindows, callChanges()))
	return nil
}

// callChanges says how many changes a call of each kind holds at most
// (lua.Kind.MaxChanges).
func callChanges() string {
	s := fmt.Sprintf("%d changes", lua.MaxChanges)
	for _, k := range lua.Kinds() {
		if k.MaxChanges() != lua.MaxChanges {
			s += fmt.Sprintf(", %d for %s", k.MaxChanges(), k)
		}
	}
	return s
}

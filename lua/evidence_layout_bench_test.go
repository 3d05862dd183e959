package lua

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// BenchmarkEvidenceLayouts writes a population shaped like (b)'s (its four
// fixed rules over 400,000 events of 40,000 customers, its refunds left
// out: layoutOrders) through each evidence layout's scripts on a private
// redis-server, each on a database of its own, taking turns batch by
// batch (runLayouts), in batches of 512 orders (a counting call a bucket,
// about 8 windows each, then an evidence call a bucket that keeps some),
// and reports for each: Redis's time a call
// (INFO commandstats), and memory (MEMORY USAGE of every key, by kind, and
// used_memory's growth) a window, beside the same windows as plain
// counters (a string with the window's TTL each, as bench's countersOnly
// writes them). Every reply and every window is checked: a design whose
// script errs or answers wrongly fails the benchmark. D2 runs on Redis >=
// 7.4 only. Each iteration runs every design once: run it 3 times for
// medians; -short runs a tenth of the population.
//
//	go test -run x -bench EvidenceLayouts -benchtime 3x ./lua
//	FRAUDWATCH_TEST_REDIS_SERVER=$(scripts/redis8.sh fetch)/redis-server go test -run x -bench EvidenceLayouts -benchtime 3x ./lua
func BenchmarkEvidenceLayouts(b *testing.B) {
	ctx := b.Context()
	events, customers := 400_000, 40_000
	if testing.Short() {
		events, customers = 40_000, 4_000
	}
	orders := layoutOrders(events, customers)
	designs, rdbs, skipped, err := layoutClients(b, redistest.Start(b).Addr)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range skipped {
		b.Log(s)
	}
	results := map[string][]*layoutResult{}
	var plain, plainUsed []float64
	for b.Loop() {
		bytes, used, n, err := layoutPlain(ctx, rdbs[0], orders)
		if err != nil {
			b.Fatal(err)
		}
		plain, plainUsed = append(plain, float64(bytes)/float64(n)), append(plainUsed, float64(used)/float64(n))
		rs, err := runLayouts(ctx, rdbs[1:], designs, orders)
		if err != nil {
			b.Fatal(err)
		}
		for i, d := range designs {
			results[d.name] = append(results[d.name], rs[i])
		}
	}
	b.Log(layoutProfile(orders))
	p := median(plain)
	b.Logf("plain counters: %.1f bytes a window (MEMORY USAGE), %.1f (used_memory)", p, median(plainUsed))
	var base float64
	for _, d := range designs {
		rs := results[d.name]
		of := func(f func(r *layoutResult) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			return median(v)
		}
		perWindow := func(kinds string) func(r *layoutResult) float64 {
			return func(r *layoutResult) float64 {
				sum := int64(0)
				for _, k := range kinds {
					sum += r.bytes[string(k)]
				}
				return float64(sum) / float64(r.windows)
			}
		}
		total := of(perWindow("fle"))
		if base == 0 {
			base = total
		}
		r := rs[0]
		b.Logf("%s: counting %.1f µs a call (%.1f changes); evidence %.1f µs a call (%.3f calls a counting call); "+
			"both %.1f µs a counting call; memory a window: counters %.1f, evidence %.1f, both %.1f (%.3f × plain; %.3f plain counters less than D0), "+
			"marks and offsets %.1f, used_memory %.1f",
			d.name, of(func(r *layoutResult) float64 { return r.countUsec / float64(r.countCalls) }),
			float64(r.changes)/float64(r.countCalls),
			of(func(r *layoutResult) float64 { return r.evidenceUsec / float64(r.evidenceCalls) }),
			float64(r.evidenceCalls)/float64(r.countCalls),
			of(func(r *layoutResult) float64 { return (r.countUsec + r.evidenceUsec) / float64(r.countCalls) }),
			of(perWindow("f")), of(perWindow("le")), total, total/p, (base-total)/p,
			of(perWindow("xo")), of(func(r *layoutResult) float64 { return float64(r.usedMemory) / float64(r.windows) }))
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// layoutPlain writes the population's windows as plain counters, each its
// final count with the window's TTL, named as bench's countersOnly names
// them, on an empty database, and returns their MEMORY USAGE, used_memory's
// growth and how many windows.
func layoutPlain(ctx context.Context, rdb *redis.Client, orders []layoutOrder) (int64, int64, int, error) {
	if err := rdb.Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("emptying Redis: %w", err)
	}
	keys, _ := NewKeys(layoutPrefix)
	values := map[string]int64{}
	for _, o := range orders {
		for ri, rule := range layoutRules {
			by := int64(1)
			if rule.amount {
				by = o.amount
			}
			values["plain:"+strings.TrimPrefix(keys.Counter(keys.Group([]string{o.groups[ri]}), rule.state), layoutPrefix+":")] += by
		}
	}
	before, err := layoutUsedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, 0, err
	}
	pipe := rdb.Pipeline()
	for k, v := range values {
		pipe.Set(ctx, k, strconv.FormatInt(v, 10), layoutLength)
		if pipe.Len() == 5000 {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, 0, 0, fmt.Errorf("writing plain counters: %w", err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, 0, fmt.Errorf("writing plain counters: %w", err)
	}
	after, err := layoutUsedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, 0, err
	}
	bytes, err := layoutMemory(ctx, rdb)
	if err != nil {
		return 0, 0, 0, err
	}
	total := int64(0)
	for _, v := range bytes {
		total += v
	}
	return total, after - before, len(values), nil
}

// layoutProfile says the population's shape, rule by rule: its windows,
// how many keep evidence, and the entries each of those gets, to set
// beside (b)'s (Performance, Evidence: where its memory goes).
func layoutProfile(orders []layoutOrder) string {
	type stat struct{ windows, keeping, entries int }
	stats := make([]stat, len(layoutRules))
	values := map[string]int64{}
	kept := map[string]bool{}
	for _, o := range orders {
		for ri, rule := range layoutRules {
			k := strconv.Itoa(ri) + o.groups[ri]
			by := int64(1)
			if rule.amount {
				by = o.amount
			}
			prev := values[k]
			if _, ok := values[k]; !ok {
				stats[ri].windows++
			}
			values[k] = prev + by
			if v := values[k]; prev < rule.threshold && v >= rule.from() {
				stats[ri].entries++
				if !kept[k] {
					kept[k] = true
					stats[ri].keeping++
				}
			}
		}
	}
	line := fmt.Sprintf("%d orders:", len(orders))
	for ri, s := range stats {
		line += fmt.Sprintf(" %s %d windows, %d keep evidence (%.2f entries each);", layoutRules[ri].state, s.windows, s.keeping,
			float64(s.entries)/float64(max(s.keeping, 1)))
	}
	return line
}

package lua

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// Evidence layouts side by side (issue 40, BenchmarkEvidenceLayouts):
// where a window's evidence lives, and what that costs Redis in memory and
// time. D1 is on the hot path: the shipped scripts, a fixed window's
// counter named as both of evidence_add's keys. D0, the layout before it,
// is the same scripts with an evidence key a window (as sliding and
// distinct windows still keep theirs): INCRBY is never refused there, and
// evidence_add takes its two-key path, so no copy of them is kept.
var (
	// evidenceAddField writes a window's evidence as a field of its
	// bucket's hash, with its window's TTL (D2, Redis >= 7.4).
	//
	//go:embed testdata/evidence_add_field.lua
	evidenceAddField string
)

// layoutDesign is one layout: the scripts that write it, the evidence
// call's keys it takes, and how its windows are read back.
type layoutDesign struct {
	name            string
	count, evidence *redis.Script
	// keys turns evidence_add's keys (evidence, window pairs) into the
	// design's, for a call of bucket tag.
	keys func(tag string, pairs []string) []string
	// fieldTTL is set when the design needs hash fields' TTLs (7.4).
	fieldTTL bool
	// read answers pipelined commands that give a window's count, its
	// evidence as stored (entries, each after RS) and the evidence's TTL
	// (ms), once pipe ran.
	read func(ctx context.Context, pipe redis.Pipeliner, w *layoutWindow) func() (string, string, int64)
}

// layoutDesigns are the layout before (D0), the shipped one (D1) and D2,
// the last two without a key of its own for a fixed window's evidence.
var layoutDesigns = []layoutDesign{
	{name: "D0 evidence key (before)", count: incrAndCheck, evidence: evidenceAdd,
		keys: func(_ string, pairs []string) []string { return pairs },
		read: func(ctx context.Context, pipe redis.Pipeliner, w *layoutWindow) func() (string, string, int64) {
			c, e, ttl := pipe.Get(ctx, w.counter), pipe.Get(ctx, w.evidence), pipe.PTTL(ctx, w.evidence)
			return func() (string, string, int64) { return c.Val(), e.Val(), ttl.Val().Milliseconds() }
		}},
	{name: "D1 in the counter (shipped)", count: incrAndCheck, evidence: evidenceAdd,
		keys: func(_ string, pairs []string) []string { return inCounter(pairs) },
		read: func(ctx context.Context, pipe redis.Pipeliner, w *layoutWindow) func() (string, string, int64) {
			c, ttl := pipe.Get(ctx, w.counter), pipe.PTTL(ctx, w.counter)
			return func() (string, string, int64) {
				count, entries, _ := strings.Cut(c.Val(), EvidenceSep)
				if entries != "" {
					entries = EvidenceSep + entries
				}
				return count, entries, ttl.Val().Milliseconds()
			}
		}},
	{name: "D2 a field a window", count: incrAndCheck, evidence: redis.NewScript(prelude + evidenceAddField), fieldTTL: true,
		keys: func(tag string, pairs []string) []string { return windowsOf([]string{layoutBucketHash(tag)}, pairs) },
		read: func(ctx context.Context, pipe redis.Pipeliner, w *layoutWindow) func() (string, string, int64) {
			hash, field := layoutBucketHash(w.group.Tag()), w.counter[strings.Index(w.counter, "}")+4:]
			c, e := pipe.Get(ctx, w.counter), pipe.HGet(ctx, hash, field)
			ttl := pipe.Do(ctx, "HPTTL", hash, "FIELDS", 1, field)
			return func() (string, string, int64) {
				t, _ := ttl.Int64Slice()
				return c.Val(), e.Val(), append(t, 0)[0]
			}
		}},
}

// inCounter is evidence_add's (evidence, window) key pairs with each
// window named as its own evidence, as rules names a fixed window's.
func inCounter(pairs []string) []string {
	out := make([]string, len(pairs))
	for i := 1; i < len(pairs); i += 2 {
		out[i-1], out[i] = pairs[i], pairs[i]
	}
	return out
}

// windowsOf appends the windows of evidence_add's (evidence, window) key
// pairs to dst.
func windowsOf(dst, pairs []string) []string {
	for i := 1; i < len(pairs); i += 2 {
		dst = append(dst, pairs[i])
	}
	return dst
}

// layoutBucketHash is D2's hash of a bucket's evidence.
func layoutBucketHash(tag string) string { return layoutPrefix + ":" + tag + ":e" }

const (
	layoutPrefix = "fw"
	layoutKeep   = 10 // rules.DefaultEvidence
	layoutLength = 10 * time.Minute
	layoutBatch  = 512 // orders a batch: about 8 windows a bucket's call, of 256 buckets
)

// layoutRule is one of (b)'s four fixed rules (bench/workload.go's
// rulesYAML), its state name as rules.Rule.State makes it.
type layoutRule struct {
	state     string
	amount    bool
	threshold int64
}

var layoutRules = []layoutRule{
	{"orders-per-customer.5c0e19aa", false, 20},
	{"amount-per-customer.0b8d41f2", true, 2_000_000},
	{"orders-per-card.9a3e77c1", false, 35},
	{"orders-per-ip.41d2c5e8", false, 12},
}

// from is the value from which a window keeps evidence
// (rules.Rule.evidenceFrom).
func (r layoutRule) from() int64 {
	if r.amount {
		return (r.threshold + 1) / 2
	}
	return r.threshold - layoutKeep + 1
}

// layoutOrder is an order of (b)'s workload: its group of each rule.
type layoutOrder struct {
	at     int
	groups [4]string
	amount int64
}

// layoutOrders are the orders of (b)'s workload of events over customers,
// as bench/workload.go's generate makes them (the same draws in the same
// order). Its refunds (5 %) are left out: they only lower amount windows
// (sales_decr), and keep no evidence.
func layoutOrders(events, customers int) []layoutOrder {
	const seed = 1
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	last := make(map[int]int64, customers)
	var out []layoutOrder
	for i := range events {
		c := rng.IntN(customers)
		customer := "cust-" + strconv.Itoa(c)
		card := "card-" + strconv.Itoa(c/2*2+rng.IntN(2))
		ip := "10." + strconv.Itoa(c%250) + "." + strconv.Itoa(c/250%250) + "." + strconv.Itoa(rng.IntN(4))
		if a, ok := last[c]; ok && rng.Float64() < 0.05 {
			_ = 1 + rng.Int64N(a) // a refund's amount
			continue
		}
		amount := 1_000 + rng.Int64N(200_000)
		last[c] = amount
		out = append(out, layoutOrder{i, [4]string{customer, customer, card, ip}, amount})
	}
	return out
}

// layoutWindow is a (rule, group) window as the bench expects it to be.
type layoutWindow struct {
	rule                     int
	group                    Group
	counter, marks, evidence string
	value                    int64
	entries                  []string
}

// layoutEntry is an order's evidence entry, as rules' encodeEvidence
// writes it (time, amount and value in base 36, event and order ids).
func layoutEntry(o layoutOrder, value int64) string {
	ms := int64(1_796_000_000_000) + int64(o.at)*10
	return strconv.FormatInt(ms, 36) + "\x1f" + strconv.FormatInt(o.amount, 36) + "\x1f" + strconv.FormatInt(value, 36) +
		"\x1fev-" + strconv.Itoa(o.at) + "\x1ford-" + strconv.Itoa(o.at) + "\x1f"
}

// layoutID is an event's id as the consumer packs it.
func layoutID(at int) (id EventID) {
	binary.LittleEndian.PutUint64(id[:], uint64(at))
	return id
}

// newest joins the last keep of entries as evidence_add answers a crossing.
func newestEntries(entries []string, keep int) string {
	return EvidenceSep + strings.Join(entries[max(len(entries)-keep, 0):], EvidenceSep)
}

// TestEvidenceLayoutsAgree writes a small (b)-shaped population through
// each layout's scripts: every count, crossing and listed crossing must be
// the one expected, and every window must read back its count and newest
// entries. D2 runs only on Redis >= 7.4.
func TestEvidenceLayoutsAgree(t *testing.T) {
	addr := redistest.Start(t).Addr
	ctx := t.Context()
	designs, rdbs, skipped, err := layoutClients(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skipped {
		t.Log(s)
	}
	results, err := runLayouts(ctx, rdbs[1:], designs, layoutOrders(8_000, 800))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.evidenceWindows == 0 || r.crossings == 0 {
			t.Fatalf("%s: no evidence kept (%d windows) or no crossing (%d): the population is not (b)'s", designs[i].name, r.evidenceWindows, r.crossings)
		}
	}
}

// layoutClients returns the designs the server at addr runs, and clients
// of it: database 0 for plain counters, then one a design. skipped says
// which designs it does not run, and why.
func layoutClients(t testing.TB, addr string) ([]layoutDesign, []*redis.Client, []string, error) {
	rdbs := []*redis.Client{redistest.Connect(t, addr)}
	var designs []layoutDesign
	var skipped []string
	for _, d := range layoutDesigns {
		ok, v, err := layoutSupports(t.Context(), rdbs[0], d)
		if err != nil {
			return nil, nil, nil, err
		}
		if !ok {
			skipped = append(skipped, fmt.Sprintf("%s: not run, Redis %s has no hash field TTLs (7.4)", d.name, v))
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr, DB: len(rdbs), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		designs, rdbs = append(designs, d), append(rdbs, rdb)
	}
	return designs, rdbs, skipped, nil
}

// layoutSupports reports whether rdb's server runs design d, and its
// version.
func layoutSupports(ctx context.Context, rdb *redis.Client, d layoutDesign) (bool, string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return false, "", fmt.Errorf("reading the server's version: %w", err)
	}
	v := ""
	for line := range strings.Lines(info) {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			v = s
		}
	}
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return false, v, fmt.Errorf("reading version %q: %w", v, err)
	}
	return !d.fieldTTL || major > 7 || major == 7 && minor >= 4, v, nil
}

package lua

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// layoutResult is what one design's run of a population took.
type layoutResult struct {
	windows, evidenceWindows, crossings int
	entries                             int // entries written, in all
	countCalls, evidenceCalls, changes  int
	countUsec, evidenceUsec             float64          // EVALSHA's, INFO commandstats
	bytes                               map[string]int64 // MEMORY USAGE by kind (layoutKind)
	usedMemory                          int64            // used_memory's growth over the run
}

// layoutCall is a batch's calls to one bucket: its counting call and its
// evidence call, with what each should answer.
type layoutCall struct {
	tag      string
	offsets  string
	windows  []Window
	index    map[*layoutWindow]int
	changes  []Change
	expect   []int64 // per change: value, then 1 for a crossing else 0
	evidence *Evidence
	evIndex  map[*layoutWindow]int
	lists    []string // per crossing, in order: the list it answers
}

// runLayouts writes orders through each design's scripts, design i on
// database rdbs[i] of one redis-server, emptied first, in batches of
// layoutBatch orders, each a call a bucket (and an evidence call a bucket
// that keeps some). The designs take turns batch by batch, each batch's
// first design in rotation, so that the load other work puts on the
// machine falls on all of them alike. It checks every reply and every
// window the designs leave, and measures the Redis time (EVALSHA's, INFO
// commandstats) and used_memory each design's batches took, and each
// database's MEMORY USAGE at the end.
func runLayouts(ctx context.Context, rdbs []*redis.Client, designs []layoutDesign, orders []layoutOrder) ([]*layoutResult, error) {
	if err := rdbs[0].Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
		return nil, fmt.Errorf("emptying Redis: %w", err)
	}
	keys, _ := NewKeys(layoutPrefix)
	results := make([]*layoutResult, len(designs))
	windows := make([]map[string]*layoutWindow, len(designs))
	for i, d := range designs {
		for _, s := range []*redis.Script{d.count, d.evidence} {
			if err := s.Load(ctx, rdbs[i]).Err(); err != nil {
				return nil, fmt.Errorf("%s: loading a script: %w", d.name, err)
			}
		}
		results[i], windows[i] = &layoutResult{}, map[string]*layoutWindow{}
	}
	turn := 0
	for batch := range slices.Chunk(orders, layoutBatch) {
		for k := range designs {
			i := (turn + k) % len(designs)
			d, r := designs[i], results[i]
			before, err := layoutUsedMemory(ctx, rdbs[i])
			if err != nil {
				return nil, err
			}
			count, evidence, err := runLayoutBatch(ctx, rdbs[i], d, layoutBatchCalls(keys, windows[i], batch, r), r)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.name, err)
			}
			after, err := layoutUsedMemory(ctx, rdbs[i])
			if err != nil {
				return nil, err
			}
			r.countUsec, r.evidenceUsec, r.usedMemory = r.countUsec+count, r.evidenceUsec+evidence, r.usedMemory+after-before
		}
		turn++
	}
	for i, d := range designs {
		r, err := results[i], error(nil)
		if r.bytes, err = layoutMemory(ctx, rdbs[i]); err != nil {
			return nil, err
		}
		r.windows = len(windows[i])
		for _, w := range windows[i] {
			if len(w.entries) > 0 {
				r.evidenceWindows++
			}
		}
		if err := layoutCheckWindows(ctx, rdbs[i], d, windows[i]); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// layoutBatchCalls makes a batch's calls: each order counts into its
// window of each rule; a window near its threshold, or crossing it, gets
// the order's entry (rules' evidence.add).
func layoutBatchCalls(keys Keys, windows map[string]*layoutWindow, batch []layoutOrder, r *layoutResult) []*layoutCall {
	var calls []*layoutCall
	byTag := map[string]*layoutCall{}
	for _, o := range batch {
		for ri, rule := range layoutRules {
			w := windows[strconv.Itoa(ri)+o.groups[ri]]
			if w == nil {
				g := keys.Group([]string{o.groups[ri]})
				w = &layoutWindow{rule: ri, group: g, counter: keys.Counter(g, rule.state),
					marks: keys.Marks(g, rule.state), evidence: keys.Evidence(g, rule.state)}
				windows[strconv.Itoa(ri)+o.groups[ri]] = w
			}
			c := byTag[w.group.Tag()]
			if c == nil {
				c = &layoutCall{tag: w.group.Tag(), offsets: keys.Offsets(w.group), index: map[*layoutWindow]int{},
					evidence: &Evidence{}, evIndex: map[*layoutWindow]int{}}
				byTag[c.tag] = c
				calls = append(calls, c)
			}
			i, ok := c.index[w]
			if !ok {
				i = len(c.windows)
				c.index[w] = i
				c.windows = append(c.windows, Window{Key: w.counter, Marks: w.marks, Length: layoutLength, Threshold: rule.threshold})
			}
			by := int64(1)
			if rule.amount {
				by = o.amount
			}
			prev := w.value
			w.value += by
			crossed := prev < rule.threshold && rule.threshold <= w.value
			c.changes = append(c.changes, Change{Window: i, Offset: int64(o.at), ID: layoutID(o.at), Amount: by})
			c.expect = append(c.expect, w.value, map[bool]int64{false: 0, true: 1}[crossed])
			r.changes++
			if crossed || w.value >= rule.from() && w.value < rule.threshold {
				layoutAddEntry(c, w, layoutEntry(o, w.value), crossed)
				r.entries++
				if crossed {
					r.crossings++
				}
			}
		}
	}
	return calls
}

// layoutAddEntry adds an entry of window w to c's evidence call.
func layoutAddEntry(c *layoutCall, w *layoutWindow, text string, crossed bool) {
	e := c.evidence
	i, ok := c.evIndex[w]
	if !ok {
		i = len(e.Windows)
		c.evIndex[w] = i
		e.Windows = append(e.Windows, EvidenceWindow{Key: w.evidence, Window: w.counter, Keep: layoutKeep, TTL: layoutLength})
	}
	e.Entries = append(e.Entries, EvidenceEntry{Window: i, Text: text, List: crossed})
	w.entries = append(w.entries, text)
	if crossed {
		c.lists = append(c.lists, newestEntries(w.entries, layoutKeep))
	}
}

// runLayoutBatch sends a batch's counting calls, then its evidence calls,
// each pipelined, checks their replies, and returns the Redis µs each took.
func runLayoutBatch(ctx context.Context, rdb *redis.Client, d layoutDesign, calls []*layoutCall, r *layoutResult) (float64, float64, error) {
	start, err := layoutEvalsha(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	pipe := rdb.Pipeline()
	counted := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		packed, err := packCount(nil, layoutLength, c.windows, c.changes)
		if err != nil {
			return 0, 0, err
		}
		keys := []string{c.offsets}
		for _, w := range c.windows {
			keys = append(keys, w.Key, w.Marks)
		}
		counted[i] = d.count.EvalSha(ctx, pipe, keys, "p0", string(packed))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, fmt.Errorf("counting: %w", err)
	}
	mid, err := layoutEvalsha(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	for i, c := range calls {
		got, err := counted[i].Int64Slice()
		if err != nil || !slices.Equal(got, c.expect) {
			return 0, 0, fmt.Errorf("a counting call answered %v (%v), not %v", got, err, c.expect)
		}
	}
	r.countCalls += len(calls)
	pipe = rdb.Pipeline()
	var sent []*layoutCall
	var added []*redis.Cmd
	for _, c := range calls {
		if len(c.evidence.Entries) == 0 {
			continue
		}
		pairs, args, err := packEvidence(c.evidence)
		if err != nil {
			return 0, 0, err
		}
		sent, added = append(sent, c), append(added, d.evidence.EvalSha(ctx, pipe, d.keys(c.tag, pairs), args...))
	}
	if len(sent) == 0 {
		return mid - start, 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return 0, 0, fmt.Errorf("adding evidence: %w", err)
	}
	end, err := layoutEvalsha(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	for i, c := range sent {
		got, err := added[i].StringSlice()
		if err != nil || !slices.Equal(got, c.lists) {
			return 0, 0, fmt.Errorf("an evidence call answered %q (%v), not %q", got, err, c.lists)
		}
	}
	r.evidenceCalls += len(sent)
	return mid - start, end - mid, nil
}

// layoutCheckWindows reads every window back as d stores it: its count,
// its evidence ending in its newest layoutKeep entries (the lazy trim may
// keep older ones before them), living no longer than its window.
func layoutCheckWindows(ctx context.Context, rdb *redis.Client, d layoutDesign, windows map[string]*layoutWindow) error {
	all := make([]*layoutWindow, 0, len(windows))
	for _, w := range windows {
		all = append(all, w)
	}
	for chunk := range slices.Chunk(all, 5000) {
		pipe := rdb.Pipeline()
		reads := make([]func() (string, string, int64), len(chunk))
		lives := make([]*redis.DurationCmd, len(chunk))
		for i, w := range chunk {
			reads[i], lives[i] = d.read(ctx, pipe, w), pipe.PTTL(ctx, w.counter)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return fmt.Errorf("%s: reading windows back: %w", d.name, err)
		}
		for i, w := range chunk {
			count, entries, ttl := reads[i]()
			want := ""
			if len(w.entries) > 0 {
				want = newestEntries(w.entries, layoutKeep)
			}
			if count != strconv.FormatInt(w.value, 10) || !strings.HasSuffix(entries, want) || (want == "") != (entries == "") {
				return fmt.Errorf("%s: window %s reads %s and %q, not %d and %q", d.name, w.counter, count, entries, w.value, want)
			}
			// The evidence ends with its window (never extended): within a
			// second, for a TTL copied (PTTL, then SET PX) is counted from
			// a later clock than it was read on (12 ms seen under load).
			if life := lives[i].Val().Milliseconds(); want != "" && (ttl <= 0 || ttl > life+1000) {
				return fmt.Errorf("%s: window %s's evidence lives %d ms, its window %d", d.name, w.counter, ttl, life)
			}
		}
	}
	return nil
}

// layoutKind is the kind of a key of the bench's: f a counter, l a
// window's evidence (D0), e a bucket's evidence (D2), x marks, o offsets.
func layoutKind(key string) string {
	_, rest, ok := strings.Cut(key, "}:")
	if !ok || rest == "" {
		return "other"
	}
	return rest[:1]
}

// layoutMemory is MEMORY USAGE (every element: SAMPLES 0) summed by kind
// over every key of the database.
func layoutMemory(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	bytes := map[string]int64{}
	iter := rdb.Scan(ctx, 0, "*", 5000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	for chunk := range slices.Chunk(keys, 5000) {
		pipe := rdb.Pipeline()
		usage := make([]*redis.IntCmd, len(chunk))
		for i, k := range chunk {
			usage[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		for i, k := range chunk {
			bytes[layoutKind(k)] += usage[i].Val()
		}
	}
	return bytes, nil
}

// layoutUsedMemory is INFO memory's used_memory.
func layoutUsedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("reading used_memory: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// layoutEvalsha is EVALSHA's microseconds so far (INFO commandstats), 0
// before the first.
func layoutEvalsha(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("reading commandstats: %w", err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for field := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(field, "usec="); ok {
					return strconv.ParseFloat(v, 64)
				}
			}
		}
	}
	return 0, nil
}

// Package seedbench holds the seed-style script, the yardstick
// docs/performance.md compares fraudwatch's scripts with, and runs it side
// by side with fraudwatch's incr_and_check under one load, each on a Redis
// of its own, reading what each cost Redis per window change from Redis's
// own commandstats. The lua micro-benchmark (go test -run x -bench Seed ./lua)
// and make bench's side-by-side rows both run it, so that the same load
// measures incr_and_check before and after a change to it.
package seedbench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

//go:embed seed_incr.lua
var seedSrc string

// Script returns the seed-style script's source: GET, INCRBY and
// TTL/EXPIRE on one key, one window change a call, no idempotency.
func Script() string { return seedSrc }

// The load, as the issue that asked for it measured (issue 26): pipelines
// of 64 calls, a run of events from one of 16 partitions a call, at
// increasing offsets, into windows that never cross. A group's events all
// come from one partition, as a topic keyed by customer delivers them.
const (
	pipeline   = 64
	partitions = 16
	amount     = 1
	length     = 10 * time.Minute
	threshold  = 1_000_000
)

// Config sets the load. Zero values take the defaults.
type Config struct {
	// Windows is how many windows each incr_and_check call changes, one
	// event each (1 to lua.MaxWindows); the seed-style script changes one
	// a call, so it gets that many calls for each of incr_and_check's.
	// Default 8.
	Windows int
	// Groups is how many groups the windows belong to, spread over
	// lua.Buckets buckets by lua.Keys as fraudwatch spreads them, and over
	// the partitions; a call changes windows of one bucket and partition.
	// Default 100,000.
	Groups int
	// Bound runs the bound (bound.go) on the own server in
	// incr_and_check's place: the commands alone, nothing checked.
	Bound bool
}

func (c Config) withDefaults() Config {
	if c.Windows == 0 {
		c.Windows = 8
	}
	if c.Groups == 0 {
		c.Groups = 100_000
	}
	return c
}

// Validate reports whether the load can be run.
func (c Config) Validate() error {
	if c.Windows < 1 || c.Windows > lua.MaxWindows {
		return fmt.Errorf("seedbench: %d windows a call: must be 1 to %d", c.Windows, lua.MaxWindows)
	}
	// Every bucket's partition needs a call's worth of groups: twice that
	// on average leaves room for the hash's unevenness.
	if least := 2 * c.Windows * lua.Buckets * partitions; c.Groups < least || c.Groups > 10_000_000 {
		return fmt.Errorf("seedbench: %d groups: must be %d to 10,000,000 for %d windows a call",
			c.Groups, least, c.Windows)
	}
	return nil
}

// Pair sends the same window changes to the seed-style script on one
// Redis and to incr_and_check on another. It is not safe for concurrent
// use.
type Pair struct {
	cfg       Config
	seed, own *redis.Client
	script    *redis.Script
	scripts   *lua.Scripts
	bound     *redis.Script // Config.Bound's
	cells     [][]window    // each partition's groups' windows in each bucket
	cursor    []int         // each cell's next group
	sources   [partitions]string
	offsets   [partitions]int64
	calls     int     // incr_and_check calls planned
	events    int64   // window changes planned, each an event of its own
	since     [2]cost // commandstats when the measurement began: seed's, own's
	changes   int64   // window changes each script made since
}

type window struct{ key, marks, offsets string }

// New loads both scripts, counts once into every group's window on both
// servers, so that the measurement finds every window running, and starts
// the measurement. seed and own must be two servers no one else sends
// scripts to: their commandstats are the measurement.
func New(ctx context.Context, cfg Config, seed, own *redis.Client) (*Pair, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	scripts, err := lua.New(lua.Config{}, own, nil)
	if err != nil {
		return nil, fmt.Errorf("seedbench: %w", err)
	}
	p := &Pair{cfg: cfg, seed: seed, own: own, script: redis.NewScript(seedSrc), scripts: scripts}
	if err := p.script.Load(ctx, seed).Err(); err != nil {
		return nil, fmt.Errorf("seedbench: load the seed-style script: %w", err)
	}
	if err := scripts.Load(ctx); err != nil {
		return nil, fmt.Errorf("seedbench: %w", err)
	}
	if cfg.Bound {
		p.bound = redis.NewScript(boundSrc)
		if err := p.bound.Load(ctx, own).Err(); err != nil {
			return nil, fmt.Errorf("seedbench: load the bound: %w", err)
		}
	}
	if err := p.layOut(); err != nil {
		return nil, err
	}
	most := 0
	for _, c := range p.cells {
		most = max(most, len(c))
	}
	calls := len(p.cells) * ((most + cfg.Windows - 1) / cfg.Windows)
	for range (calls + pipeline - 1) / pipeline {
		if err := p.Step(ctx); err != nil {
			return nil, err
		}
	}
	if p.since, err = p.costs(ctx); err != nil {
		return nil, err
	}
	p.changes = 0
	return p, nil
}

// layOut spreads the groups over the buckets as fraudwatch's keys do, and
// over the partitions in turn within a bucket: a cell of the bucket and the
// partition holds its groups' windows, bucket after bucket for partition 0,
// then for partition 1, and so on.
func (p *Pair) layOut() error {
	for i := range p.sources {
		p.sources[i] = lua.Source("orders", i)
	}
	keys, err := lua.NewKeys("sb")
	if err != nil {
		return fmt.Errorf("seedbench: %w", err)
	}
	const rule = "orders-per-customer.bench"
	index := map[string]int{} // bucket's tag -> its number
	var buckets [][]window
	for g := range p.cfg.Groups {
		group := keys.Group([]string{"customer-" + strconv.Itoa(g)})
		i, ok := index[group.Tag()]
		if !ok {
			i = len(buckets)
			index[group.Tag()] = i
			buckets = append(buckets, nil)
		}
		buckets[i] = append(buckets[i], window{keys.Counter(group, rule), keys.Marks(group, rule), keys.Offsets(group)})
	}
	p.cells = make([][]window, partitions*len(buckets))
	for b, windows := range buckets {
		for j, w := range windows {
			cell := (j%partitions)*len(buckets) + b
			p.cells[cell] = append(p.cells[cell], w)
		}
	}
	for _, c := range p.cells {
		if len(c) < p.cfg.Windows {
			return fmt.Errorf("seedbench: a bucket's partition holds %d groups, fewer than a call's %d windows", len(c), p.cfg.Windows)
		}
	}
	p.cursor = make([]int, len(p.cells))
	return nil
}

// Step sends a pipeline of 64 incr_and_check calls to its server, and the
// same window changes to the seed-style script on the other in pipelines
// of 64 calls, one after the other, so that neither waits for a core the
// other holds. Both must answer every change with the same counter: a
// script that skipped or repeated a change would not be measured at the
// same work.
func (p *Pair) Step(ctx context.Context) error {
	calls := p.plan()
	own, err := p.runOwn(ctx, calls)
	if err != nil {
		return err
	}
	seed, err := p.runSeed(ctx, calls)
	if err != nil {
		return err
	}
	if len(own) != len(seed) {
		return fmt.Errorf("seedbench: %d changes counted against the seed-style script's %d: %w", len(own), len(seed), lua.ErrUnexpectedReply)
	}
	for n := range own {
		if own[n] != seed[n] {
			return fmt.Errorf("seedbench: a window change counted %d by incr_and_check (or the bound) and %d by the seed-style script: they did not do the same work",
				own[n], seed[n])
		}
	}
	p.changes += int64(len(own))
	return nil
}

// plan lays out the next pipeline of incr_and_check calls: a call takes
// the next cell, in turn, and the next of its groups; a pipeline's calls
// are of one partition, as a partition's batch sends them.
func (p *Pair) plan() []*lua.Call {
	calls := make([]*lua.Call, pipeline)
	for n := range calls {
		cell := p.calls % len(p.cells)
		part := cell * partitions / len(p.cells)
		p.calls++
		c := &lua.Call{Kind: lua.Count, Source: p.sources[part], Offsets: p.cells[cell][0].offsets} // a cell is of one bucket
		for w := range p.cfg.Windows {
			win := p.cells[cell][p.cursor[cell]]
			p.cursor[cell] = (p.cursor[cell] + 1) % len(p.cells[cell])
			p.events++
			c.Windows = append(c.Windows, lua.Window{Key: win.key, Marks: win.marks, Length: length, Threshold: threshold})
			c.Changes = append(c.Changes, lua.Change{Window: w, Offset: p.offsets[part],
				ID: lua.IDOf(strconv.FormatInt(p.events, 10)), Amount: amount})
			p.offsets[part]++
		}
		calls[n] = c
	}
	return calls
}

// runSeed sends calls' window changes to the seed-style script, one call
// each, and returns the counters it answered, in order.
func (p *Pair) runSeed(ctx context.Context, calls []*lua.Call) ([]int64, error) {
	var cmds []*redis.Cmd
	pipe := p.seed.Pipeline()
	flush := func() error {
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("seedbench: seed-style script: %w", err)
		}
		return nil
	}
	for _, c := range calls {
		for _, w := range c.Windows {
			cmds = append(cmds, p.script.EvalSha(ctx, pipe, []string{w.Key}, amount, int64(length/time.Second), threshold))
			if pipe.Len() == pipeline {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if pipe.Len() > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	current := make([]int64, len(cmds))
	for i, cmd := range cmds {
		reply, err := cmd.Int64Slice()
		if err != nil || len(reply) != 2 {
			return nil, fmt.Errorf("seedbench: seed-style script answered %v: %w", reply, errors.Join(err, lua.ErrUnexpectedReply))
		}
		current[i] = reply[0]
	}
	return current, nil
}

// cost is what Redis counted of its scripts so far: calls, and the
// microseconds spent in them, the commands they ran included.
type cost struct{ calls, usec float64 }

// costs reads both servers' script costs: the seed-style script's, then
// incr_and_check's.
func (p *Pair) costs(ctx context.Context) ([2]cost, error) {
	var out [2]cost
	for i, rdb := range []*redis.Client{p.seed, p.own} {
		info, err := rdb.InfoMap(ctx, "commandstats").Result()
		if err != nil {
			return out, fmt.Errorf("seedbench: redis info commandstats: %w", err)
		}
		for _, name := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
			c, err := ParseStat(info["Commandstats"][name])
			if err != nil {
				return out, fmt.Errorf("seedbench: %s: %w", name, err)
			}
			out[i].calls += c.Calls
			out[i].usec += c.Usec
		}
	}
	return out, nil
}

// Stat is one command's calls, and the microseconds Redis spent in them.
type Stat struct{ Calls, Usec float64 }

// ParseStat reads "calls=3,usec=42,usec_per_call=14.00,...", a command's
// line of INFO commandstats (what follows "cmdstat_NAME:"); an empty line
// is a command never called. The bench's profile reads its lines with it
// too: one parser of commandstats.
func ParseStat(line string) (Stat, error) {
	var c Stat
	if line == "" {
		return c, nil
	}
	for kv := range strings.SplitSeq(line, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "calls" && k != "usec" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return c, fmt.Errorf("unexpected %s %q: %w", k, v, err)
		}
		if k == "calls" {
			c.Calls = f
		} else {
			c.Usec = f
		}
	}
	return c, nil
}

// Result is what each script cost Redis since the measurement began.
type Result struct {
	// Changes is how many window changes each script made.
	Changes int64
	// Windows is how many of them an incr_and_check call made.
	Windows int
	// SeedUsec and OwnUsec are the microseconds Redis spent in the
	// seed-style script and in incr_and_check (EVALSHA's, the commands
	// they ran included).
	SeedUsec, OwnUsec float64
}

// Seed is the seed-style script's µs per window change, which is its µs
// per call.
func (r Result) Seed() float64 { return r.SeedUsec / float64(r.Changes) }

// Own is incr_and_check's µs per window change.
func (r Result) Own() float64 { return r.OwnUsec / float64(r.Changes) }

// Ratio is incr_and_check's µs per window change over the seed-style
// script's.
func (r Result) Ratio() float64 { return r.Own() / r.Seed() }

// Result reads what each script cost since New. It fails when a server
// counted other script calls than this Pair's: someone else's would be
// measured too.
func (p *Pair) Result(ctx context.Context) (Result, error) {
	now, err := p.costs(ctx)
	if err != nil {
		return Result{}, err
	}
	if p.changes == 0 {
		return Result{}, errors.New("seedbench: nothing measured yet")
	}
	seed, own := now[0].calls-p.since[0].calls, now[1].calls-p.since[1].calls
	wantOwn := float64(p.changes / int64(p.cfg.Windows))
	if seed != float64(p.changes) || own != wantOwn {
		return Result{}, fmt.Errorf("seedbench: Redis counted %.0f and %.0f script calls where %d and %.0f were sent: another client runs scripts there",
			seed, own, p.changes, wantOwn)
	}
	return Result{Changes: p.changes, Windows: p.cfg.Windows,
		SeedUsec: now[0].usec - p.since[0].usec, OwnUsec: now[1].usec - p.since[1].usec}, nil
}

package seedbench

import (
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// small is a load of few groups, so that New's pass over all of them is
// quick.
var small = Config{Windows: 2, Groups: 2 * 2 * lua.Buckets * partitions}

func start(t *testing.T, cfg Config) *Pair {
	t.Helper()
	seed := redistest.Connect(t, redistest.Start(t).Addr)
	own := redistest.Connect(t, redistest.Start(t).Addr)
	p, err := New(t.Context(), cfg, seed, own)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// New counts into every group's window once before the measurement, and
// Result counts only what Steps sent after it, per window change; with
// Bound, the bound runs in incr_and_check's place, which gives no window
// its TTL.
func TestPairMeasuresTheSameChanges(t *testing.T) {
	for _, bound := range []bool{false, true} {
		t.Run(map[bool]string{false: "incr_and_check", true: "bound"}[bound], func(t *testing.T) {
			cfg := small
			cfg.Bound = bound
			measuresTheSameChanges(t, cfg)
		})
	}
}

func measuresTheSameChanges(t *testing.T, small Config) {
	p := start(t, small)
	window := p.cells[0][0].key
	if ttl, err := p.own.TTL(t.Context(), window).Result(); err != nil || (ttl > 0) == small.Bound {
		t.Errorf("a window's TTL on the own server is %v (%v): the bound ran %v, want %v", ttl, err, ttl <= 0, small.Bound)
	}
	keys, err := p.seed.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if keys != int64(small.Groups) {
		t.Errorf("the seed-style server holds %d windows after New, want one per group, %d", keys, small.Groups)
	}
	const steps = 5
	for range steps {
		if err := p.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	r, err := p.Result(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(steps * pipeline * small.Windows); r.Changes != want || r.Windows != small.Windows {
		t.Errorf("Result counted %d changes of %d windows a call, want %d of %d", r.Changes, r.Windows, want, small.Windows)
	}
	if !(r.Seed() > 0 && r.Own() > 0 && r.Ratio() == r.Own()/r.Seed()) {
		t.Errorf("Result: seed-style %v µs, incr_and_check %v µs a change, ratio %v", r.Seed(), r.Own(), r.Ratio())
	}
	// New's pass made more changes than the steps: its time is not theirs.
	total, err := p.costs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.SeedUsec >= total[0].usec || r.OwnUsec >= total[1].usec {
		t.Errorf("Result counted %v and %v µs, of %v and %v in all: New's pass counted too",
			r.SeedUsec, r.OwnUsec, total[0].usec, total[1].usec)
	}
}

// A script that does not count what the other counts is not measured at
// the same work: Step says so.
func TestStepRefusesDifferentWork(t *testing.T) {
	p := start(t, small)
	if err := p.seed.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	err := p.Step(t.Context())
	if err == nil || !strings.Contains(err.Error(), "did not do the same work") {
		t.Fatalf("Step after the seed-style server lost its windows = %v, want different counters reported", err)
	}
}

// Another client's scripts on a server would be measured as the Pair's:
// Result refuses to answer.
func TestResultRefusesOthersScripts(t *testing.T) {
	for _, server := range []string{"seed", "own"} {
		t.Run(server, func(t *testing.T) {
			p := start(t, small)
			if err := p.Step(t.Context()); err != nil {
				t.Fatal(err)
			}
			rdb := p.seed
			if server == "own" {
				rdb = p.own
			}
			if err := rdb.Eval(t.Context(), "return 1", nil).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Result(t.Context()); err == nil || !strings.Contains(err.Error(), "another client") {
				t.Fatalf("Result after another script ran on the %s server = %v, want it refused", server, err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}.withDefaults(), true},
		{Config{Windows: 1, Groups: 2 * lua.Buckets * partitions}, true},
		{Config{Windows: lua.MaxWindows, Groups: 2 * lua.MaxWindows * lua.Buckets * partitions}, true},
		{Config{Windows: 0, Groups: 100_000}, false},
		{Config{Windows: lua.MaxWindows + 1, Groups: 100_000}, false},
		{Config{Windows: 8, Groups: 2*8*lua.Buckets*partitions - 1}, false},
		{Config{Windows: 1, Groups: 10_000_001}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v.Validate() = %v, want ok %v", tc.cfg, err, tc.ok)
		}
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line        string
		calls, usec float64
		err         bool
	}{
		{"calls=3,usec=42,usec_per_call=14.00,rejected_calls=0,failed_calls=0", 3, 42, false},
		{"", 0, 0, false},
		{"calls=x,usec=42", 0, 0, true},
		{"calls=3,usec=", 0, 0, true},
	} {
		c, err := ParseStat(tc.line)
		if (err != nil) != tc.err || (!tc.err && (c.Calls != tc.calls || c.Usec != tc.usec)) {
			t.Errorf("ParseStat(%q) = %+v, %v; want %v calls, %v µs, error %v", tc.line, c, err, tc.calls, tc.usec, tc.err)
		}
	}
}

// A group's windows are always changed from one partition, a pipeline's
// calls are of one partition, each partition's offsets increase, a call's
// windows are of one bucket, and every bucket and partition gets calls.
func TestPlan(t *testing.T) {
	p := &Pair{cfg: small}
	if err := p.layOut(); err != nil {
		t.Fatal(err)
	}
	from := map[string]string{} // window -> the partition it was changed from
	last := map[string]int64{}  // partition -> its last offset
	buckets := map[string]bool{}
	for range 2 * partitions * lua.Buckets / pipeline {
		calls := p.plan()
		for _, c := range calls {
			if c.Source != calls[0].Source {
				t.Fatalf("a pipeline holds calls of partitions %s and %s", calls[0].Source, c.Source)
			}
			key := c.Windows[0].Key
			tag := key[strings.IndexByte(key, '{') : strings.IndexByte(key, '}')+1]
			buckets[tag] = true
			for i, w := range c.Windows {
				if !strings.Contains(w.Key, tag) || !strings.Contains(w.Marks, tag) || c.Changes[i].Window != i {
					t.Fatalf("a call's window %d (%s, %s) is not of its bucket %s", i, w.Key, w.Marks, tag)
				}
				if was, ok := from[w.Key]; ok && was != c.Source {
					t.Fatalf("window %s changed from partitions %s and %s", w.Key, was, c.Source)
				}
				from[w.Key] = c.Source
			}
			for _, ch := range c.Changes {
				if was, ok := last[c.Source]; ok && ch.Offset <= was {
					t.Fatalf("partition %s went from offset %d to %d", c.Source, was, ch.Offset)
				}
				last[c.Source] = ch.Offset
			}
		}
	}
	if len(buckets) != lua.Buckets || len(last) != partitions {
		t.Errorf("the calls went to %d buckets from %d partitions, want %d and %d", len(buckets), len(last), lua.Buckets, partitions)
	}
}

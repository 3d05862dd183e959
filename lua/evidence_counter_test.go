package lua

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// A fixed window keeps its evidence in its counter, after its count, when
// its key is named as both (evidence_add): its end never moves, a counter
// that is gone or not a count keeps none (no key is made, the value stays
// as it was), and a crossing still lists the call's own entries. The
// entries follow an evidence key's rules (trimmed past 2 × keep).
func TestEvidenceInItsCounter(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	for n, tt := range []struct {
		name  string
		value string        // the counter before ("": none)
		ttl   time.Duration // its TTL (0: none)
		keep  int
		calls [][]EvidenceEntry
		list  []string // the last call's list
		after string   // the counter after ("": none)
	}{
		{"kept after the count", "3", time.Minute, 5, [][]EvidenceEntry{entriesOf(0, 1, 2, 2)}, texts(0, 2, 1), "3\x1e0:1\x1e0:2"},
		{"added to across calls", "3", time.Minute, 5, [][]EvidenceEntry{entriesOf(0, 1, 2), entriesOf(0, 3, 3, 3)},
			texts(0, 3, 2, 1), "3\x1e0:1\x1e0:2\x1e0:3"},
		{"trimmed to keep past 2 × keep", "7", time.Minute, 2, [][]EvidenceEntry{entriesOf(0, 1, 3), entriesOf(0, 4, 5, 5)},
			texts(0, 5, 4), "7\x1e0:4\x1e0:5"},
		{"a counter without a TTL keeps it without one", "3", 0, 5, [][]EvidenceEntry{entriesOf(0, 1, 1)}, nil, "3\x1e0:1"},
		{"a window that ended keeps none", "", 0, 5, [][]EvidenceEntry{entriesOf(0, 1, 2, 2)}, texts(0, 2, 1), ""},
		{"a count of 16 digits is not ours", "1234567890123456", time.Minute, 5, [][]EvidenceEntry{entriesOf(0, 1, 1, 1)}, texts(0, 1),
			"1234567890123456"},
		{"a foreign value", "abc\x1ex", time.Minute, 5, [][]EvidenceEntry{entriesOf(0, 1, 1, 1)}, texts(0, 1), "abc\x1ex"},
		{"a leading zero", "01", time.Minute, 5, [][]EvidenceEntry{entriesOf(0, 1, 1, 1)}, texts(0, 1), "01"},
		{"entries not ours after the count are replaced when read", "4\x1e" + strings.Repeat("a", MaxEvidenceText+1), time.Minute, 5,
			[][]EvidenceEntry{entriesOf(0, 1, 1, 1)}, texts(0, 1), "4\x1e0:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("%s:{t}:f%d", prefix, n)
			if tt.value != "" {
				rdb.Set(ctx, key, tt.value, tt.ttl)
			}
			w := []EvidenceWindow{{Key: key, Window: key, Keep: tt.keep, TTL: time.Hour}}
			var last *Evidence
			for _, es := range tt.calls {
				last = &Evidence{Windows: w, Entries: es}
				if err := s.AddEvidence(ctx, []*Evidence{last}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.list != nil && (len(last.Lists) != 1 || !slices.Equal(last.Lists[0], tt.list)) {
				t.Errorf("lists %q, want [%q]", last.Lists, tt.list)
			}
			if got := rdb.Get(ctx, key).Val(); got != tt.after {
				t.Errorf("the counter holds %q, want %q", got, tt.after)
			}
			ttl := rdb.PTTL(ctx, key).Val()
			switch {
			case tt.after == "" && ttl != -2*time.Nanosecond && ttl != -2*time.Millisecond:
				t.Errorf("a window that ended has a key again, TTL %v", ttl)
			case tt.after != "" && tt.ttl == 0 && ttl >= 0:
				t.Errorf("a counter without a TTL got %v", ttl)
			case tt.after != "" && tt.ttl > 0 && (ttl <= 0 || ttl > tt.ttl):
				t.Errorf("the counter lives %v, want its own %v or less", ttl, tt.ttl)
			}
		})
	}
}

// A key of another type under a fixed window's name keeps no evidence and
// fails no call.
func TestEvidenceInACounterOfAnotherType(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	key := prefix + ":{t}:f"
	rdb.HSet(ctx, key, "v", "1")
	e := &Evidence{Windows: []EvidenceWindow{{Key: key, Window: key, Keep: 3, TTL: time.Hour}}, Entries: entriesOf(0, 1, 1, 1)}
	if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil {
		t.Fatal(err)
	}
	if len(e.Lists) != 1 || !slices.Equal(e.Lists[0], texts(0, 1)) {
		t.Errorf("lists %q, want the call's own", e.Lists)
	}
	if got := rdb.HGetAll(ctx, key).Val(); len(got) != 1 || got["v"] != "1" {
		t.Errorf("the hash holds %v, want it untouched", got)
	}
}

// Counted, refunded and counted again, a window that keeps evidence in its
// counter keeps both its count and its entries, and its end: on Redis, and
// on miniredis's Lua, where the demo and the backtest's --lua run the
// scripts.
func TestCountingKeepsTheEvidenceInTheCounter(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	mini := miniredis.RunT(t)
	mrdb := redis.NewClient(&redis.Options{Addr: mini.Addr()})
	t.Cleanup(func() { _ = mrdb.Close() })
	ms, err := New(Config{}, mrdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, server := range []struct {
		name string
		s    *Scripts
		rdb  redis.UniversalClient
	}{{"redis", s, rdb}, {"miniredis", ms, mrdb}} {
		t.Run(server.name, func(t *testing.T) {
			s, rdb, ctx := server.s, server.rdb, t.Context()
			w := testWindow(prefix, "f", time.Minute, 5)
			count(t, s, []Window{w}, ev{"p:0", 1, "a", 1}, ev{"p:0", 2, "b", 1}, ev{"p:0", 3, "c", 1})
			e := &Evidence{Windows: []EvidenceWindow{{Key: w.Key, Window: w.Key, Keep: 5, TTL: time.Hour}},
				Entries: []EvidenceEntry{{Text: "b"}, {Text: "c"}}}
			if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil {
				t.Fatal(err)
			}
			res := count(t, s, []Window{w}, ev{"p:0", 4, "d", 1}, ev{"p:0", 5, "e", 1})
			if res[1].Current != 5 || !res[1].First {
				t.Fatalf("counted %+v, want the second to cross at 5", res)
			}
			if got := refund(t, s, []Window{w}, ev{"r:0", 1, "f", 2}); got[0].Current != 3 {
				t.Fatalf("refunded %+v, want 3 left", got)
			}
			if got := rdb.Get(ctx, w.Key).Val(); got != "3\x1eb\x1ec" {
				t.Errorf("the counter holds %q, want its count and entries", got)
			}
			if ttl := rdb.PTTL(ctx, w.Key).Val(); ttl <= 0 || ttl > time.Minute {
				t.Errorf("the counter lives %v, want its minute or less", ttl)
			}
		})
	}
}

// A window whose rule keeps evidence has its head read before it is
// counted, so that Redis never refuses an INCRBY on a counter holding
// entries (a refusal it counts in its statistics, an operator's alarm);
// one whose rule keeps none (its evidence turned off since) is refused
// once and read then. Both count the same. On a private redis-server, so
// that no other test's refusals are counted.
func TestAKeepingWindowIsNeverRefusedAnIncrby(t *testing.T) {
	for _, tc := range []struct {
		name    string
		keeps   bool
		refused int64
	}{
		{"its rule keeps evidence", true, 0},
		{"its rule keeps none since", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Connect(t, redistest.Start(t).Addr)
			s, err := New(Config{}, rdb, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			w := testWindow("test", "f", time.Minute, 10)
			w.Evidence = true
			count(t, s, []Window{w}, ev{"p:0", 1, "a", 1})
			e := &Evidence{Windows: []EvidenceWindow{{Key: w.Key, Window: w.Key, Keep: 5, TTL: time.Hour}},
				Entries: []EvidenceEntry{{Text: "a"}}}
			if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil {
				t.Fatal(err)
			}
			before := failedIncrby(t, rdb)
			w.Evidence = tc.keeps
			if res := count(t, s, []Window{w}, ev{"p:0", 2, "b", 1}); res[0].Current != 2 {
				t.Fatalf("counted %+v, want 2", res)
			}
			if got := rdb.Get(ctx, w.Key).Val(); got != "2\x1ea" {
				t.Errorf("the counter holds %q, want its count and entry", got)
			}
			if got := failedIncrby(t, rdb) - before; got != tc.refused {
				t.Errorf("Redis refused %d INCRBY, want %d", got, tc.refused)
			}
		})
	}
}

// failedIncrby is INCRBY's failed calls in Redis's commandstats.
func failedIncrby(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	stat := rdb.InfoMap(t.Context(), "commandstats").Val()["Commandstats"]["cmdstat_incrby"]
	for _, f := range strings.Split(stat, ",") {
		if v, ok := strings.CutPrefix(f, "failed_calls="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	if stat != "" {
		t.Fatalf("no failed_calls in %q", stat)
	}
	return 0
}

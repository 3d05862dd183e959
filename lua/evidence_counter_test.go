package lua

import (
	"fmt"
	"maps"
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

// A fixed window that keeps evidence is a hash: its count in c, and the
// entry of each order from its From up to its threshold, and of the
// crossing, in a field named by the count it took the window to. Counted,
// refunded and counted again, it keeps both, and its end: on Redis, and on
// miniredis's Lua, where the demo and the backtest's --lua run the scripts.
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
			w.Keep, w.From = 3, 3
			count(t, s, []Window{w}, ev{"p:0", 1, "a", 1}, ev{"p:0", 2, "b", 1}, ev{"p:0", 3, "c", 1})
			res := count(t, s, []Window{w}, ev{"p:0", 4, "d", 1}, ev{"p:0", 5, "e", 1})
			if res[1].Current != 5 || !res[1].First {
				t.Fatalf("counted %+v, want the second to cross at 5", res)
			}
			if got := refund(t, s, []Window{w}, ev{"r:0", 1, "f", 2}); got[0].Current != 3 {
				t.Fatalf("refunded %+v, want 3 left", got)
			}
			count(t, s, []Window{w}, ev{"p:0", 6, "g", 1}) // 4 again: its entry replaces d's
			want := map[string]string{"c": "4", "3": "c", "4": "g", "5": "e"}
			if got := rdb.HGetAll(ctx, w.Key).Val(); !maps.Equal(got, want) {
				t.Errorf("the window holds %v, want %v", got, want)
			}
			if ttl := rdb.PTTL(ctx, w.Key).Val(); ttl <= 0 || ttl > time.Minute {
				t.Errorf("the window lives %v, want its minute or less", ttl)
			}
			lists, err := s.CounterEvidence(ctx, []string{w.Key, w.Key + ":gone"})
			if err != nil || len(lists) != 2 || !slices.Equal(lists[0], []string{"e", "g", "c"}) || lists[1] != nil {
				t.Errorf("CounterEvidence %q, %v; want [[e g c] []]: by count, highest first", lists, err)
			}
		})
	}
}

// An amount's window may take many orders between its From and its
// threshold: it is trimmed to its keep highest counts past 2 × keep. An
// entry that is empty, too long or holds RS is not kept, and its change
// still counts.
func TestAWindowsEntriesAreBounded(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "amount", time.Minute, 1000)
	w.Keep, w.From = 2, 1
	for i := range 6 {
		count(t, s, []Window{w}, ev{"p:0", int64(i), fmt.Sprint("o", i), 10})
	}
	fields := rdb.HKeys(ctx, w.Key).Val()
	slices.Sort(fields)
	// Trimmed to 40 and 50 when 50 made the fifth entry; 60 then added.
	if want := []string{"40", "50", "60", "c"}; !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v: trimmed past 2 × keep to the highest counts", fields, want)
	}
	for _, bad := range []string{"", "a\x1eb", strings.Repeat("x", MaxEvidenceText+1)} {
		c := &Call{Kind: Count, Source: "p:0", Offsets: offsetsOf(w), Windows: []Window{w},
			Changes: []Change{{Offset: 100 + int64(len(bad)), ID: IDOf("bad"), Amount: 1, Entry: bad}}}
		b := s.Batch()
		err := b.Add(c)
		if bad == "" {
			if err != nil || b.Exec(ctx) != nil || c.Results[0].Err != nil {
				t.Fatalf("an empty entry: %v, %+v; want the change counted", err, c.Results)
			}
			continue
		}
		if err == nil {
			t.Errorf("an entry of %d bytes, RS in it %v: sent", len(bad), strings.Contains(bad, EvidenceSep))
		}
	}
	if got := countOf(t, rdb, w.Key); got != "61" {
		t.Errorf("count %s, want 61", got)
	}
}

// A counter of the version before (a string: its count, and entries after
// it) moves into the hash at its next change, its count and end kept, its
// entries dropped; a redelivery reads its count; a refund moves it too.
func TestACounterOfTheVersionBeforeMovesIntoAHash(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	for n, tc := range []struct {
		name, value string
		ttl         time.Duration
	}{
		{"a count", "3", time.Minute},
		{"a count and entries", "3\x1ea\x1eb", time.Minute},
		{"a count without a TTL", "3", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWindow(prefix, fmt.Sprint("old", n), time.Hour, 100)
			w.Keep, w.From = 5, 1
			rdb.Set(ctx, w.Key, tc.value, tc.ttl)
			src := fmt.Sprintf("p%d:0", n) // offsets of its own
			if got := count(t, s, []Window{w}, ev{src, 5, "x", 1}); got[0].Current != 4 {
				t.Fatalf("counted %+v, want 4", got)
			}
			want := map[string]string{"c": "4", "4": "x"}
			if got := rdb.HGetAll(ctx, w.Key).Val(); !maps.Equal(got, want) {
				t.Errorf("the window holds %v, want %v", got, want)
			}
			ttl := rdb.PTTL(ctx, w.Key).Val()
			if tc.ttl > 0 && (ttl <= 0 || ttl > tc.ttl) || tc.ttl == 0 && ttl >= 0 {
				t.Errorf("the window lives %v, want its own end (%v)", ttl, tc.ttl)
			}
			rdb.Set(ctx, w.Key, tc.value, tc.ttl)
			if got := count(t, s, []Window{w}, ev{src, 5, "x", 1}); got[0].Current != 3 || got[0].First {
				t.Errorf("a redelivery answered %+v, want the string's count 3", got)
			}
			if got := refund(t, s, []Window{w}, ev{"r" + src, 1, "r", 1}); got[0].Current != 2 || countOf(t, rdb, w.Key) != "2" {
				t.Errorf("a refund answered %+v, the window holds %q; want 2", got, countOf(t, rdb, w.Key))
			}
		})
	}
}

// A window's count is never refused in either layout: a hash's field
// (HINCRBY, whatever its entries hold) when its rule keeps evidence, a
// string (INCRBY) when it keeps none; so Redis counts no failed call
// (errorstats, an operator's alarm). A reload that turns a rule's
// evidence off costs one refused INCRBY a change until its window's hash
// ends, and counts all the same. On a private redis-server, so that no
// other test's refusals are counted.
func TestACountIsNeverRefused(t *testing.T) {
	rdb := redistest.Connect(t, redistest.Start(t).Addr)
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w, plain := testWindow("test", "f", time.Minute, 10), testWindow("test", "g", time.Minute, 10)
	w.Keep, w.From = 5, 1
	count(t, s, []Window{w, plain}, ev{"p:0", 1, "a", 1})
	before := failedCalls(t, rdb) // the scripts' first EVALSHA failed: NOSCRIPT
	count(t, s, []Window{w, plain}, ev{"p:0", 2, "b", 1})
	if got := rdb.HLen(t.Context(), w.Key).Val(); got != 3 {
		t.Errorf("the keeping window holds %d fields, want the count and 2 entries", got)
	}
	if typ := rdb.Type(t.Context(), plain.Key).Val(); typ != "string" {
		t.Errorf("the window that keeps nothing is a %s, want a string", typ)
	}
	if got := failedCalls(t, rdb) - before; got != 0 {
		t.Errorf("Redis counted %d failed calls, want none", got)
	}
	w.Keep, w.From = 0, 0
	if res := count(t, s, []Window{w, plain}, ev{"p:0", 3, "c", 1}); res[0].Current != 3 || res[1].Current != 3 {
		t.Fatalf("counted %+v after the reload, want 3 in both", res)
	}
	if got := failedCalls(t, rdb) - before; got != 1 {
		t.Errorf("Redis counted %d failed calls after the reload, want the one INCRBY of the hash", got)
	}
}

// failedCalls is the failed calls of every command in Redis's
// commandstats.
func failedCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	var n int64
	for _, stat := range rdb.InfoMap(t.Context(), "commandstats").Val()["Commandstats"] {
		for _, f := range strings.Split(stat, ",") {
			if v, ok := strings.CutPrefix(f, "failed_calls="); ok {
				k, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				n += k
			}
		}
	}
	return n
}

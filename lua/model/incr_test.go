package model

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// ids are 8-byte event ids; "abcdefgh" and "efghijkl" overlap, so that a
// match straddling two remembered ids is tried.
var ids = []string{"abcdefgh", "efghijkl", "ijklmnop", "00000001", "00000002", "00000003", "zzzzzzzz"}

// randomID is one of ids, or of 60 more, so that a source's latest ids
// fill up (16) and old ones fall out.
func randomID(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return ids[r.IntN(len(ids))]
	}
	return fmt.Sprintf("id%06d", r.IntN(60))
}

// randomOffset is the next offset of a source: mostly on, sometimes the
// same or back by one (a redelivery) or by up to 20 (a zombie's stale
// batch).
func randomOffset(r *rand.Rand, offsets map[string]int, src string) string {
	off := offsets[src] + r.IntN(4) - 1
	if r.IntN(10) == 0 {
		off -= r.IntN(20)
	}
	off = max(off, 0)
	offsets[src] = max(off, offsets[src]-1)
	return strconv.Itoa(off)
}

func TestIncrAndCheckAsTheScript(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls [][]string // per call: args after the windows' keys
	}{
		{"counts and crosses once", [][]string{
			{"p:0", "600", "1", "600", "3", "1", "1", ids[0], "1", "1", "2", ids[1], "1", "1", "3", ids[2], "1", "1", "4", ids[3], "1"},
		}},
		{"a redelivery by offset; the same id at a later offset counts", [][]string{
			{"p:0", "600", "1", "600", "2", "1", "5", ids[0], "1", "1", "6", ids[1], "1"},
			{"p:0", "600", "1", "600", "2", "1", "6", ids[1], "1", "1", "9", ids[0], "1", "1", "10", ids[2], "1"},
		}},
		{"offsets outlive the longest window, marks their own lifetime", [][]string{
			{"p:0", "60", "2", "600", "1", "30", "1", "1", "1", ids[0], "1", "2", "1", ids[0], "1"},
		}},
		{"a crossing redelivered from another source", [][]string{
			{"p:0", "600", "1", "600", "2", "1", "1", ids[0], "1", "1", "2", ids[1], "1"},
			{"p:1", "600", "1", "600", "2", "1", "1", ids[1], "1"},
		}},
		{"a crossing redelivered from another source, its id no longer among the latest", [][]string{
			{"p:0", "600", "1", "600", "2", "1", "1", ids[0], "1", "1", "2", ids[1], "1", "1", "3", ids[2], "1",
				"1", "4", ids[3], "1", "1", "5", ids[4], "1", "1", "6", ids[5], "1"},
			{"p:1", "600", "1", "600", "2", "1", "7", ids[1], "1", "1", "8", ids[6], "1"},
		}},
		{"two windows, one unusable", [][]string{
			{"p:0", "600", "2", "600", "2", "600", "0", "1", "1", ids[0], "5", "2", "1", ids[0], "5", "1", "2", ids[1], "5"},
		}},
		{"changes refused one by one", [][]string{
			{"p:0", "600", "1", "600", "2", "0", "1", ids[0], "1", "2", "1", ids[0], "1", "1", "01", ids[0], "1",
				"1", "1", "short", "1", "1", "1", ids[0], "0", "1", "1", ids[0], "-1", "1.5", "1", ids[0], "1", "", "1", ids[0], "1",
				"1", "2", ids[1], "1"},
		}},
		{"calls refused whole", [][]string{
			{"", "600", "1", "600", "2", "1", "1", ids[0], "1"},
			{"p:0", "0", "1", "600", "2", "1", "1", ids[0], "1"},
			{"p:0", "600", "2", "600", "2", "1", "1", ids[0], "1"},
			{"p:0", "600", "1", "600", "2", "1", "1", ids[0]},
			{"p:0", "600", "1", "600", "2"},
		}},
		{"past 2^53; a threshold or increment of 2^53 refused (TestCountingPast2To53 goes on to 2^62)", [][]string{
			{"p:0", "600", "1", "600", "9007199254740991", "1", "1", ids[0], "9007199254740990", "1", "2", ids[1], "5", "1", "3", ids[2], "1"},
			{"p:0", "600", "1", "600", "9007199254740993", "1", "4", ids[3], "1"},
			{"p:0", "600", "1", "600", "9007199254740991", "1", "5", ids[4], "9007199254740993", "1", "6", ids[5], "9007199254740991",
				"1", "7", ids[6], "9007199254740991", "1", "8", ids[0], "9007199254740991"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			for _, args := range tc.calls {
				n, _ := strconv.Atoi(args[2])
				if n > 2 || n < 1 {
					n = 1
				}
				keys := []string{p.key("o")}
				for i := range n {
					keys = append(keys, p.key(fmt.Sprint("w", i)), p.key(fmt.Sprint("w", i, ":crossed")))
				}
				p.call(lua.IncrAndCheckName, keys, args...)
			}
		})
	}
}

// A window that lost its TTL gets its length again when it reaches its
// threshold, not before; one that has a TTL keeps it.
func TestIncrAndCheckRearmsAWindowWithoutTTL(t *testing.T) {
	p := newPair(t)
	keys := []string{p.key("o"), p.key("w"), p.key("w:crossed")}
	p.call(lua.IncrAndCheckName, keys, "p:0", "600", "1", "600", "9", "1", "1", ids[0], "1")
	p.call(lua.IncrAndCheckName, keys, "p:0", "600", "1", "900", "9", "1", "2", ids[1], "1")
	p.rdb.Persist(t.Context(), keys[1])
	p.st.mu.Lock()
	p.st.keys[keys[1]].ttl = false
	p.st.mu.Unlock()
	p.call(lua.IncrAndCheckName, keys, "p:0", "600", "1", "900", "9", "1", "3", ids[2], "1")
	p.call(lua.IncrAndCheckName, keys, "p:0", "600", "1", "900", "4", "1", "4", ids[3], "1")
}

// TestIncrAndCheckRandomly runs random calls, mostly usable, over windows
// whose state the calls share.
func TestIncrAndCheckRandomly(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newPair(t)
			r := rand.New(rand.NewPCG(seed, 1))
			offsets := map[string]int{}
			for range 20 {
				n := 1 + r.IntN(3)
				src := []string{"p:0", "p:1"}[r.IntN(2)]
				args := []string{src, "600", strconv.Itoa(n)}
				keys := []string{p.key("o")}
				for i := range n {
					w := r.IntN(4) // of 4 windows, so that calls share some
					keys = append(keys, p.key(fmt.Sprint("w", w, "-", i)), p.key(fmt.Sprint("w", w, "-", i, ":crossed")))
					threshold := strconv.Itoa(1 + r.IntN(12))
					if r.IntN(15) == 0 {
						threshold = "0"
					}
					args = append(args, "600", threshold)
				}
				for range 1 + r.IntN(8) {
					off := randomOffset(r, offsets, src)
					index := strconv.Itoa(1 + r.IntN(n))
					if r.IntN(20) == 0 {
						index = strconv.Itoa(n + 1)
					}
					inc := strconv.Itoa(1 + r.IntN(4))
					if r.IntN(25) == 0 {
						inc = "0"
					}
					args = append(args, index, off, randomID(r), inc)
				}
				p.call(lua.IncrAndCheckName, keys, args...)
			}
		})
	}
}

func TestSalesDecrAsTheScript(t *testing.T) {
	count := func(p *pair, args ...string) {
		p.call(lua.IncrAndCheckName, []string{p.key("o"), p.key("w"), p.key("w:crossed")}, append([]string{"p:0", "600", "1", "600", "1000"}, args...)...)
	}
	for _, tc := range []struct {
		name    string
		counted []string
		refunds [][]string
	}{
		{"a refund of nothing", nil, [][]string{{"p:1", "900", "1", "1", ids[0], "5"}}},
		{"takes, then clamps at 0", []string{"1", "1", ids[0], "10"}, [][]string{{"p:1", "900", "1", "1", ids[1], "4", "1", "2", ids[2], "9", "1", "3", ids[3], "1"}}},
		{"a redelivery by offset and by id", []string{"1", "1", ids[0], "10"}, [][]string{
			{"p:1", "900", "1", "5", ids[1], "1"},
			{"p:1", "900", "1", "5", ids[1], "1", "1", "6", ids[1], "1", "1", "7", ids[2], "1"},
		}},
		{"refunds from the orders' own source keep their own field", []string{"1", "1", ids[0], "10"}, [][]string{
			{"p:0", "900", "1", "1", ids[1], "2", "1", "2", ids[0], "3"},
		}},
		{"refused changes and calls", []string{"1", "1", ids[0], "10"}, [][]string{
			{"p:1", "900", "0", "1", ids[1], "1", "1", "x", ids[1], "1", "1", "2", "short", "1", "1", "3", ids[1], "0", "1", "4", ids[2], "2"},
			{"", "900", "1", "1", ids[1], "1"},
			{"p:1", "0", "1", "1", ids[1], "1"},
			{"p:1", "900", "1", "1", ids[1]},
			// Window indices are digit strings: "01", "1.0" and " 1" are
			// refused, though Lua's tonumber would take them.
			{"p:1", "900", "01", "5", ids[1], "1", "1.0", "6", ids[2], "1", " 1", "7", ids[3], "1", "1", "8", ids[4], "1"},
		}},
		{"past 2^53", []string{"1", "1", ids[0], "9007199254740991", "1", "2", ids[1], "9007199254740991"}, [][]string{
			{"p:1", "900", "1", "1", ids[1], "3", "1", "2", ids[2], "9007199254740990", "1", "3", ids[3], "1"},
		}},
		{"past 2^53, clamped", []string{"1", "1", ids[0], "9007199254740991", "1", "2", ids[1], "2"}, [][]string{
			{"p:1", "900", "1", "1", ids[1], "9007199254740991", "1", "2", ids[2], "9007199254740991", "1", "3", ids[3], "9007199254741000"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			if tc.counted != nil {
				count(p, tc.counted...)
			}
			for _, args := range tc.refunds {
				p.call(lua.SalesDecrName, []string{p.key("o"), p.key("w")}, args...)
			}
		})
	}
}

func TestSalesDecrRandomly(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newPair(t)
			r := rand.New(rand.NewPCG(seed, 2))
			offsets := map[string]int{}
			next := func(src string) string { return randomOffset(r, offsets, src) }
			for range 20 {
				w := fmt.Sprint("w", r.IntN(3))
				if r.IntN(2) == 0 {
					args := []string{"p:0", "600", "1", "600", "50"}
					for range 1 + r.IntN(4) {
						args = append(args, "1", next("p:0"), randomID(r), strconv.Itoa(1+r.IntN(9)))
					}
					p.call(lua.IncrAndCheckName, []string{p.key("o"), p.key(w), p.key(w + ":crossed")}, args...)
					continue
				}
				keys := []string{p.key("o"), p.key(w)}
				if r.IntN(2) == 0 {
					keys = append(keys, p.key(fmt.Sprint(w, "b")))
				}
				args := []string{"r:0", "900"}
				for range 1 + r.IntN(4) {
					args = append(args, strconv.Itoa(1+r.IntN(len(keys)-1)), next("r:0"), randomID(r), strconv.Itoa(1+r.IntN(9)))
				}
				p.call(lua.SalesDecrName, keys, args...)
			}
		})
	}
}

func TestAlertClaimAndSettleAsTheScripts(t *testing.T) {
	p := newPair(t)
	cool, rec := p.key("cooldown"), p.key("record:a")
	// Each record's old form (a string) beside it, read when it is none.
	// Each alert's hash is its record's key and ":h"; an alert's first
	// claim keeps its JSON as its life, but for e's and f's (none: a
	// backtest's).
	claim := func(rec, id, cooldown, claimant string, silences ...string) {
		body := `{"id":"` + id + `"}`
		if len(silences) > 0 {
			body = ""
		}
		p.call(lua.AlertClaimName, append([]string{cool, rec, rec + ":old", rec + ":h"}, silences...), id, cooldown, "600", claimant, body)
	}
	settle := func(rec, id, outcome, claimant, receipt string) {
		p.call(lua.AlertSettleName, []string{cool, rec, rec + ":h"}, id, outcome, "600", claimant, receipt)
	}
	claim(rec, "a", "60", "t/0/1")
	claim(rec, "a", "60", "t/0/1") // an attempt again, holding the cooldown
	claim(rec, "a", "60", "t/1/4") // a copy elsewhere
	claim(p.key("record:b"), "b", "60", "t/0/2")
	settle(rec, "a", "failed", "t/0/1", "")
	claim(p.key("record:c"), "c", "60", "t/0/3") // the cooldown given back
	settle(p.key("record:c"), "c", "sent", "t/0/3", `{"channel":"C1","ts":"1.2"}`)
	claim(p.key("record:c"), "c", "60", "t/1/9")
	claim(p.key("record:b"), "b", "60", "t/0/2")
	claim(p.key("record:d"), "d", "0", "t/0/4")
	// Parked: the claim passes to the parked alerts, from its claimant only.
	settle(p.key("record:d"), "d", "parked", "t/9/9", "")
	settle(p.key("record:d"), "d", "parked", "t/0/4", "")
	claim(p.key("record:d"), "d", "0", "t/0/4")
	claim(p.key("record:d"), "d", "0", "parked")
	settle(p.key("record:d"), "d", "sent", "parked", "")
	settle(p.key("record:none"), "n", "parked", "t/0/5", "")
	// Records of the version before: a string at the old key.
	for i, old := range []string{"sent", "failed", "suppressed", "silenced", "pending", "odd"} {
		r := p.key(fmt.Sprint("record:old", i))
		p.used[r+":old"] = true
		p.rdb.Set(t.Context(), r+":old", old, 600*time.Second)
		p.st.mu.Lock()
		p.st.setEx(r+":old", old, 600*time.Second)
		p.st.mu.Unlock()
		claim(r, fmt.Sprint("old", i), "0", "t/2/1")
	}
	// Silences: a hash of id -> end, milliseconds since 1970; an hour
	// from the model's clock and from Redis's either way.
	silences, rule := p.key("silences"), p.key("rule-silences")
	now := p.start.UnixMilli()
	p.rdb.HSet(t.Context(), silences, "old", now-3600_000)
	p.rdb.HSet(t.Context(), rule, "x", "not a number")
	p.st.mu.Lock()
	_ = p.st.hset(silences, "old", strconv.FormatInt(now-3600_000, 10))
	_ = p.st.hset(rule, "x", "not a number")
	p.st.mu.Unlock()
	claim(p.key("record:e"), "e", "60", "t/0/5", silences, rule)
	p.rdb.HSet(t.Context(), rule, "y", now+3600_000)
	p.st.mu.Lock()
	_ = p.st.hset(rule, "y", strconv.FormatInt(now+3600_000, 10))
	p.st.mu.Unlock()
	claim(p.key("record:f"), "f", "60", "t/0/6", silences, rule)
	claim(p.key("record:f"), "f", "60", "t/0/6")
	// One alert, two receivers: the second follows the first's decision
	// after the cooldown went to another alert; a failure of one while
	// the other sent keeps the cooldown; a failure of the last gives it
	// back.
	cool2 := p.key("cooldown2")
	two := func(rec, id, cooldown, claimant, body string) any {
		return p.call(lua.AlertClaimName, []string{cool2, rec, rec + ":old", p.key("h:" + id)}, id, cooldown, "600", claimant, body)
	}
	two(p.key("x:slack"), "x", "60", "t/0/1", `{"id":"x"}`)
	p.call(lua.AlertSettleName, []string{cool2, p.key("x:slack"), p.key("h:x")}, "x", "sent", "600", "t/0/1", "")
	p.rdb.Del(t.Context(), cool2)
	p.st.mu.Lock()
	p.st.del(cool2)
	p.st.mu.Unlock()
	two(p.key("y:slack"), "y", "60", "t/0/2", `{"id":"y"}`) // y holds it now
	if got := two(p.key("x:pager"), "x", "60", "t/1/1", ""); got != int64(1) {
		t.Fatalf("x's second receiver: claim %v, want 1 (send, as its first receiver did)", got)
	}
	p.call(lua.AlertSettleName, []string{cool2, p.key("y:slack"), p.key("h:y")}, "y", "sent", "600", "t/0/2", "")
	two(p.key("y:pager"), "y", "60", "t/1/2", "")
	two(p.key("y:hook"), "y", "60", "t/2/2", "")
	p.call(lua.AlertSettleName, []string{cool2, p.key("y:pager"), p.key("h:y")}, "y", "failed", "600", "t/1/2", "") // slack sent it
	p.call(lua.AlertSettleName, []string{cool2, p.key("y:hook"), p.key("h:y")}, "y", "failed", "600", "t/2/2", "")
	if got := two(p.key("z:hook"), "z", "60", "t/2/3", ""); got != int64(0) {
		t.Fatalf("z: claim %v, want 0: y's failures keep the cooldown slack sent it under", got)
	}
	p.call(lua.AlertSettleName, []string{cool2, p.key("y:slack"), p.key("h:y")}, "y", "sent", "600", "t/0/2", "")
	p.rdb.Del(t.Context(), cool2)
	p.st.mu.Lock()
	p.st.del(cool2)
	p.st.mu.Unlock()
	two(p.key("v:hook"), "v", "60", "t/2/5", "")
	p.call(lua.AlertSettleName, []string{cool2, p.key("v:hook"), p.key("h:v")}, "v", "failed", "600", "t/2/5", "") // its only receiver: given back
	if n := p.rdb.Exists(t.Context(), cool2).Val(); n != 0 {
		t.Fatal("v failed at its only receiver, but kept the cooldown")
	}
	p.rdb.HSet(t.Context(), p.key("h:w"), "taken", "two")
	p.st.mu.Lock()
	_ = p.st.hset(p.key("h:w"), "taken", "two")
	p.st.mu.Unlock()
	two(p.key("w:hook"), "w", "0", "t/2/4", "")
	g := []string{cool, p.key("record:g"), p.key("record:g:old"), p.key("record:g:h")}
	for _, args := range [][]string{{"", "60", "600", "c", ""}, {"g", "-1", "600", "c", ""}, {"g", "60", "0", "c", ""},
		{"g", "05", "600", "c", ""}, {"g", "60", "600", ""}, {"g", "60", "600", "", ""}, {"g", "60", "600", "c"},
		{"g", "60", "600", strings.Repeat("c", 513), ""}, {"g", "60", "600", "c", strings.Repeat("b", 1<<20+1)}} {
		p.call(lua.AlertClaimName, g, args...)
	}
	p.call(lua.AlertClaimName, g[:3], "g", "60", "600", "c", "")
	for _, args := range [][]string{{"a", "lost", "600", "c", ""}, {"", "sent", "600", "c", ""}, {"a", "sent", "0", "c", ""},
		{"a", "sent", "600", "", ""}, {"a", "sent", "600", "c"}, {"a", "failed", "600", "c", "r"},
		{"a", "sent", "600", "c", strings.Repeat("r", 513)}} {
		p.call(lua.AlertSettleName, []string{cool, rec, rec + ":h"}, args...)
	}
	p.call(lua.AlertSettleName, []string{cool, rec}, "a", "sent", "600", "c", "")
}

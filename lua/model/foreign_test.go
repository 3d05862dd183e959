package model

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

// foreign writes a value of kind ("string", "hash" or "zset") at the pair's
// key name in both, in place of what was there: a key of another type,
// written by another.
func foreign(p *pair, name, kind string) {
	p.t.Helper()
	key, ctx := p.key(name), p.t.Context()
	p.used[key] = true
	p.rdb.Del(ctx, key)
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.del(key)
	var err error
	switch kind {
	case "string":
		err = p.rdb.Set(ctx, key, "x", 600*time.Second).Err()
		p.st.setEx(key, "x", 600*time.Second)
	case "hash":
		if err = p.rdb.HSet(ctx, key, "f", "v").Err(); err == nil {
			err = p.st.hset(key, "f", "v")
		}
	case "zset":
		if err = p.rdb.ZAdd(ctx, key, redis.Z{Score: 1, Member: "m"}).Err(); err == nil {
			_, err = p.st.zadd(key, "m", 1, false)
		}
	default:
		err = fmt.Errorf("no kind %q", kind)
	}
	if err != nil {
		p.t.Fatal(err)
	}
}

// What the counting scripts do with a key of another type: the offsets and
// marks are none, and are replaced; a window is unusable (-1, -1, nothing
// written), but a fixed window's hash without a count (c), which
// incr_and_check counts into; no call fails.
func TestScriptsTakeKeysOfAnotherType(t *testing.T) {
	const a, b, c = "aaaaaaaa", "bbbbbbbb", "cccccccc"
	type step func(p *pair)
	seed := func(name, kind string) step { return func(p *pair) { foreign(p, name, kind) } }
	// run calls script and wants its reply: never a failed call.
	run := func(script string, keys func(p *pair) []string, args []string, want ...int64) step {
		return func(p *pair) {
			p.t.Helper()
			got := p.call(script, keys(p), args...)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				p.t.Fatalf("%s %q: got %v, want %v", script, args, got, want)
			}
		}
	}
	// incr counts one event into n fixed windows f1..fn of threshold th.
	incr := func(n int, th, off, id string, want ...int64) step {
		keys := func(p *pair) []string {
			k := []string{p.key("o")}
			for i := 1; i <= n; i++ {
				k = append(k, p.key(fmt.Sprint("f", i)), p.key(fmt.Sprint("f", i, ":crossed")))
			}
			return k
		}
		args := []string{"p:0", "600", fmt.Sprint(n)}
		for range n {
			args = append(args, "600", th)
		}
		for i := 1; i <= n; i++ {
			args = append(args, fmt.Sprint(i), off, id, "10")
		}
		return run(lua.IncrAndCheckName, keys, args, want...)
	}
	sales := func(off string, want ...int64) step {
		return run(lua.SalesDecrName, func(p *pair) []string { return []string{p.key("o"), p.key("f1")} },
			[]string{"r:0", "600", "1", off, c, "3"}, want...)
	}
	// slide counts one event into n sliding windows w1..wn of threshold th.
	slide := func(n int, th, off, id string, want ...int64) step {
		ws, names := make([]slideWin, n), make([]string, n)
		var cs []slideCh
		for i := range n {
			ws[i], names[i] = slideWin{"3", "2", th, "600"}, fmt.Sprint(i+1)
			cs = append(cs, slideCh{fmt.Sprint(i + 1), off, id, "5", "1"})
		}
		return run(lua.SlideAndCheckName, func(p *pair) []string { return slideKeysOf(p, names...) },
			slideArgs("p:0", ws, cs), want...)
	}
	// distinct counts one event at time at into windows w0..w(n-1).
	distinct := func(ws []dwin, off, id, at, value string, want ...int64) step {
		slots := make([]int, len(ws))
		var changes []string
		for i := range ws {
			slots[i] = i
			changes = append(changes, fmt.Sprint(i+1), off, id, at, value)
		}
		return run(lua.DistinctAndCheckName, func(p *pair) []string { return distinctKeysOf(p, slots...) },
			distinctArgs("p:0", ws, changes...), want...)
	}
	one := []dwin{fixedWin("600", "1")}
	sl := []dwin{slidingWin("10", "0", "5")}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"incr_and_check: offsets of another type are none, and replaced", []step{
			seed("o", "string"), incr(1, "50", "1", a, 10, 0), incr(1, "50", "1", a, 10, 0),
			seed("o", "zset"), incr(1, "50", "1", a, 20, 0), incr(1, "50", "1", a, 20, 0),
		}},
		{"incr_and_check: marks of another type, at a crossing and at a redelivery", []step{
			seed("f1:crossed", "string"), incr(1, "5", "1", a, 10, 1), incr(1, "5", "1", a, 10, 1),
			seed("f1:crossed", "zset"), incr(1, "5", "1", a, 10, 0),
		}},
		{"incr_and_check: a counter of another type; a hash without c is counted into", []step{
			seed("f1", "zset"), incr(2, "50", "1", a, -1, -1, 10, 0), incr(2, "50", "1", a, -1, -1, 10, 0),
			seed("f1", "string"), incr(2, "50", "2", b, -1, -1, 20, 0), incr(2, "50", "2", b, -1, -1, 20, 0),
			seed("f1", "hash"), incr(2, "50", "3", c, 10, 0, 30, 0),
		}},
		{"sales_decr: offsets and a counter of another type", []step{
			incr(1, "50", "1", a, 10, 0), seed("o", "string"), sales("1", 7, 0), sales("1", 7, 0),
			seed("f1", "zset"), sales("2", -1, -1),
		}},
		{"slide_and_check: offsets of another type", []step{
			seed("o", "zset"), slide(1, "50", "1", a, 1, 0), slide(1, "50", "1", a, 1, 0),
		}},
		{"slide_and_check: a window of another type", []step{
			seed("w1", "string"), slide(2, "50", "1", a, -1, -1, 1, 0), slide(2, "50", "1", a, -1, -1, 1, 0),
			slide(2, "50", "2", b, -1, -1, 2, 0),
		}},
		{"slide_and_check: marks of another type, at a crossing and at a redelivery", []step{
			seed("w1:crossed", "string"), slide(1, "1", "1", a, 1, 1), slide(1, "1", "1", a, 1, 1),
			seed("w1:crossed", "zset"), slide(1, "1", "1", a, 1, 0),
		}},
		{"distinct_and_check: offsets of another type", []step{
			seed("o", "string"), distinct(one, "1", a, "5", "v", 1, 1), distinct(one, "1", a, "5", "v", 1, 1),
		}},
		{"distinct_and_check: a fixed window's hash or values of another type", []step{
			seed("w0", "string"), seed("w1:values", "hash"),
			distinct([]dwin{fixedWin("600", "5"), fixedWin("600", "5"), fixedWin("600", "5")}, "1", a, "5", "v",
				-1, -1, -1, -1, 1, 0),
		}},
		{"distinct_and_check: a sliding window's values of another type, at a change, a redelivery and a late one",
			[]step{
				distinct(sl, "1", a, "100", "v", 1, 0), seed("w0:values", "hash"),
				distinct(sl, "2", b, "101", "w", -1, -1),
				distinct(sl, "1", a, "100", "v", -1, -1),
				distinct(sl, "3", c, "1", "x", -1, -1),
			}},
		{"distinct_and_check: marks of another type, at a crossing and at a redelivery", []step{
			seed("w0:crossed", "string"), distinct(one, "1", a, "5", "v", 1, 1), distinct(one, "1", a, "5", "v", 1, 1),
			seed("w0:crossed", "zset"), distinct(one, "1", a, "5", "v", 1, 0),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			for _, st := range tc.steps {
				st(p)
			}
		})
	}
}

// alert_claim and alert_settle with keys of another type: a record is
// none, and replaced; a cooldown is none and replaced; an old record and
// silences are none; a settle leaves a cooldown that is not its alert's.
func TestAlertScriptsTakeKeysOfAnotherType(t *testing.T) {
	p := newPair(t)
	call := func(script string, want int64, keys []string, args ...string) {
		t.Helper()
		for i, k := range keys {
			keys[i] = p.key(k)
		}
		if got := p.call(script, keys, args...); got != want {
			t.Fatalf("%s %q: got %v, want %d", script, args, got, want)
		}
	}
	foreign(p, "rec:a", "string")
	foreign(p, "h:a", "zset")
	call(lua.AlertClaimName, 1, []string{"cd", "rec:a", "old:a", "h:a"}, "a", "0", "600", "c", `{"id":"a"}`)
	foreign(p, "rec:b", "zset")
	foreign(p, "old:b", "hash")
	foreign(p, "cd", "zset")
	call(lua.AlertClaimName, 1, []string{"cd", "rec:b", "old:b", "h:b"}, "b", "60", "600", "c", "")
	call(lua.AlertClaimName, 0, []string{"cd", "rec:c", "old:c", "h:c"}, "c", "60", "600", "c", "") // b holds it now
	foreign(p, "s", "string")
	foreign(p, "rs", "zset")
	call(lua.AlertClaimName, 1, []string{"cd2", "rec:d", "old:d", "h:d", "s", "rs"}, "d", "60", "600", "c", "")
	foreign(p, "cd", "hash")
	foreign(p, "h:b", "string")
	call(lua.AlertSettleName, 1, []string{"cd", "rec:b", "h:b"}, "b", "failed", "600", "c", "")
	foreign(p, "rec:e", "string")
	call(lua.AlertSettleName, 1, []string{"cd", "rec:e", "h:e"}, "e", "sent", "600", "c", "r")
	foreign(p, "rec:f", "zset")
	call(lua.AlertSettleName, 0, []string{"cd", "rec:f", "h:f"}, "f", "parked", "600", "c", "")
}

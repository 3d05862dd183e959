package model

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

// distinctIDs are 8-byte event ids.
var distinctIDs = []string{"abcdefgh", "efghijkl", "ijklmnop", "00000001", "00000002", "00000003", "zzzzzzzz", "yyyyyyyy"}

// dwin is one window's arguments: kind, length, lateness, threshold, TTL.
type dwin [5]string

func fixedWin(length, threshold string) dwin { return dwin{"fixed", length, "0", threshold, "600"} }
func slidingWin(length, late, threshold string) dwin {
	return dwin{"sliding", length, late, threshold, "600"}
}

// distinctArgs is a call's arguments: source, marks' lifetime, the windows
// and then the changes (index, offset, id, time, value each).
func distinctArgs(src string, ws []dwin, changes ...string) []string {
	args := []string{src, "600", strconv.Itoa(len(ws))}
	for _, w := range ws {
		args = append(args, w[:]...)
	}
	return append(args, changes...)
}

// distinctKeysOf is the keys of windows named by slot, after the bucket's
// offsets.
func distinctKeysOf(p *pair, slots ...int) []string {
	keys := []string{p.key("o")}
	for _, s := range slots {
		w := fmt.Sprint("w", s)
		keys = append(keys, p.key(w), p.key(w+":values"), p.key(w+":crossed"))
	}
	return keys
}

func TestDistinctAndCheckAsTheScript(t *testing.T) {
	id := distinctIDs
	fx := []dwin{fixedWin("600", "3")}
	sl := []dwin{slidingWin("10", "0", "3")}
	long := strings.Repeat("v", 65)
	type call struct {
		keys  int // windows' keys given; 0 for as many as windows
		args  []string
		setup func(p *pair) // before the call
		want  []int64       // the reply, when not nil
	}
	for _, tc := range []struct {
		name  string
		calls []call
	}{
		{"fixed: repeats of a value don't count, crossing at the threshold", []call{
			{args: distinctArgs("p:0", fx, "1", "1", id[0], "5", "a", "1", "2", id[1], "6", "a", "1", "3", id[2], "4", "b",
				"1", "4", id[3], "9", "a", "1", "5", id[4], "7", "c", "1", "6", id[5], "8", "d")},
			{args: distinctArgs("p:0", fx, "1", "7", id[6], "1", "c", "1", "8", id[7], "2", "e")},
		}},
		{"redelivery by offset", []call{
			{args: distinctArgs("p:0", fx, "1", "5", id[0], "1", "a", "1", "6", id[1], "2", "b", "1", "7", id[2], "3", "c"),
				want: []int64{1, 0, 2, 0, 3, 1}},
			// The crossing event again answers its mark.
			{args: distinctArgs("p:0", fx, "1", "5", id[0], "1", "a", "1", "7", id[2], "3", "c", "1", "8", id[3], "4", "d"),
				want: []int64{3, 0, 3, 1, 4, 0}},
			// Another partition's offsets are its own; ids play no part (the
			// consumer drops a producer's retry).
			{args: distinctArgs("p:1", fx, "1", "0", id[2], "3", "c", "1", "1", id[2], "3", "e"), want: []int64{4, 0, 5, 0}},
		}},
		{"an event's changes share its offset", []call{
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "1"), slidingWin("10", "0", "2")},
				"1", "1", id[0], "1", "a", "2", "1", id[0], "1", "a", "1", "2", id[1], "2", "b", "2", "2", id[1], "2", "b"),
				want: []int64{1, 1, 1, 0, 2, 0, 2, 1}},
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "1"), slidingWin("10", "0", "2")},
				"1", "2", id[1], "2", "b", "2", "2", id[1], "2", "b", "2", "3", id[2], "3", "c", "1", "3", id[2], "3", "c"),
				want: []int64{2, 0, 2, 1, 3, 0, 3, 0}},
		}},
		{"a late order redelivered is answered counted before", []call{
			{args: distinctArgs("p:0", sl, "1", "1", id[0], "30", "a", "1", "2", id[1], "5", "b"), want: []int64{1, 0, 1, 2}},
			{args: distinctArgs("p:0", sl, "1", "2", id[1], "5", "b"), want: []int64{1, 0}},
		}},
		{"the old layout's offset and latest ids", []call{
			// It counted a (offset 3, crossing), b and c (4, 5), and keeps 2
			// values: a is gone.
			{setup: func(p *pair) {
				distinctSeed(p, "w0", "t", "5", "p:0", "5", "p:1", "2", "r", "zzzzzzzzyyyyyyyy")
				distinctSeedValues(p, "w0", "b", "4", "c", "5")
				distinctSeed(p, "w0:crossed", id[0], "1")
			}, args: distinctArgs("p:0", []dwin{fixedWin("600", "1")}, "1", "3", id[0], "3", "a", "1", "4", id[1], "4", "b",
				"1", "5", id[2], "5", "c"), want: []int64{1, 1, 2, 0, 2, 0}},
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "1")}, "1", "5", id[2], "5", "c", "1", "6", id[3], "6", "d"),
				want: []int64{2, 0, 3, 0}},
			{args: distinctArgs("p:1", []dwin{fixedWin("600", "1")}, "1", "1", id[4], "6", "e", "1", "3", id[5], "6", "f"),
				want: []int64{2, 0, 3, 0}},
			{setup: func(p *pair) {
				distinctSeed(p, "w1", "t", "abc", "p:0", "abc", "r", "")
				distinctSeedValues(p, "w1", "e", "1")
			}, args: distinctArgs("p:0", []dwin{fixedWin("600", "1"), slidingWin("10", "0", "3")}, "2", "7", id[6], "6", "g"),
				want: []int64{2, 0}},
		}},
		// The offsets' TTL, compared after each call: renewed when the
		// newest time passes a multiple of the length (10), not before; a
		// fixed window's running changes leave it.
		{"a sliding window passing a multiple of its length renews the offsets", []call{
			{args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "9"), fixedWin("10", "9")}, "1", "1", id[0], "11", "a", "2", "1", id[0], "11", "a")},
			{setup: shortenOffsets, args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "9")}, "1", "2", id[1], "19", "b")},
			{setup: shortenOffsets, args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "9")}, "1", "3", id[2], "15", "c")},
			{setup: shortenOffsets, args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "9")}, "1", "4", id[3], "20", "d")},
			{setup: shortenOffsets, args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "9"), fixedWin("10", "9")}, "2", "5", id[4], "35", "e")},
			{setup: shortenOffsets, args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "9"), fixedWin("10", "9")}, "1", "6", id[5], "35", "f")},
		}},
		{"fixed: a window that lost its TTL gets it again, a running one keeps it", []call{
			{args: distinctArgs("p:0", fx, "1", "1", id[0], "1", "a")},
			{args: distinctArgs("p:0", []dwin{{"fixed", "600", "0", "3", "900"}}, "1", "2", id[1], "1", "b")},
			{setup: func(p *pair) {
				p.rdb.Persist(p.t.Context(), p.key("w0"))
				p.st.mu.Lock()
				p.st.keys[p.key("w0")].ttl = false
				p.st.mu.Unlock()
			}, args: distinctArgs("p:0", []dwin{{"fixed", "600", "0", "3", "900"}}, "1", "3", id[2], "1", "c")},
		}},
		{"sliding: in order", []call{
			{args: distinctArgs("p:0", sl, "1", "1", id[0], "1", "a", "1", "2", id[1], "2", "b", "1", "3", id[2], "3", "a",
				"1", "4", id[3], "5", "c", "1", "5", id[4], "11", "d", "1", "6", id[5], "12", "e", "1", "7", id[6], "30", "f")},
			{args: distinctArgs("p:0", sl, "1", "8", id[7], "31", "a", "1", "9", id[0], "32", "b")},
		}},
		{"sliding: out of order", []call{
			{args: distinctArgs("p:0", []dwin{slidingWin("10", "5", "3")},
				"1", "1", id[0], "20", "a", "1", "2", id[1], "12", "b", "1", "3", id[2], "8", "c", "1", "4", id[3], "15", "d",
				"1", "5", id[4], "11", "e", "1", "6", id[5], "21", "f")},
		}},
		{"sliding: a value seen again later moves its time", []call{
			{args: distinctArgs("p:0", sl, "1", "1", id[0], "1", "a", "1", "2", id[1], "5", "b", "1", "3", id[2], "12", "a",
				"1", "4", id[3], "14", "c", "1", "5", id[4], "16", "d")},
		}},
		{"sliding: a value seen earlier out of order keeps its time", []call{
			{args: distinctArgs("p:0", []dwin{slidingWin("10", "5", "2")}, "1", "1", id[0], "12", "a", "1", "2", id[1], "8", "a",
				"1", "3", id[2], "9", "b", "1", "4", id[3], "13", "c")},
		}},
		{"sliding: late beyond length and lateness", []call{
			{args: distinctArgs("p:0", []dwin{slidingWin("10", "5", "2")}, "1", "1", id[0], "30", "a", "1", "2", id[1], "15", "b",
				"1", "3", id[2], "16", "c", "1", "4", id[3], "0", "d")},
			{args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "2")}, "1", "5", id[4], "20", "e", "1", "6", id[5], "21", "e")},
			// Late and redelivered after a crossing: the mark answers.
			{args: distinctArgs("p:0", []dwin{slidingWin("10", "0", "2")}, "1", "6", id[5], "21", "e", "1", "7", id[6], "1", "x")},
		}},
		{"trimmed to threshold + 1 values, and by age", []call{
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "2"), slidingWin("5", "1", "2")},
				"1", "1", id[0], "1", "a", "1", "2", id[1], "2", "b", "1", "3", id[2], "3", "c", "1", "4", id[3], "4", "d",
				"2", "1", id[0], "1", "a", "2", "2", id[1], "2", "b", "2", "3", id[2], "3", "c", "2", "4", id[3], "4", "d",
				"1", "5", id[4], "0", "e")},
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "2"), slidingWin("5", "1", "2")},
				"2", "5", id[4], "14", "e", "1", "6", id[5], "1", "e")},
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "2"), slidingWin("5", "1", "2")}, "2", "6", id[5], "100", "e")},
		}},
		{"several windows in one call", []call{
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "2"), slidingWin("10", "2", "2"), fixedWin("700", "1")},
				"1", "1", id[0], "5", "a", "2", "1", id[0], "5", "a", "3", "1", id[0], "5", "a",
				"2", "2", id[1], "3", "b", "1", "2", id[1], "3", "b", "3", "2", id[1], "3", "b",
				"1", "3", id[2], "4", "b", "2", "3", id[2], "4", "c", "3", "2", id[1], "3", "b")},
		}},
		{"unusable windows refuse their changes", []call{
			{args: distinctArgs("p:0", []dwin{
				{"tumbling", "600", "0", "2", "600"}, {"fixed", "0", "0", "2", "600"}, {"fixed", "0600", "0", "2", "600"},
				{"sliding", "10", "-1", "2", "600"}, {"sliding", "10", "", "2", "600"}, {"sliding", "10", "01", "2", "600"},
				{"fixed", "600", "0", "0", "600"}, {"fixed", "600", "0", "10001", "600"}, {"fixed", "600", "0", "100000", "600"},
				{"fixed", "600", "0", "2", "0"}, {"sliding", "12345678901234", "0", "2", "600"}, {"fixed", "600", "0", "2", "12345678901"},
				{"sliding", "1234567890123", "1234567890123", "10000", "1234567890"},
			},
				"1", "1", id[0], "1", "a", "2", "1", id[0], "1", "a", "3", "1", id[0], "1", "a", "4", "1", id[0], "1", "a",
				"5", "1", id[0], "1", "a", "6", "1", id[0], "1", "a", "7", "1", id[0], "1", "a", "8", "1", id[0], "1", "a",
				"9", "1", id[0], "1", "a", "10", "1", id[0], "1", "a", "11", "1", id[0], "1", "a", "12", "1", id[0], "1", "a",
				"13", "1", id[0], "999999999999999", "a")},
		}},
		// The packing's bound on a lateness, 10^13 ms, is the one place it
		// is checked: the largest it takes is 10^13 - 1.
		{"a lateness at the packing's bound", []call{
			{args: distinctArgs("p:0", []dwin{slidingWin("10", "10000000000000", "2"), slidingWin("10", "9999999999999", "2")},
				"1", "1", id[0], "1", "a", "2", "1", id[0], "1", "a"), want: []int64{-1, -1, 1, 0}},
		}},
		{"unusable changes are refused one by one", []call{
			{args: distinctArgs("p:0", []dwin{fixedWin("600", "2"), slidingWin("10", "0", "2")},
				"0", "1", id[0], "1", "a", "3", "1", id[0], "1", "a", "y", "1", id[0], "1", "a", "", "1", id[0], "1", "a",
				"-1", "1", id[0], "1", "a", "+1", "1", id[0], "1", "a", "02", "2", id[0], "1", "a",
				"1", "01", id[0], "1", "a", "1", "-1", id[0], "1", "a", "1", "1234567890123456", id[0], "1", "a",
				"1", "3", "short", "1", "a", "1", "3", "ninebytes", "1", "a", "1", "3", id[1], "-5", "a",
				"1", "3", id[1], "01", "a", "1", "3", id[1], "1234567890123456", "a", "1", "3", id[1], "1", "",
				"1", "3", id[1], "1", long, "1", "4", id[2], "1", long[:64], "2", "5", id[3], "999999999999999", long[:64])},
		}},
		{"calls refused whole", []call{
			{args: distinctArgs("", fx, "1", "1", id[0], "1", "a")},
			{args: distinctArgs(strings.Repeat("p", 33), fx, "1", "1", id[0], "1", "a")},
			{args: append([]string{"p:0", "0"}, distinctArgs("p:0", fx, "1", "1", id[0], "1", "a")[2:]...)},
			{args: append([]string{"p:0", "12345678901"}, distinctArgs("p:0", fx, "1", "1", id[0], "1", "a")[2:]...)},
			{keys: 2, args: distinctArgs("p:0", fx, "1", "1", id[0], "1", "a")},
			{keys: 1, args: distinctArgs("p:0", []dwin{fixedWin("600", "2"), fixedWin("600", "2")}, "1", "1", id[0], "1", "a")},
			{args: distinctArgs("p:0", fx)},
			{args: distinctArgs("p:0", fx, "1", "1", id[0], "1")},
			{args: distinctArgs("p:0", fx, "1", "1", id[0], "1", "a", "1")},
			{args: []string{"p:0", "600"}},
			{args: []string{"p:0"}},
			{keys: -1, args: []string{"p:0", "600", "0", "1", "1", id[0], "1", "a"}},
			{args: distinctArgs("p0", fx, "1", "1", id[0], "1", "a")},
			{args: distinctArgs("t", fx, "1", "1", id[0], "1", "a")},
			{args: []string{"p:0", "600", "01", "fixed", "600", "0", "2", "600", "1", "1", id[0], "1", "a"}},
			{args: []string{"p:0", "600", "x", "fixed", "600", "0", "2", "600", "1", "1", id[0], "1", "a"}},
			{args: distinctArgs("p:0", fx, strings.Split(strings.Repeat("1,1,"+id[0]+",1,a,", 513), ",")[:5*513]...)},
			{args: distinctArgs("p:0", fx, strings.Split(strings.Repeat("1,1,"+id[0]+",1,a,", 512), ",")[:5*512]...)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			for _, c := range tc.calls {
				if c.setup != nil {
					c.setup(p)
				}
				n := c.keys
				if n == 0 && len(c.args) > 2 {
					n, _ = strconv.Atoi(c.args[2])
				}
				slots := make([]int, max(n, 0))
				for i := range slots {
					slots[i] = i
				}
				got := p.call(lua.DistinctAndCheckName, distinctKeysOf(p, slots...), c.args...)
				if c.want != nil && fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("reply %v, want %v", got, c.want)
				}
			}
		})
	}
}

// TestDistinctAndCheckRandomly runs random calls, mostly usable, over
// fixed and sliding windows whose state the calls share, with times out of
// order and values and ids repeated.
func TestDistinctAndCheckRandomly(t *testing.T) {
	const slots = 4
	// How often each flag came back, over all seeds: the calls must cross,
	// be late and be refused, or they test little.
	flags := map[int64]int{}
	defer func() {
		for _, f := range []int64{-1, 0, 1, 2} {
			if flags[f] == 0 {
				t.Errorf("no change answered with flag %d: %v", f, flags)
			}
		}
	}()
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newPair(t)
			r := rand.New(rand.NewPCG(seed, 3))
			config := func() dwin {
				w := dwin{"fixed", strconv.Itoa(1 + r.IntN(20)), strconv.Itoa(r.IntN(6)), strconv.Itoa(1 + r.IntN(8)),
					strconv.Itoa(600 + r.IntN(600))}
				if r.IntN(2) == 0 {
					w[0] = "sliding"
				}
				if r.IntN(30) == 0 {
					w[1+r.IntN(4)] = []string{"0", "", "x", "01", "10001"}[r.IntN(5)]
				}
				return w
			}
			// A window keeps its configuration, mostly: rules change.
			configs := make([]dwin, slots)
			for i := range configs {
				configs[i] = config()
			}
			offsets := map[string]int{}
			clock := 10
			for range 20 {
				n := 1 + r.IntN(3)
				src := []string{"p:0", "p:1"}[r.IntN(2)]
				which := r.Perm(slots)[:n]
				ws := make([]dwin, n)
				for i, s := range which {
					if r.IntN(10) == 0 {
						configs[s] = config()
					}
					ws[i] = configs[s]
				}
				var changes []string
				for range 1 + r.IntN(8) {
					// Offsets mostly go on, sometimes back (a redelivery).
					off := max(offsets[src]+r.IntN(3)-1, 0)
					offsets[src] = off
					clock += r.IntN(3)
					at := strconv.Itoa(max(clock+r.IntN(16)-10, 0))
					index := strconv.Itoa(1 + r.IntN(n))
					id := distinctIDs[r.IntN(len(distinctIDs))]
					value := fmt.Sprint("v", r.IntN(7))
					switch r.IntN(40) {
					case 0:
						index = strconv.Itoa(n + 1)
					case 1:
						at = "-1"
					case 2:
						id = "short"
					case 3:
						value = ""
					}
					changes = append(changes, index, strconv.Itoa(off), id, at, value)
				}
				reply, _ := p.call(lua.DistinctAndCheckName, distinctKeysOf(p, which...), distinctArgs(src, ws, changes...)...).([]int64)
				for i := 1; i < len(reply); i += 2 {
					flags[reply[i]]++
				}
			}
		})
	}
}

// distinctSeed writes a hash's fields under the pair's key name, in both.
func distinctSeed(p *pair, name string, fields ...string) {
	p.t.Helper()
	slideSeed(p, p.key(name), fields...)
}

// distinctSeedValues adds values to a window's values, each with its
// time, in both.
func distinctSeedValues(p *pair, name string, values ...string) {
	p.t.Helper()
	key := p.key(name + ":values")
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	for i := 0; i+1 < len(values); i += 2 {
		at, err := strconv.ParseFloat(values[i+1], 64)
		if err != nil {
			p.t.Fatal(err)
		}
		if err := p.rdb.ZAdd(p.t.Context(), key, redis.Z{Score: at, Member: values[i]}).Err(); err != nil {
			p.t.Fatal(err)
		}
		if _, err := p.st.zadd(key, values[i], at, false); err != nil {
			p.t.Fatal(err)
		}
	}
}

// shortenOffsets sets the bucket's offsets' TTL to 100 s in both.
func shortenOffsets(p *pair) {
	p.t.Helper()
	key := p.key("o")
	if err := p.rdb.Expire(p.t.Context(), key, 100*time.Second).Err(); err != nil {
		p.t.Fatal(err)
	}
	p.st.mu.Lock()
	p.st.expire(key, 100*time.Second)
	p.st.mu.Unlock()
}

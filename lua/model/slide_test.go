package model

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// slideIDs are 8-byte event ids; the first two overlap, so that a match
// straddling two remembered ids is tried.
var slideIDs = []string{"abcdefgh", "efghijkl", "aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd", "eeeeeeee", "ffffffff"}

// slideWin is a window's arguments: span, lateness, threshold, lifetime.
type slideWin [4]string

// slideStd is the hand cases' window: 3 buckets, 2 late, threshold 10.
var slideStd = slideWin{"3", "2", "10", "600"}

// slideCh is a change: window index, offset, id, bucket, amount.
type slideCh [5]string

func slideArgs(src string, ws []slideWin, cs []slideCh) []string {
	args := []string{src, "600", strconv.Itoa(len(ws))}
	for _, w := range ws {
		args = append(args, w[:]...)
	}
	for _, c := range cs {
		args = append(args, c[:]...)
	}
	return args
}

// slideKeysOf are the keys of windows named by names: the bucket's
// offsets, then each its hash and its crossing marks.
func slideKeysOf(p *pair, names ...string) []string {
	keys := []string{p.key("o")}
	for _, n := range names {
		keys = append(keys, p.key("w"+n), p.key("w"+n+":crossed"))
	}
	return keys
}

// slideSeed writes a hash into both, as something other than the script
// would.
func slideSeed(p *pair, key string, fields ...string) {
	p.t.Helper()
	if err := p.rdb.HSet(p.t.Context(), key, fields).Err(); err != nil {
		p.t.Fatal(err)
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	if err := p.st.hset(key, fields...); err != nil {
		p.t.Fatal(err)
	}
}

// slideStep is one call: windows nil is one slideStd; want nil is not
// checked but against Redis.
type slideStep struct {
	src     string
	windows []slideWin
	changes []slideCh
	want    []int64
	// shorten sets the offsets' TTL to 100 s in both before the call.
	shorten bool
}

func (st slideStep) run(p *pair) {
	p.t.Helper()
	if st.shorten {
		shortenOffsets(p)
	}
	ws := st.windows
	if ws == nil {
		ws = []slideWin{slideStd}
	}
	src := st.src
	if src == "" {
		src = "p:0"
	}
	names := make([]string, len(ws))
	for i := range ws {
		names[i] = strconv.Itoa(i + 1)
	}
	got := p.call(lua.SlideAndCheckName, slideKeysOf(p, names...), slideArgs(src, ws, st.changes)...)
	if st.want != nil && fmt.Sprint(got) != fmt.Sprint(st.want) {
		p.t.Fatalf("changes %q: got %v, want %v", st.changes, got, st.want)
	}
}

func TestSlideAndCheckAsTheScript(t *testing.T) {
	const a, b, c, d, e, f, g = "aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd", "eeeeeeee", "ffffffff", "gggggggg"
	const big, bigLess1, bigLess2 = "9007199254740992", "9007199254740991", "9007199254740990"
	unusable := []slideWin{
		{"0", "2", "10", "600"}, {"1001", "2", "10", "600"}, {"3", "4001", "10", "600"}, {"3", "01", "10", "600"},
		{"3", "2", "0", "600"}, {"3", "2", "1234567890123456789", "600"}, {"3", "2", "10", "0"},
		{"3", "2", "10", "12345678901"}, {"abc", "2", "10", "600"}, {"05", "2", "10", "600"},
		{"1000", "4000", bigLess1, "1000000000"}, // at the bounds (a TTL go-redis reads): usable
	}
	var unusableChanges []slideCh
	for i := range unusable {
		unusableChanges = append(unusableChanges, slideCh{strconv.Itoa(i + 1), strconv.Itoa(i + 1), a, "10", "5"})
	}
	var many []slideCh
	for i := range 512 {
		many = append(many, slideCh{"1", strconv.Itoa(i), fmt.Sprintf("%08d", i), strconv.Itoa(i / 7), "1"})
	}
	all := make([]slideWin, 64)
	for i := range all {
		all[i] = slideWin{strconv.Itoa(1 + i%10), strconv.Itoa(i % 6), strconv.Itoa(1 + i), "600"}
	}
	for _, tc := range []struct {
		name  string
		steps []slideStep
	}{
		{"in order", []slideStep{{changes: []slideCh{
			{"1", "1", a, "10", "4"}, {"1", "2", b, "11", "5"}, {"1", "3", c, "13", "3"}, {"1", "4", d, "13", "2"},
			{"1", "5", e, "14", "1"},
		}, want: []int64{4, 0, 9, 0, 8, 0, 10, 1, 6, 0}}}},
		{"out of order within the span: the largest window it falls into", []slideStep{{changes: []slideCh{
			{"1", "1", a, "10", "4"}, {"1", "2", b, "12", "3"}, {"1", "3", c, "11", "3"}, {"1", "4", d, "9", "1"},
		}, want: []int64{4, 0, 7, 0, 10, 1, 8, 0}}}},
		{"late beyond span and lateness; old buckets removed", []slideStep{
			{changes: []slideCh{
				{"1", "1", a, "20", "5"}, {"1", "2", b, "15", "5"}, {"1", "3", c, "16", "5"}, {"1", "4", d, "10", "-3"},
			}, want: []int64{5, 0, 5, 2, 5, 0, 5, 2}},
			{changes: []slideCh{{"1", "5", e, "30", "1"}}, want: []int64{1, 0}},
		}},
		{"a late order redelivered is answered counted before", []slideStep{
			{changes: []slideCh{{"1", "1", a, "10", "4"}, {"1", "2", b, "5", "1"}}, want: []int64{4, 0, 4, 2}},
			{changes: []slideCh{{"1", "2", b, "5", "1"}}, want: []int64{4, 0}},
		}},
		{"redeliveries by offset", []slideStep{
			{changes: []slideCh{{"1", "10", a, "5", "6"}, {"1", "11", b, "5", "6"}}, want: []int64{6, 0, 12, 1}},
			{changes: []slideCh{{"1", "10", a, "5", "6"}, {"1", "11", b, "5", "6"}, {"1", "12", c, "5", "1"}},
				want: []int64{12, 0, 12, 1, 13, 0}},
			// A second record at a later offset counts: the consumer drops
			// a producer's retry.
			{changes: []slideCh{{"1", "20", a, "5", "6"}}, want: []int64{19, 0}},
			// Another partition's offsets are its own.
			{src: "p:1", changes: []slideCh{{"1", "1", b, "5", "5"}}, want: []int64{24, 0}},
			{changes: []slideCh{{"1", "11", b, "5", "6"}, {"1", "20", a, "5", "6"}}, want: []int64{12, 1, 24, 0}},
		}},
		// The offsets' TTL, compared after each step: renewed when the
		// newest bucket passes a multiple of the span (3), not before.
		{"a window passing a multiple of its span renews the offsets", []slideStep{
			{changes: []slideCh{{"1", "1", a, "10", "1"}}, want: []int64{1, 0}},
			{shorten: true, changes: []slideCh{{"1", "2", b, "11", "1"}}, want: []int64{2, 0}},
			{shorten: true, changes: []slideCh{{"1", "3", c, "12", "1"}}, want: []int64{3, 0}},
		}},
		{"refunds take from the newest bucket back", []slideStep{{windows: []slideWin{{"3", "2", "100", "600"}}, changes: []slideCh{
			{"1", "1", a, "10", "5"}, {"1", "2", b, "11", "7"}, {"1", "3", c, "12", "4"}, {"1", "4", d, "12", "-6"},
			{"1", "5", e, "10", "-1"},
		}, want: []int64{5, 0, 12, 0, 16, 0, 10, 0, 9, 0}}}},
		{"a refund of nothing", []slideStep{
			{changes: []slideCh{{"1", "1", a, "5", "-3"}}, want: []int64{0, 0}},
			{changes: []slideCh{{"1", "2", b, "5", "2"}, {"1", "3", c, "9", "-1"}}, want: []int64{2, 0, 0, 0}},
		}},
		// Amounts are below 2^53, exact in Lua's doubles: a larger one is
		// refused, and takes nothing.
		{"a refund of 2^53 or more is refused", []slideStep{{changes: []slideCh{
			{"1", "1", a, "5", "1"}, {"1", "2", b, "5", "-" + big}, {"1", "3", c, "5", "2"},
		}, want: []int64{1, 0, -1, -1, 3, 0}}}},
		{"a refund clamped at 0", []slideStep{
			{changes: []slideCh{{"1", "1", a, "5", "3"}, {"1", "2", b, "6", "-10"}}, want: []int64{3, 0, 0, 3}},
			{changes: []slideCh{{"1", "3", c, "6", "-1"}, {"1", "4", d, "6", "2"}}, want: []int64{0, 0, 2, 0}},
		}},
		{"saturation at 2^53", []slideStep{
			{windows: []slideWin{{"3", "2", bigLess2, "600"}}, changes: []slideCh{
				{"1", "1", a, "1", bigLess1}, {"1", "2", b, "1", "5"}, {"1", "3", c, "1", "-1"},
				{"1", "4", d, "1", bigLess1}, {"1", "5", d, "1", big},
			}, want: []int64{9007199254740991, 1, 9007199254740996, 0, 9007199254740991, 0, 18014398509481982, 0, -1, -1}},
			{windows: []slideWin{{"3", "2", bigLess2, "600"}}, changes: []slideCh{
				{"1", "5", e, "2", "1"}, {"1", "6", f, "2", "-1"},
			}, want: []int64{9007199254740992, 0, 9007199254740991, 0}},
			{windows: []slideWin{{"3", "2", bigLess2, "600"}}, changes: []slideCh{
				{"1", "7", g, "1", "-2"}, {"1", "8", a, "1", "1"},
			}, want: []int64{9007199254740990, 0, 9007199254740991, 0}},
			{windows: []slideWin{{"2", "0", bigLess1, "600"}}, changes: []slideCh{
				{"1", "9", b, "3", bigLess1}, {"1", "10", c, "4", bigLess1}, {"1", "11", d, "4", "-" + bigLess1},
			}},
		}},
		{"several windows in one call", []slideStep{{
			windows: []slideWin{{"2", "0", "5", "600"}, {"5", "1", "3", "900"}, {"1", "0", "1", "600"}},
			changes: []slideCh{
				{"1", "1", a, "10", "3"}, {"2", "1", a, "10", "3"}, {"1", "2", b, "11", "3"}, {"2", "2", b, "9", "1"},
				{"1", "3", c, "13", "1"},
			},
			want: []int64{3, 0, 3, 1, 6, 1, 4, 0, 1, 0},
		}}},
		{"64 windows", []slideStep{{windows: all, changes: []slideCh{
			{"64", "1", a, "7", "70"}, {"1", "2", b, "7", "1"}, {"64", "3", c, "8", "1"},
		}, want: []int64{70, 1, 1, 1, 71, 0}}}},
		{"512 changes", []slideStep{{changes: many}}},
		{"unusable windows refuse their changes", []slideStep{
			{windows: unusable, changes: unusableChanges,
				want: []int64{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 5, 0}},
		}},
		{"unusable changes are refused one by one", []slideStep{{windows: []slideWin{slideStd, slideStd}, changes: []slideCh{
			{"0", "1", a, "5", "1"}, {"3", "1", a, "5", "1"}, {"abc", "1", a, "5", "1"}, {"-1", "1", a, "5", "1"},
			{"", "1", a, "5", "1"}, {"1", "01", a, "5", "1"}, {"1", "-1", a, "5", "1"}, {"1", "1234567890123456", a, "5", "1"},
			{"1", "", a, "5", "1"}, {"1", "1", "short", "5", "1"}, {"1", "1", "toolongid", "5", "1"}, {"1", "1", a, "05", "1"},
			{"1", "1", a, "1234567890123456", "1"}, {"1", "1", a, "-5", "1"}, {"1", "1", a, "", "1"},
			{"1", "1", a, "5", "0"}, {"1", "1", a, "5", "-0"}, {"1", "1", a, "5", "-"}, {"1", "1", a, "5", ""},
			{"1", "1", a, "5", "--5"}, {"1", "1", a, "5", "05"}, {"1", "1", a, "5", "1234567890123456789"},
			{"1", "1", a, "5", "-1234567890123456789"}, {"1", "1", a, "5", "+5"}, {"1", "1", a, "5", "5a"},
			// A window's index is digits, as every number: "+2" and "1.0"
			// are none.
			{"+2", "7", b, "5", "4"}, {"1.0", "8", c, "15", "3"}, {"1", "9", d, "1", "-3"},
		}, want: []int64{
			-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
			-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
			-1, -1, -1, -1, 0, 0,
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			for _, st := range tc.steps {
				st.run(p)
			}
		})
	}
}

func TestSlideAndCheckRefusesCalls(t *testing.T) {
	p := newPair(t)
	one := slideKeysOf(p, "1")
	change := []string{"1", "1", "aaaaaaaa", "5", "1"}
	with := func(head ...string) []string { return append(head, change...) }
	var tooMany []string
	for i := range 513 {
		tooMany = append(tooMany, "1", strconv.Itoa(i), "aaaaaaaa", "5", "1")
	}
	var keys65 []string
	var wins65 []string
	for i := range 65 {
		keys65 = append(keys65, slideKeysOf(p, strconv.Itoa(i))...)
		wins65 = append(wins65, "3", "2", "10", "600")
	}
	for _, tc := range []struct {
		keys []string
		args []string
	}{
		{one, nil},
		{one, []string{"p:0"}},
		{one, []string{"p:0", "600"}},
		{one, with("", "600", "1", "3", "2", "10", "600")},
		{one, with("p0", "600", "1", "3", "2", "10", "600")},
		{one, with("p:"+strings.Repeat("x", 31), "600", "1", "3", "2", "10", "600")},
		{one, with("p:0", "0", "1", "3", "2", "10", "600")},
		{one, with("p:0", "0600", "1", "3", "2", "10", "600")},
		{one, with("p:0", "12345678901", "1", "3", "2", "10", "600")},
		{one, with("p:0", "600", "0", "3", "2", "10", "600")},
		{one, with("p:0", "600", "01", "3", "2", "10", "600")},
		{one, with("p:0", "600", "100", "3", "2", "10", "600")},
		{one, with("p:0", "600", "2", "3", "2", "10", "600", "3", "2", "10", "600")},
		{one[:1], with("p:0", "600", "1", "3", "2", "10", "600")},
		{keys65, append(append([]string{"p:0", "600", "65"}, wins65...), change...)},
		{one, []string{"p:0", "600", "1", "3", "2", "10", "600"}},
		{one, with("p:0", "600", "1", "3", "2", "10", "600", "extra")},
		{one, append([]string{"p:0", "600", "1", "3", "2", "10", "600"}, change[:4]...)},
		{one, append([]string{"p:0", "600", "1", "3", "2", "10", "600"}, tooMany...)},
	} {
		got := p.call(lua.SlideAndCheckName, tc.keys, tc.args...)
		if fmt.Sprint(got) != "[-1 -1]" {
			t.Errorf("args %.80q: got %v, want [-1 -1]", tc.args, got)
		}
	}
	// A 32-byte source is one.
	p.call(lua.SlideAndCheckName, one, with("p:"+strings.Repeat("x", 30), "600", "1", "3", "2", "10", "600")...)
}

// What the script does with a hash or marks it did not write itself.
func TestSlideAndCheckForeignState(t *testing.T) {
	const a, b, c, d, e = "aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd", "eeeeeeee"
	t.Run("bucket fields with leading zeros, another source, no k", func(t *testing.T) {
		p := newPair(t)
		win := []slideWin{{"5", "2", "10", "600"}}
		slideSeed(p, p.key("w1"), "k", "10", "007", "4", "9", "2", "x:y", "7", "r", "zzzzzzzz", "note", "1")
		slideStep{windows: win, changes: []slideCh{{"1", "1", a, "10", "1"}, {"1", "2", b, "7", "3"}},
			want: []int64{7, 0, 10, 1}}.run(p)
		slideSeed(p, p.key("w2"), "3", "5", "4", "abc", "05", "1")
		slideStep{src: "p:1", windows: []slideWin{slideStd, slideStd}, changes: []slideCh{
			{"2", "1", a, "4", "1"}, {"2", "2", b, "5", "2"}, {"2", "3", c, "9", "1"},
		}, want: []int64{1, 0, 3, 0, 1, 0}}.run(p)
	})
	t.Run("the old layout's offset and latest ids", func(t *testing.T) {
		p := newPair(t)
		slideSeed(p, p.key("w1"), "k", "5", "5", "4", "p:0", "5", "p:1", "2", "r", "zzzzzzzz")
		slideStep{changes: []slideCh{{"1", "4", a, "5", "1"}, {"1", "5", b, "5", "1"}}, want: []int64{4, 0, 4, 0}}.run(p)
		slideStep{changes: []slideCh{{"1", "5", b, "5", "1"}, {"1", "6", c, "5", "1"}}, want: []int64{4, 0, 5, 0}}.run(p)
		slideStep{src: "p:1", changes: []slideCh{{"1", "1", d, "5", "1"}, {"1", "3", e, "5", "1"}}, want: []int64{5, 0, 6, 0}}.run(p)
	})
	t.Run("numbers with a fraction or an exponent", func(t *testing.T) {
		p := newPair(t)
		slideSeed(p, p.key("w1"), "k", "7.5", "5", "3", "6", "2.5", "7", "1e1")
		slideStep{changes: []slideCh{{"1", "1", a, "8", "1"}, {"1", "2", b, "9", "1"}}, want: []int64{16, 0, 15, 0}}.run(p)
	})
	t.Run("a mark that is not a number answers the value", func(t *testing.T) {
		p := newPair(t)
		calls := []slideCh{{"1", "1", d, "5", "1"}, {"1", "2", c, "5", "1"}, {"1", "3", a, "5", "20"}}
		slideStep{src: "q:1", changes: calls, want: []int64{1, 0, 2, 0, 22, 1}}.run(p)
		slideSeed(p, p.key("w1:crossed"), c, "abc", d, "12")
		slideStep{src: "q:1", changes: calls, want: []int64{12, 1, 22, 0, 22, 1}}.run(p)
	})
}

// Where the script's answer follows an order the model does not know, the
// model refuses the call rather than answer otherwise.
func TestSlideAndCheckRefusesWhatItCannotFollow(t *testing.T) {
	keys := argv{"o", "w", "m"}
	args := argv(packText(lua.SlideAndCheckName, keys, slideArgs("p:0", []slideWin{slideStd}, []slideCh{{"1", "1", "aaaaaaaa", "3", "1"}})))
	for _, tc := range []struct {
		fields []string
		want   error
	}{
		// 2^53 + 2 + 1 in some order is 2^53 + 2, in another 2^53 + 4.
		{[]string{"k", "3", "1", "9007199254740992", "2", "2", "3", "1"}, errTotalOrder},
		{[]string{"k", "3", "1", "9007199254740992", "2", "9007199254740992", "3", "9007199254740992"}, nil},
		{[]string{"k", "3", "1", "9007199254740992", "2", "1"}, nil},
		{[]string{"k", "3", "2", "4", "002", "5"}, errBucketsCollide},
		{[]string{"k", "3", "2", "abc", "002", "5"}, errBucketsCollide},
		{[]string{"k", "3", "2", "5", "002", "5"}, nil},
	} {
		s := New(time.Now())
		if err := s.hset("w", tc.fields...); err != nil {
			t.Fatal(err)
		}
		if _, err := slideAndCheck(s, keys, args); !errors.Is(err, tc.want) {
			t.Errorf("hash %q: error %v, want %v", tc.fields, err, tc.want)
		}
	}
}

// TestSlideAndCheckRandomly runs random calls, mostly usable, over windows
// whose buckets collide and come out of order, and whose state the calls
// share.
func TestSlideAndCheckRandomly(t *testing.T) {
	badWin := []func(w *slideWin){
		func(w *slideWin) { w[0] = "0" },
		func(w *slideWin) { w[0] = "1001" },
		func(w *slideWin) { w[1] = "4001" },
		func(w *slideWin) { w[1] = "-1" },
		func(w *slideWin) { w[2] = "0" },
		func(w *slideWin) { w[2] = "05" },
		func(w *slideWin) { w[3] = "0" },
	}
	badChange := []func(c *slideCh, n int){
		func(c *slideCh, n int) { c[0] = strconv.Itoa(n + 1) },
		func(c *slideCh, _ int) { c[0] = "0" },
		func(c *slideCh, _ int) { c[0] = "y" },
		func(c *slideCh, _ int) { c[1] = "-" + c[1] },
		func(c *slideCh, _ int) { c[1] = "0" + c[1] },
		func(c *slideCh, _ int) { c[2] = c[2][:7] },
		func(c *slideCh, _ int) { c[3] = "0" + c[3] },
		func(c *slideCh, _ int) { c[3] = "" },
		func(c *slideCh, _ int) { c[4] = "0" },
		func(c *slideCh, _ int) { c[4] = "-0" },
		func(c *slideCh, _ int) { c[4] = "--" + c[4] },
	}
	badCall := []func(keys, args []string) ([]string, []string){
		func(keys, args []string) ([]string, []string) { args[0] = "p0"; return keys, args },
		func(keys, args []string) ([]string, []string) { args[1] = "0"; return keys, args },
		func(keys, args []string) ([]string, []string) { return keys[1:], args },
		func(keys, args []string) ([]string, []string) { return keys, args[:len(args)-1] },
	}
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newPair(t)
			r := rand.New(rand.NewPCG(seed, 4))
			// Three windows; a call names some of them, in any order.
			wins := make([]slideWin, 3)
			pick := func(i int) {
				wins[i] = slideWin{strconv.Itoa(1 + r.IntN(10)), strconv.Itoa(r.IntN(6)), strconv.Itoa(1 + r.IntN(50)),
					[]string{"600", "900"}[r.IntN(2)]}
			}
			for i := range wins {
				pick(i)
			}
			offsets := map[string]int{}
			base := 20 + r.IntN(10) // the group's time, in buckets
			var all []slideCh
			for range 20 {
				for i := range wins {
					if r.IntN(12) == 0 { // a rule changed
						pick(i)
					}
				}
				order := r.Perm(3)[:1+r.IntN(3)]
				names := make([]string, len(order))
				ws := make([]slideWin, len(order))
				for i, w := range order {
					names[i], ws[i] = strconv.Itoa(w), wins[w]
					if r.IntN(20) == 0 {
						badWin[r.IntN(len(badWin))](&ws[i])
					}
				}
				src := []string{"p:0", "p:1"}[r.IntN(2)]
				base += r.IntN(3)
				var changes []slideCh
				for range 1 + r.IntN(6) {
					var c slideCh
					if len(all) > 0 && r.IntN(10) == 0 {
						c = all[r.IntN(len(all))] // a redelivery, as it was
					} else {
						off := offsets[src] + 1
						if r.IntN(6) == 0 {
							off = max(off-1-r.IntN(4), 0) // from an older offset
						}
						offsets[src] = max(offsets[src], off)
						id := slideIDs[r.IntN(len(slideIDs))]
						if r.IntN(4) == 0 {
							id = fmt.Sprintf("%08x", r.Uint32())
						}
						amount := strconv.Itoa(1 + r.IntN(20))
						if r.IntN(4) == 0 {
							amount = "-" + strconv.Itoa(1+r.IntN(30))
						}
						c = slideCh{strconv.Itoa(1 + r.IntN(len(ws))), strconv.Itoa(off), id,
							strconv.Itoa(max(base-r.IntN(16)+r.IntN(3), 0)), amount}
						all = append(all, c)
					}
					if r.IntN(15) == 0 {
						badChange[r.IntN(len(badChange))](&c, len(ws))
					}
					changes = append(changes, c)
				}
				keys, args := slideKeysOf(p, names...), slideArgs(src, ws, changes)
				if r.IntN(25) == 0 {
					keys, args = badCall[r.IntN(len(badCall))](slices.Clone(keys), slices.Clone(args))
				}
				p.call(lua.SlideAndCheckName, keys, args...)
			}
		})
	}
}

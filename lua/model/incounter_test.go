package model

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// seedValue writes value, a string, at the pair's key name in both, in
// place of what was there, with ttl (none when 0): a fixed window's
// counter of the version before ("<count>", or "<count>" RS entry ...), or
// a value written by another.
func seedValue(p *pair, name, value string, ttl time.Duration) {
	p.t.Helper()
	key, ctx := p.key(name), p.t.Context()
	p.used[key] = true
	if err := p.rdb.Set(ctx, key, value, ttl).Err(); err != nil {
		p.t.Fatal(err)
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.del(key)
	if ttl > 0 {
		p.st.setEx(key, value, ttl)
	} else {
		p.st.keys[key] = &entry{kind: kindString, str: value}
	}
}

// seedHash writes a hash of field-value pairs at the pair's key name in
// both, in place of what was there, with ttl (none when 0): a counter, or
// a hash written by another.
func seedHash(p *pair, name string, ttl time.Duration, pairs ...string) {
	p.t.Helper()
	key, ctx := p.key(name), p.t.Context()
	p.used[key] = true
	p.rdb.Del(ctx, key)
	anyPairs := make([]any, len(pairs))
	for i, s := range pairs {
		anyPairs[i] = s
	}
	if err := p.rdb.HSet(ctx, key, anyPairs...).Err(); err != nil {
		p.t.Fatal(err)
	}
	if ttl > 0 {
		p.rdb.Expire(ctx, key, ttl)
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.del(key)
	if err := p.st.hset(key, pairs...); err != nil {
		p.t.Fatal(err)
	}
	if ttl > 0 {
		p.st.expire(key, ttl)
	}
}

// hashOf is a hash of field-value pairs as counterText prints it.
func hashOf(pairs ...string) string {
	h := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h[pairs[i]] = pairs[i+1]
	}
	return "hash " + hashText(h)
}

// counterText is what Redis holds at the pair's key name: "hash " and its
// fields (hashText), "string " and its value, or its type.
func counterText(p *pair, name string) string {
	ctx, key := p.t.Context(), p.key(name)
	switch typ := p.rdb.Type(ctx, key).Val(); typ {
	case "hash":
		return "hash " + hashText(p.rdb.HGetAll(ctx, key).Val())
	case "string":
		return "string " + p.rdb.Get(ctx, key).Val()
	default:
		return typ
	}
}

// counterStep is one call on window "w": incr_and_check of one change
// (of offset off, amount by and entry e into a window of threshold th,
// keeping 5 entries from 1), or sales_decr's refund of by at offset off;
// want is its reply and value the window after it, as counterText prints
// it ("": not checked).
type counterStep struct {
	sales       bool
	th, off, by int64
	e           string
	want, value string
}

func (s counterStep) run(p *pair) {
	p.t.Helper()
	keys := []string{p.key("o"), p.key("w"), p.key("w:crossed")}
	var got any
	if s.sales {
		got = p.call(lua.SalesDecrName, keys[:2], "r:0", "600", "1", fmt.Sprint(s.off), ids[6], fmt.Sprint(s.by))
	} else {
		ws := []entryWindow{{600, s.th, 1, 5}}
		cs := []entryChange{{window: 1, offset: s.off, inc: s.by, id: ids[s.off%int64(len(ids))], entry: s.e}}
		got = p.raw(lua.IncrAndCheckName, keys, packEntryCall("p:0", ws, cs, true)...)
	}
	what := fmt.Sprintf("%+v", s)
	if s.want != "" && fmt.Sprint(got) != s.want {
		p.t.Fatalf("%s: reply %v, want %s", what, got, s.want)
	}
	if v := counterText(p, "w"); s.value != "" && v != s.value {
		p.t.Fatalf("%s: the window holds %q, want %q", what, v, s.value)
	}
}

// windowTTL checks the window's TTL in Redis after a case: "none", "kept"
// (what its seed had, 300 s, less the time since) or "length" (EXPIRE 600
// since).
func windowTTL(p *pair, want string) {
	p.t.Helper()
	ttl := p.rdb.PTTL(p.t.Context(), p.key("w")).Val()
	var ok bool
	switch want {
	case "none":
		ok = ttl == -1
	case "kept":
		ok = ttl > 290*time.Second && ttl <= 300*time.Second
	case "length":
		ok = ttl > 590*time.Second && ttl <= 600*time.Second
	default:
		ok = true
	}
	if !ok {
		p.t.Fatalf("the window's TTL is %v, want %s", ttl, want)
	}
}

// upgradeCase is a window that starts as a string counter of the version
// before, seed with ttl (none when 0), and the calls on it: after them its
// TTL is ttlNow (windowTTL's want). applied: the offsets hold offset 10 of
// p:0 (incr_and_check's) and of r:0 (sales_decr's), so that offsets to 10
// are redeliveries.
type upgradeCase struct {
	name    string
	seed    string
	ttl     time.Duration
	applied bool
	steps   []counterStep
	ttlNow  string
}

func runUpgradeCases(t *testing.T, cases []upgradeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			seedValue(p, "w", tc.seed, tc.ttl)
			if tc.applied {
				seedHash(p, "o", 600*time.Second, "c:p:0", "10", "r:r:0", "10")
			}
			for _, s := range tc.steps {
				s.run(p)
			}
			windowTTL(p, tc.ttlNow)
		})
	}
}

// incrStep and salesStep are counterSteps: an incr_and_check change into
// a window of threshold th, a sales_decr refund.
func incrStep(th, off, by int64, e, want, value string) counterStep {
	return counterStep{th: th, off: off, by: by, e: e, want: want, value: value}
}

func salesStep(off, by int64, want, value string) counterStep {
	return counterStep{sales: true, off: off, by: by, want: want, value: value}
}

// A counter of the version before, a string ("<count>", or "<count>" RS
// entry ...), goes into the hash at its next change: its count into field
// c, its end kept, its entries dropped; a change applied before reads its
// count and leaves it. A persistent one starts again at its threshold.
func TestUpgradingAStringCounter(t *testing.T) {
	incr := incrStep
	runUpgradeCases(t, []upgradeCase{
		{"a count, with a TTL", "5", 300 * time.Second, false, []counterStep{
			incr(7, 1, 1, "a", "[6 0]", hashOf("c", "6", "6", "a")),
			incr(7, 2, 1, "b", "[7 1]", hashOf("c", "7", "6", "a", "7", "b")),
		}, "kept"},
		{"a count and entries, with a TTL: its entries dropped", "5\x1eold1\x1eold2", 300 * time.Second, false, []counterStep{
			incr(7, 1, 1, "a", "[6 0]", hashOf("c", "6", "6", "a")),
		}, "kept"},
		{"a count and no entries yet", "5\x1e", 300 * time.Second, false, []counterStep{
			incr(9, 1, 1, "a", "[6 0]", hashOf("c", "6", "6", "a")),
		}, "kept"},
		{"a count without a TTL: counted, then started again at its threshold", "5", 0, false, []counterStep{
			incr(7, 1, 1, "a", "[6 0]", hashOf("c", "6", "6", "a")),
			incr(7, 2, 1, "b", "[1 0]", hashOf("c", "1", "1", "b")),
		}, "length"},
		{"a count and entries without a TTL, at its threshold: started again", "5\x1ea\x1eb", 0, false, []counterStep{
			incr(7, 1, 2, "x", "[2 0]", hashOf("c", "2", "2", "x")),
		}, "length"},
		{"a count of 0 without a TTL gets its length", "0\x1ea", 0, false, []counterStep{
			incr(7, 1, 2, "x", "[2 0]", hashOf("c", "2", "2", "x")),
		}, "length"},
		{"redelivered while a string: its count, the string left", "5\x1ea", 300 * time.Second, true, []counterStep{
			incr(7, 3, 1, "x", "[5 0]", "string 5\x1ea"),
			incr(7, 11, 1, "y", "[6 0]", hashOf("c", "6", "6", "y")),
			incr(7, 11, 1, "y", "[6 0]", hashOf("c", "6", "6", "y")),
			incr(7, 9, 1, "y", "[6 0]", hashOf("c", "6", "6", "y")),
		}, "kept"},
	})
}

// A refund upgrades a string counter as a change does, redelivered or not;
// a count of up to 2^62 (where the version before saturated) is upgraded,
// and one with a leading zero is unusable and left as it is.
func TestUpgradingAStringCounterAtARefund(t *testing.T) {
	const th53 = 9007199254740991
	incr, sales := incrStep, salesStep
	runUpgradeCases(t, []upgradeCase{
		{"refunded, clamped at 0, counted again", "5\x1ea", 300 * time.Second, false, []counterStep{
			sales(1, 2, "[3 0]", hashOf("c", "3")),
			sales(1, 2, "[3 0]", hashOf("c", "3")), // redelivered
			sales(2, 9, "[0 1]", hashOf("c", "0")),
			sales(3, 1, "[0 0]", hashOf("c", "0")),
			incr(7, 1, 1, "a", "[1 0]", hashOf("c", "1", "1", "a")),
		}, "kept"},
		{"refunded without a TTL", "5", 0, false, []counterStep{
			sales(1, 2, "[3 0]", hashOf("c", "3")),
		}, "none"},
		{"a refund redelivered upgrades it all the same", "5\x1ea", 300 * time.Second, true, []counterStep{
			sales(4, 2, "[5 0]", hashOf("c", "5")),
			sales(11, 2, "[3 0]", hashOf("c", "3")),
		}, "kept"},
		{"15 digits", "999999999999999\x1ea", 300 * time.Second, false, []counterStep{
			incr(th53, 1, 1, "a", "[1000000000000000 0]", hashOf("c", "1000000000000000")),
			sales(1, 1, "[999999999999999 0]", hashOf("c", "999999999999999")),
		}, "kept"},
		{"16 digits", "1000000000000000", 300 * time.Second, true, []counterStep{
			incr(th53, 11, 1, "a", "[1000000000000001 0]", hashOf("c", "1000000000000001")),
			sales(1, 1, "[1000000000000001 0]", hashOf("c", "1000000000000001")), // redelivered
			incr(th53, 5, 1, "a", "[1000000000000001 0]", hashOf("c", "1000000000000001")),
		}, "kept"},
		{"saturated at 2^62 before: upgraded, and stays", "4611686018427387904\x1ea", 300 * time.Second, true, []counterStep{
			incr(th53, 11, 1, "a", "[4611686018427387904 0]", hashOf("c", "4611686018427387904")),
			incr(th53, 5, 1, "a", "[4611686018427387904 0]", ""),
		}, "kept"},
		{"past 2^62: unusable, left", "4611686018427387905", 300 * time.Second, false, []counterStep{
			incr(th53, 1, 1, "a", "[-1 -1]", "string 4611686018427387905"),
			sales(1, 1, "[-1 -1]", "string 4611686018427387905"),
		}, "kept"},
		{"a count with a leading zero: unusable, left", "007\x1ea", 300 * time.Second, false, []counterStep{
			incr(9, 1, 1, "a", "[-1 -1]", "string 007\x1ea"),
			sales(1, 2, "[-1 -1]", "string 007\x1ea"),
		}, "kept"},
	})
}

// A string that holds no count (digits without a leading zero, at most
// 2^62, followed by RS or its end) was written by another: counting and
// refunding it are refused (-1, -1) and write nothing; a redelivery reads
// the digits before RS, or all of it when it is digits, and -1 (unusable)
// when they are no count.
func TestCountingAForeignString(t *testing.T) {
	for _, tc := range []struct{ v, again string }{
		{"x", "[-1 -1]"}, {"z\x1ea", "[-1 -1]"}, {"4611686018427387905\x1ea", "[4611686018427387904 0]"},
		{"007", "[-1 -1]"}, {"\x1ea", "[-1 -1]"}, {"-1\x1ea", "[-1 -1]"}, {"1 \x1ea", "[-1 -1]"},
		{"-3", "[-1 -1]"}, {" 12 ", "[-1 -1]"}, {"1.5", "[-1 -1]"}, {"5a", "[-1 -1]"},
	} {
		t.Run(fmt.Sprintf("%q", tc.v), func(t *testing.T) {
			p := newPair(t)
			seedValue(p, "w", tc.v, 300*time.Second)
			seedHash(p, "o", 600*time.Second, "c:p:0", "10")
			left := "string " + tc.v
			counterStep{th: 9, off: 11, by: 1, e: "a", want: "[-1 -1]", value: left}.run(p)
			counterStep{th: 9, off: 4, by: 1, e: "a", want: tc.again, value: left}.run(p) // redelivered
			counterStep{sales: true, off: 1, by: 1, want: "[-1 -1]", value: left}.run(p)
			windowTTL(p, "kept")
		})
	}
}

// A counter's hash written by another: HINCRBY refuses a c that is no
// integer as Redis writes one, and a redelivery and a refund one that is
// not digits without a leading zero: unusable; a hash without c is counted
// into.
func TestCountingAForeignHash(t *testing.T) {
	incr := func(off int64, want, value string) counterStep {
		return counterStep{th: 50, off: off, by: 10, e: "e", want: want, value: value}
	}
	sales := func(off, by int64, want, value string) counterStep {
		return counterStep{sales: true, off: off, by: by, want: want, value: value}
	}
	for _, tc := range []struct {
		name   string
		fields []string
		ttl    time.Duration
		steps  []counterStep
		ttlNow string
	}{
		{"c not a number", []string{"c", "abc", "4", "x"}, 300 * time.Second, []counterStep{
			incr(11, "[-1 -1]", hashOf("c", "abc", "4", "x")),
			incr(5, "[-1 -1]", ""),
			sales(1, 1, "[-1 -1]", hashOf("c", "abc", "4", "x")),
		}, "kept"},
		{"c a fraction", []string{"c", "1.5"}, 300 * time.Second, []counterStep{
			incr(11, "[-1 -1]", hashOf("c", "1.5")),
			incr(5, "[-1 -1]", ""),
			sales(1, 1, "[-1 -1]", hashOf("c", "1.5")),
		}, "kept"},
		{"c with spaces", []string{"c", " 5"}, 300 * time.Second, []counterStep{
			incr(11, "[-1 -1]", hashOf("c", " 5")),
			incr(5, "[-1 -1]", ""),
			sales(1, 2, "[-1 -1]", hashOf("c", " 5")),
		}, "kept"},
		{"c at the largest integer: HINCRBY overflows", []string{"c", "9223372036854775807"}, 300 * time.Second, []counterStep{
			incr(11, "[-1 -1]", hashOf("c", "9223372036854775807")),
			sales(1, 7, "", hashOf("c", "9223372036854775800")),
		}, "kept"},
		{"c negative", []string{"c", "-25"}, 300 * time.Second, []counterStep{
			incr(11, "[-15 0]", hashOf("c", "-15")),
			sales(1, 2, "[-1 -1]", hashOf("c", "-15")),
			incr(12, "[-5 0]", hashOf("c", "-5")),
			incr(13, "[5 0]", hashOf("c", "5", "5", "e")),
		}, "kept"},
		{"no c, no TTL: counted, given its length", []string{"f", "v"}, 0, []counterStep{
			incr(11, "[10 0]", hashOf("c", "10", "f", "v", "10", "e")),
		}, "length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			seedHash(p, "w", tc.ttl, tc.fields...)
			seedHash(p, "o", 600*time.Second, "c:p:0", "10")
			for _, s := range tc.steps {
				s.run(p)
			}
			windowTTL(p, tc.ttlNow)
		})
	}
}

// Past 2^53 a counter's count is compared exactly (HGET c), marked with
// its digits, and saturates at 2^62; a redelivery reads it as a double;
// a refund subtracts in Redis (HINCRBY) until it is below 2^53, and HINCRBY
// refuses a c in another form tonumber reads past 2^53.
func TestCountingPast2To53(t *testing.T) {
	const th = "9007199254740991" // 2^53 - 1
	p := newPair(t)
	keys := []string{p.key("o"), p.key("w"), p.key("w:crossed")}
	incr := func(from, to int, by string) any {
		args := []string{"p:0", "600", "1", "600", th}
		for o := from; o < to; o++ {
			args = append(args, "1", fmt.Sprint(o), ids[o%len(ids)], by)
		}
		return p.call(lua.IncrAndCheckName, keys, args...)
	}
	if got := fmt.Sprint(incr(1, 2, "9007199254740990")); got != "[9007199254740990 0]" {
		t.Fatalf("below its threshold: %s", got)
	}
	if got := fmt.Sprint(incr(2, 3, "5")); got != "[9007199254740996 1]" { // 2^53 + 3, as a double
		t.Fatalf("crossing past 2^53: %s", got)
	}
	if got := counterText(p, "w:crossed"); got != hashOf(ids[2], "9007199254740995") {
		t.Fatalf("the crossing's mark: %s, want its exact count", got)
	}
	incr(3, 4, "3")  // past, not crossing
	incr(2, 3, "5")  // redelivered: its mark
	incr(4, 520, th) // saturated at 2^62, and again
	if got := counterText(p, "w"); got != hashOf("c", "4611686018427387904") {
		t.Fatalf("saturated: %s", got)
	}
	incr(100, 101, "1") // redelivered: the count read as a double

	refund := func(args ...string) any {
		return p.call(lua.SalesDecrName, keys[:2], append([]string{"r:0", "600"}, args...)...)
	}
	seedHash(p, "w", 300*time.Second, "c", "9007199254740993", "5", "e")
	if got := fmt.Sprint(refund("1", "1", ids[0], "1", "1", "2", ids[1], "1", "1", "3", ids[2], "1", "1", "4", ids[3], "7")); got !=
		"[9007199254740992 0 9007199254740991 0 9007199254740990 0 9007199254740983 0]" {
		t.Fatalf("refunds past 2^53: %s", got)
	}
	if got := counterText(p, "w"); got != hashOf("c", "9007199254740983", "5", "e") {
		t.Fatalf("after the refunds: %s", got)
	}
	seedHash(p, "w", 300*time.Second, "c", "1e20")
	if got := fmt.Sprint(refund("1", "5", ids[4], "1")); got != "[-1 -1]" {
		t.Fatalf("a refund of a c HINCRBY refuses: %s", got)
	}
}

// The same past 2^53 for a window whose rule keeps no evidence, a string:
// compared exactly (GET), saturated by SET KEEPTTL, refunded by INCRBY
// until it is below 2^53; a string INCRBY refuses is unusable.
func TestCountingPast2To53AsAString(t *testing.T) {
	const th = 1<<53 - 1
	p := newPair(t)
	keys := []string{p.key("o"), p.key("w"), p.key("w:crossed")}
	incr := func(from, to int, by int64) string {
		var cs []entryChange
		for o := from; o < to; o++ {
			cs = append(cs, entryChange{window: 1, offset: int64(o), inc: by, id: ids[o%len(ids)]})
		}
		return fmt.Sprint(p.raw(lua.IncrAndCheckName, keys, packEntryCall("p:0", []entryWindow{{600, th, 0, 0}}, cs, false)...))
	}
	if got := incr(1, 2, th-1); got != "[9007199254740990 0]" {
		t.Fatalf("below its threshold: %s", got)
	}
	if got := incr(2, 3, 5); got != "[9007199254740996 1]" {
		t.Fatalf("crossing past 2^53: %s", got)
	}
	incr(2, 3, 5)    // redelivered: its mark
	incr(4, 520, th) // saturated at 2^62, and again
	if got := counterText(p, "w"); got != "string 4611686018427387904" {
		t.Fatalf("saturated: %s", got)
	}
	incr(100, 101, 1) // redelivered: the count read as a double

	refund := func(amounts ...int64) string {
		b := append(binary.LittleEndian.AppendUint32(nil, 600), 1, 0)
		for k, a := range amounts {
			b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(k+1))
			b = binary.LittleEndian.AppendUint64(append(b, ids[k%len(ids)]...), uint64(a))
		}
		return fmt.Sprint(p.raw(lua.SalesDecrName, keys[:2], "r:"+fmt.Sprint(len(amounts)), string(b)))
	}
	seedValue(p, "w", "9007199254740993", 300*time.Second)
	if got := refund(1, 1, 1, 7); got != "[9007199254740992 0 9007199254740991 0 9007199254740990 0 9007199254740983 0]" {
		t.Fatalf("refunds past 2^53: %s", got)
	}
	if got := counterText(p, "w"); got != "string 9007199254740983" {
		t.Fatalf("after the refunds: %s", got)
	}
	seedValue(p, "w", "99999999999999999999", 300*time.Second)
	if got := refund(5); got != "[-1 -1]" {
		t.Fatalf("a refund of a string INCRBY refuses: %s", got)
	}
}

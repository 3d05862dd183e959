package model

import (
	"fmt"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// seedValue writes value at the pair's key name in both, with ttl (none
// when 0): a fixed window's counter as evidence_add leaves it, or a value
// written by another.
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
		p.st.setKeepTTL(key, value)
	}
}

// A fixed window that keeps evidence holds it after its count ("<count>"
// RS entries): incr_and_check and sales_decr count it, keep its entries
// and its end, and read its count on a redelivery; past 2^53 the entries
// go; a value that is not a count before RS is unusable, as any other
// non-integer.
func TestCountingAWindowWithEvidence(t *testing.T) {
	const ev = "\x1ea\x1eb"
	const edge = "\x1e1700000000000:order-00000000000000000000001" // 44 bytes: "9" and it make 45
	const long = "\x1e1700000000000:order-00000000000000000001\x1e1700000000001:order-00000000000000000002"
	type step struct {
		script string // lua.IncrAndCheckName or lua.SalesDecrName
		args   []string
		want   string // the reply, as fmt.Sprint prints it ("": not checked)
		value  string // the window's value after it ("": not checked)
	}
	// incr counts one event of offset off, id and amount into window w
	// of threshold th; sales refunds amount from it.
	incr := func(th, off, id, amount, want, value string) step {
		return step{lua.IncrAndCheckName, []string{"p:0", "600", "1", "600", th, "1", off, id, amount}, want, value}
	}
	// many counts events of offsets from..to-1, each of amount, in one call.
	many := func(th string, from, to int, amount, value string) step {
		args := []string{"p:0", "600", "1", "600", th}
		for o := from; o < to; o++ {
			args = append(args, "1", fmt.Sprint(o), ids[o%len(ids)], amount)
		}
		return step{lua.IncrAndCheckName, args, "", value}
	}
	sales := func(off, amount, want, value string) step {
		return step{lua.SalesDecrName, []string{"r:0", "600", "1", off, ids[6], amount}, want, value}
	}
	for _, tc := range []struct {
		name  string
		seed  string
		ttl   time.Duration
		steps []step
	}{
		{"counted, then crossing", "5" + ev, 300 * time.Second, []step{
			incr("7", "1", ids[0], "1", "[6 0]", "6"+ev),
			incr("7", "2", ids[1], "1", "[7 1]", "7"+ev),
			incr("7", "3", ids[2], "3", "[10 0]", "10"+ev),
		}},
		{"redelivered: the count before RS", "5" + ev, 300 * time.Second, []step{
			incr("9", "4", ids[0], "1", "[6 0]", "6"+ev),
			incr("9", "4", ids[1], "1", "[6 0]", "6"+ev),
			incr("9", "3", ids[2], "1", "[6 0]", "6"+ev),
		}},
		{"refunded, clamped at 0, counted again", "5" + ev, 300 * time.Second, []step{
			sales("1", "2", "[3 0]", "3"+ev),
			sales("1", "2", "[3 0]", "3"+ev), // redelivered
			sales("2", "9", "[0 1]", "0"+ev),
			sales("3", "1", "[0 0]", "0"+ev),
			incr("7", "1", ids[0], "1", "[1 0]", "1"+ev),
		}},
		{"past 2^53 the entries go, then saturated at 2^62", "999999999999999" + ev, 300 * time.Second, []step{
			incr("9007199254740991", "1", ids[0], "9007199254740990", "[10007199254740988 1]", "10007199254740989"), // replied as a double
			many("9007199254740991", 2, 520, "9007199254740991", "4611686018427387904"),
		}},
		{"past 15 digits the entries go", "999999999999998" + ev, 300 * time.Second, []step{
			incr("9007199254740991", "1", ids[0], "1", "[999999999999999 0]", "999999999999999"+ev),
			incr("9007199254740991", "2", ids[1], "1", "[1000000000000000 0]", "1000000000000000"),
			incr("9007199254740991", "3", ids[2], "1", "[1000000000000001 0]", "1000000000000001"),
		}},
		// A value past the head read (45 bytes): the count is written
		// over in place, or, when it gains a digit, before the entries.
		{"45 bytes, a count gaining a digit", "9" + edge, 300 * time.Second, []step{
			incr("99", "1", ids[0], "1", "[10 0]", "10"+edge),
			incr("99", "2", ids[1], "1", "[11 0]", "11"+edge),
		}},
		{"44 bytes, all in hand", "9" + edge[:len(edge)-1], 300 * time.Second, []step{
			incr("99", "1", ids[0], "1", "[10 0]", "10"+edge[:len(edge)-1]),
			incr("99", "2", ids[1], "1", "[11 0]", "11"+edge[:len(edge)-1]),
		}},
		{"long entries, a count written over and gaining a digit", "8" + long, 300 * time.Second, []step{
			incr("99", "1", ids[0], "1", "[9 0]", "9"+long),
			incr("99", "2", ids[1], "1", "[10 0]", "10"+long),
			incr("99", "3", ids[2], "1", "[11 0]", "11"+long),
			sales("1", "2", "[9 0]", "9"+long),
		}},
		{"a persistent window starts again without its evidence", "5" + ev, 0, []step{
			incr("7", "1", ids[0], "2", "[2 0]", "2"),
		}},
		{"a count of 0 without a TTL gets its length and keeps its evidence", "0" + ev, 0, []step{
			incr("7", "1", ids[0], "2", "[2 0]", "2"+ev),
		}},
		// No evidence after it: INCRBY takes it, read first or not.
		{"an integer of 20 characters, written by another", "-9223372036854775808", 300 * time.Second, []step{
			incr("9", "1", ids[0], "1", "", ""),
		}},
		{"a count with no entries yet", "5\x1e", 300 * time.Second, []step{
			incr("9", "1", ids[0], "1", "[6 0]", "6\x1e"),
			sales("1", "1", "[5 0]", "5\x1e"),
		}},
	} {
		// Each case twice: the window's rule keeping evidence (its counter
		// measured before INCRBY), and not keeping it (its evidence turned
		// off while the counter holds some: INCRBY is refused).
		for _, keeps := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, keeps %v", tc.name, keeps), func(t *testing.T) {
				p := newPair(t)
				seedValue(p, "w", tc.seed, tc.ttl)
				for _, s := range tc.steps {
					keys := []string{p.key("o"), p.key("w"), p.key("w:crossed")}
					if s.script == lua.SalesDecrName {
						keys = keys[:2]
					}
					args := packText(s.script, keys, s.args)
					if s.script == lua.IncrAndCheckName && !keeps {
						args = withoutEvidence(args)
					}
					if got := fmt.Sprint(p.raw(s.script, keys, args...)); s.want != "" && got != s.want {
						t.Fatalf("%s %q: %s, want %s", s.script, s.args, got, s.want)
					}
					if v := p.rdb.Get(t.Context(), p.key("w")).Val(); s.value != "" && v != s.value {
						t.Fatalf("%s %q: the window holds %q, want %q", s.script, s.args, v, s.value)
					}
				}
			})
		}
	}
}

// withoutEvidence is incr_and_check's packed arguments with every
// window's flag cleared: its rule keeps no evidence.
func withoutEvidence(args []string) []string {
	b := []byte(args[1])
	for i := range int(b[4]) {
		if at := 5 + 13*i + 12; at < len(b) {
			b[at] = 0
		}
	}
	return []string{args[0], string(b)}
}

// A value with RS that is not a count of 1 to 15 digits before it was
// written by another: counting and refunding it are refused (-1, -1) and
// write nothing; a redelivery reads the digits before RS, if any.
func TestCountingAForeignValueWithRS(t *testing.T) {
	for _, v := range []string{"z\x1ea", "01\x1ea", "1234567890123456\x1ea", "\x1ea", "-1\x1ea", "1 \x1ea"} {
		t.Run(fmt.Sprintf("%q", v), func(t *testing.T) {
			p := newPair(t)
			seedValue(p, "w", v, 300*time.Second)
			keys := []string{p.key("o"), p.key("w"), p.key("w:crossed")}
			if got := fmt.Sprint(p.call(lua.IncrAndCheckName, keys, "p:0", "600", "1", "600", "9", "1", "5", ids[0], "1")); got != "[-1 -1]" {
				t.Fatalf("incr_and_check: %s, want [-1 -1]", got)
			}
			p.call(lua.IncrAndCheckName, keys, "p:0", "600", "1", "600", "9", "1", "4", ids[1], "1") // redelivered
			if got := fmt.Sprint(p.call(lua.SalesDecrName, keys[:2], "r:0", "600", "1", "1", ids[2], "1")); got != "[-1 -1]" {
				t.Fatalf("sales_decr: %s, want [-1 -1]", got)
			}
			if got := p.rdb.Get(t.Context(), p.key("w")).Val(); got != v {
				t.Fatalf("the window holds %q, want %q untouched", got, v)
			}
		})
	}
}

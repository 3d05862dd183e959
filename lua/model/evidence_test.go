package model

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/lua"
)

// withEvidence is a counting call built without evidence given some: a
// random few of its windows keep evidence (their key beside the window's,
// ":l"), and every change an evidence text, its window's when it keeps,
// else ”. Now and then an argument is unusable. A call whose changes do
// not fill their arguments is left as it is.
func withEvidence(r *rand.Rand, keys, args []string, keysPer, argsPer, changeArgs int) ([]string, []string) {
	n, err := strconv.Atoi(args[2])
	first := 3 + argsPer*n // the first change, from 0
	if err != nil || n < 1 || len(keys) != keysPer*n+1 || len(args) < first || (len(args)-first)%changeArgs != 0 {
		return keys, args
	}
	keys = append([]string(nil), keys...)
	var triples []string
	keeps := map[string]bool{}
	for i := 1; i <= n; i++ {
		if r.IntN(2) == 0 {
			continue
		}
		keys = append(keys, keys[1+keysPer*(i-1)]+":l")
		keep, from := strconv.Itoa(1+r.IntN(5)), strconv.Itoa(1+r.IntN(4))
		if r.IntN(40) == 0 {
			keep = []string{"0", "21", "x"}[r.IntN(3)]
		}
		triples = append(triples, strconv.Itoa(i), keep, from)
		keeps[strconv.Itoa(i)] = true
	}
	if len(triples) == 0 {
		return keys, args
	}
	out := append(append([]string(nil), args[:first]...), triples...)
	for c := first; c < len(args); c += changeArgs {
		out = append(out, args[c:c+changeArgs]...)
		text := ""
		if keeps[args[c]] {
			text = "1\x1f" + strconv.Itoa(r.IntN(100)) + "\x1f\x1f" + args[c+2] + "\x1fo\x1f"
			switch r.IntN(40) {
			case 0:
				text += "\x1e"
			case 1:
				text = strings.Repeat("x", 513)
			case 2:
				text = "no place for the value"
			}
		}
		out = append(out, text)
	}
	return keys, out
}

// ints is a counting call's integers, its evidence's strings left out.
func ints(reply any) []int64 {
	switch v := reply.(type) {
	case []int64:
		return v
	case []any:
		var out []int64
		for _, x := range v {
			if n, ok := x.(int64); ok {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// The evidence the counting scripts keep, step by step, on one window:
// its entries, its life (the window's, kept, or its length without a
// TTL on the window), values of another type replaced, and a crossing's
// list in the reply.
func TestEvidenceAsTheScripts(t *testing.T) {
	p := newPair(t)
	keys := []string{p.key("o"), p.key("w"), p.key("w:crossed"), p.key("w:l")}
	off := 0
	call := func(threshold string, ids ...string) any {
		args := []string{"p:0", "600", "1", "600", threshold, "1", "3", "2"}
		for _, id := range ids {
			off++
			args = append(args, "1", strconv.Itoa(off), id, "1", "1\x1f1\x1f\x1f"+id+"\x1fo\x1f")
		}
		return p.call(lua.IncrAndCheckName, keys, args...)
	}
	call("4", ids[0])                                                           // below from: none kept
	if reply, _ := call("4", ids[1], ids[2], ids[3]).([]any); len(reply) != 7 { // 2, 3 kept, the crossing answers its list
		t.Fatalf("reply %q, want 3 pairs and a list", reply)
	}
	call("4", ids[4]) // past the threshold: none
	p.rdb.Persist(p.t.Context(), p.key("w"))
	p.st.mu.Lock()
	p.st.keys[p.key("w")].ttl = false
	p.st.mu.Unlock()
	call("9", ids[5], ids[6]) // a window without a TTL: its evidence keeps its own
	foreign(p, "w:l", "hash")
	call("9", ids[0]) // replaced
	foreign(p, "w:l", "string")
	p.rdb.Del(p.t.Context(), p.key("w"))
	p.st.mu.Lock()
	p.st.del(p.key("w"))
	p.st.mu.Unlock()
	call("3", ids[1], ids[2], ids[3]) // a new window, evidence of another form before it
}

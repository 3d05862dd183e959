package model

import (
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// The four counting scripts share a bucket's offsets, each call with the
// life of its own windows: a call never shortens the TTL another call gave
// them, and a hash without one gets one. Each call below writes a new
// field, so each gives the offsets its life.
func TestOffsetsLifeIsNeverShortened(t *testing.T) {
	const a = "aaaaaaaa"
	// Each script's call, with the offsets' life it carries.
	incr := func(length string) func(p *pair) {
		return func(p *pair) {
			p.call(lua.IncrAndCheckName, []string{p.key("o"), p.key("f"), p.key("f:crossed")},
				"p:0", "600", "1", length, "5", "1", "1", a, "1")
		}
	}
	refund := func(life string) func(p *pair) {
		return func(p *pair) {
			p.call(lua.SalesDecrName, []string{p.key("o"), p.key("f")}, "r:0", life, "1", "1", a, "1")
		}
	}
	slide := func(ttl string) func(p *pair) {
		return func(p *pair) {
			p.call(lua.SlideAndCheckName, slideKeysOf(p, "1"),
				slideArgs("p:0", []slideWin{{"3", "2", "10", ttl}}, []slideCh{{"1", "1", a, "5", "1"}})...)
		}
	}
	distinct := func(ttl string) func(p *pair) {
		return func(p *pair) {
			p.call(lua.DistinctAndCheckName, distinctKeysOf(p, 0),
				distinctArgs("p:0", []dwin{{"fixed", "600000", "0", "3", ttl}}, "1", "1", a, "1", "v")...)
		}
	}
	persist := func(p *pair) {
		if err := p.rdb.Persist(p.t.Context(), p.key("o")).Err(); err != nil {
			p.t.Fatal(err)
		}
		p.st.mu.Lock()
		p.st.keys[p.key("o")].ttl = false
		p.st.mu.Unlock()
	}
	for _, tc := range []struct {
		name  string
		steps []func(p *pair)
		want  int64 // the offsets' TTL at the end, seconds
	}{
		{"a long sliding window, then a short fixed one", []func(p *pair){slide("900"), incr("60")}, 900},
		{"a long fixed window, then a refund and a short sliding window",
			[]func(p *pair){incr("1200"), refund("300"), slide("600")}, 1200},
		{"a long distinct window, then each of the others",
			[]func(p *pair){distinct("1500"), incr("60"), slide("900"), refund("300")}, 1500},
		{"a shorter life, then a longer one: lengthened", []func(p *pair){incr("60"), slide("900")}, 900},
		{"a hash without a TTL gets one", []func(p *pair){incr("60"), persist, slide("700")}, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			for _, step := range tc.steps {
				step(p)
			}
			p.st.mu.Lock()
			got := p.st.ttlSeconds(p.key("o"))
			p.st.mu.Unlock()
			if got != tc.want {
				t.Fatalf("the offsets' TTL is %d s, want %d s", got, tc.want)
			}
			if real := p.rdb.TTL(t.Context(), p.key("o")).Val(); real <= time.Duration(tc.want-5)*time.Second {
				t.Fatalf("Redis has the offsets' TTL %v, want %d s", real, tc.want)
			}
		})
	}
}

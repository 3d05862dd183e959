package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// pair runs every call on a real Redis, with the scripts themselves, and on
// a Store, and fails the test where the replies or the keys they leave
// differ.
type pair struct {
	t      *testing.T
	rdb    redis.UniversalClient
	st     *Store
	prefix string // every key's: one hash tag, so that a call's keys share a slot
	start  time.Time
	// used are the keys calls have named: the only ones a script can
	// write. Comparing them, not KEYS, keeps a test fast on a shared
	// Redis that holds many keys.
	used map[string]bool
}

func newPair(t *testing.T) *pair {
	t.Helper()
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := scripts.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	if !strings.Contains(prefix, "{") {
		prefix += ":{t}"
	}
	start := time.Now()
	return &pair{t: t, rdb: rdb, st: New(start), prefix: prefix + ":", start: start, used: map[string]bool{}}
}

// key is a key of the test.
func (p *pair) key(name string) string { return p.prefix + name }

// call runs script name on both and compares; it returns the model's
// reply.
func (p *pair) call(name string, keys []string, args ...string) any {
	p.t.Helper()
	return p.raw(name, keys, packText(name, keys, args)...)
}

// raw is call with args sent as they are: a counting script's packing
// (packText) made by hand.
func (p *pair) raw(name string, keys []string, args ...string) any {
	p.t.Helper()
	for _, k := range keys {
		p.used[k] = true
	}
	sha, ok := lua.SHA(name)
	if !ok {
		p.t.Fatalf("no script %s", name)
	}
	anyArgs := make([]any, len(args))
	for i, a := range args {
		anyArgs[i] = a
	}
	want, wantErr := p.rdb.EvalSha(p.t.Context(), sha, keys, anyArgs...).Result()
	if redis.HasErrorPrefix(wantErr, "NOSCRIPT") {
		// Other packages' tests flush the shared Redis's scripts, some in a
		// loop: EVAL loads and runs in one step, so no flush comes between.
		want, wantErr = p.rdb.Eval(p.t.Context(), p.source(name), keys, anyArgs...).Result()
	}
	got, gotErr := p.st.Eval(sha, keys, args)
	what := fmt.Sprintf("%s keys %q args %q", name, keys, args)
	switch {
	case wantErr != nil && gotErr != nil:
	case wantErr != nil || gotErr != nil:
		p.t.Fatalf("%s: Redis: %v, %v; model: %v, %v", what, want, wantErr, got, gotErr)
	case fmt.Sprint(normal(want)) != fmt.Sprint(got):
		p.t.Fatalf("%s:\nRedis %v\nmodel %v", what, normal(want), got)
	}
	p.same(what)
	return got
}

// source is script name's text, as lua embeds it (with its prelude).
func (p *pair) source(name string) string {
	p.t.Helper()
	text, ok := lua.Text(name)
	if !ok {
		p.t.Fatalf("no script %s", name)
	}
	return text
}

// normal is a reply as the model gives it: an int64, or an []int64.
func normal(reply any) any {
	list, ok := reply.([]any)
	if !ok {
		return reply
	}
	out := make([]int64, len(list))
	for i, v := range list {
		n, ok := v.(int64)
		if !ok {
			return reply
		}
		out[i] = n
	}
	return out
}

// same fails the test unless both hold the same keys, values and TTLs. A
// TTL in Redis runs on while the model's clock stands: Redis's may be less
// by the time since the pair began.
func (p *pair) same(after string) {
	p.t.Helper()
	ctx := p.t.Context()
	real := map[string]string{}
	realTTL := map[string]time.Duration{}
	for k := range p.used {
		var v string
		switch typ := p.rdb.Type(ctx, k).Val(); typ {
		case "none":
			continue
		case "string":
			v = "string " + p.rdb.Get(ctx, k).Val()
		case "hash":
			v = "hash " + hashText(p.rdb.HGetAll(ctx, k).Val())
		case "zset":
			var parts []string
			for _, z := range p.rdb.ZRangeWithScores(ctx, k, 0, -1).Val() {
				parts = append(parts, fmt.Sprintf("%s@%s", z.Member, strconv.FormatFloat(z.Score, 'g', -1, 64)))
			}
			v = "zset " + strings.Join(parts, " ")
		default:
			v = typ
		}
		real[k] = v
		realTTL[k] = p.rdb.PTTL(ctx, k).Val()
	}
	elapsed := time.Since(p.start)
	model := map[string]string{}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	for k, e := range p.st.keys {
		if e.expired(p.st.now) {
			continue
		}
		if !p.used[k] {
			p.t.Fatalf("after %s: the model holds %s, which no call named", after, k)
		}
		var v string
		switch e.kind {
		case kindString:
			v = "string " + e.str
		case kindHash:
			v = "hash " + hashText(e.hash)
		case kindZSet:
			var parts []string
			for _, m := range e.zset.sorted {
				parts = append(parts, fmt.Sprintf("%s@%s", m.name, strconv.FormatFloat(m.score, 'g', -1, 64)))
			}
			v = "zset " + strings.Join(parts, " ")
		}
		model[k] = v
		rt, ok := realTTL[k]
		switch {
		case !ok:
		case !e.ttl && rt != -1:
			p.t.Fatalf("after %s: %s has no TTL in the model, %v in Redis", after, k, rt)
		case e.ttl:
			left := (e.due - p.st.now).Truncate(time.Millisecond)
			if rt > left || rt < left-elapsed-10*time.Millisecond {
				p.t.Fatalf("after %s: %s has TTL %v in the model, %v in Redis (%v since the start)", after, k, left, rt, elapsed)
			}
		}
	}
	for k := range real {
		if real[k] != model[k] {
			p.t.Fatalf("after %s: key %s\nRedis %q\nmodel %q", after, k, real[k], model[k])
		}
	}
	for k := range model {
		if _, ok := real[k]; !ok {
			p.t.Fatalf("after %s: key %s only in the model: %q", after, k, model[k])
		}
	}
}

// hashText is a hash's fields; an alert's opened_at, which each took from
// its own clock, is compared for being set only.
func hashText(h map[string]string) string {
	fields := make([]string, 0, len(h))
	for f, v := range h {
		if f == "opened_at" {
			v = "(a time)"
		}
		fields = append(fields, fmt.Sprintf("%q=%q", f, v))
	}
	slices.Sort(fields)
	return strings.Join(fields, " ")
}

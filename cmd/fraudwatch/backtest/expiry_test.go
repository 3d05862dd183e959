package backtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// ensureTTL arms a key that has no TTL, as the counting scripts do, so
// that scripts see the TTL expiry keeps.
var ensureTTL = redis.NewScript(`if redis.call('TTL', KEYS[1]) == -1 then
  return redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return -1`)

// tick is a step of a test's clock: it moves by advance, then the
// commands run.
type tick struct {
	advance time.Duration
	cmds    [][]any
}

// TestExpiryMatchesFastForward runs the same commands on two servers, one
// whose clock moves with FastForward, one whose clock expiry runs, and
// wants the same keys, values, TTLs set or not, and replies after every
// step.
func TestExpiryMatchesFastForward(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		steps []tick
	}{
		{"due exactly at a step", []tick{
			{0, [][]any{{"HSET", "w", "v", "1"}, {"EXPIRE", "w", "3"}}},
			{2 * s, nil},
			{s, [][]any{{"HSET", "w", "v", "2"}}},
		}},
		{"re-armed later and earlier", []tick{
			{0, [][]any{{"SET", "a", "1", "EX", "2"}, {"SET", "b", "1", "EX", "9"}}},
			{s, [][]any{{"EXPIRE", "a", "5"}, {"PEXPIRE", "b", "1500"}}},
			{s, nil}, {s, nil}, {s, nil}, {s, nil}, {s, nil},
		}},
		{"deleted, then made again without a TTL", []tick{
			{0, [][]any{{"HSET", "w", "v", "1"}, {"EXPIRE", "w", "2"}}},
			{s, [][]any{{"DEL", "w"}, {"HSET", "w", "v", "2"}}},
			{s, nil}, {5 * s, nil},
		}},
		{"emptied, then made again without a TTL", []tick{
			{0, [][]any{{"ZADD", "z", "1", "m"}, {"EXPIRE", "z", "2"}}},
			{s, [][]any{{"ZREMRANGEBYSCORE", "z", "-inf", "+inf"}, {"ZADD", "z", "2", "n"}}},
			{s, nil}, {5 * s, nil},
		}},
		{"SET drops a TTL, KEEPTTL keeps it", []tick{
			{0, [][]any{{"SET", "a", "1", "EX", "2"}, {"SET", "b", "1", "EX", "2"}}},
			{s, [][]any{{"SET", "a", "2"}, {"SET", "b", "2", "KEEPTTL"}}},
			{s, nil}, {s, nil},
		}},
		{"a cooldown taken once", []tick{
			{0, [][]any{{"SET", "c", "x", "NX", "EX", "3"}}},
			{2 * s, [][]any{{"SET", "c", "y", "NX", "EX", "3"}}},
			{s, [][]any{{"SET", "c", "z", "NX", "EX", "3"}}},
			{2 * s, [][]any{{"SET", "c", "w", "NX", "EX", "3"}}},
		}},
		{"a script arms a window once", []tick{
			{0, [][]any{{"HSET", "w", "v", "1"}, {"script", "w", "3"}}},
			{2 * s, [][]any{{"script", "w", "3"}}},
			{s, [][]any{{"HSET", "w", "v", "2"}, {"script", "w", "3"}}},
			{s, nil}, {3 * s, nil},
		}},
	}
	for seed := range uint64(20) {
		tests = append(tests, struct {
			name  string
			steps []tick
		}{fmt.Sprint("random ", seed), randomSteps(rand.New(rand.NewPCG(seed, 1)))})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compareClocks(t, tt.steps)
		})
	}
}

// randomSteps makes commands on a few keys, at times a few seconds apart,
// each second often.
func randomSteps(r *rand.Rand) []tick {
	keys := []string{"a", "b", "c", "d"}
	var steps []tick
	for range 60 {
		st := tick{advance: time.Duration(r.IntN(4)) * time.Second}
		if r.IntN(10) == 0 {
			st.advance += time.Duration(r.IntN(3000)) * time.Millisecond
		}
		for range r.IntN(4) {
			k, n := keys[r.IntN(len(keys))], fmt.Sprint(1+r.IntN(5))
			cmds := [][]any{
				{"EXPIRE", k, n},
				{"PEXPIRE", k, fmt.Sprint(r.IntN(5000) + 1)},
				{"SET", k, "v", "EX", n},
				{"SET", k, "v", "NX", "EX", n},
				{"SET", k, "v", "KEEPTTL"},
				{"SET", k, "v"},
				{"DEL", k},
				{"HSET", k, "f", n},
				{"HDEL", k, "f"},
				{"ZADD", k, n, "m"},
				{"ZREMRANGEBYSCORE", k, "-inf", "+inf"},
				{"script", k, n},
			}
			st.cmds = append(st.cmds, cmds[r.IntN(len(cmds))])
		}
		steps = append(steps, st)
	}
	return steps
}

// compareClocks runs steps on both servers and fails at the first
// difference.
func compareClocks(t *testing.T, steps []tick) {
	t.Helper()
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ff, ffc := pipedMiniredis(t)
	ff.SetTime(now)
	ex, exc := pipedMiniredis(t)
	clk, err := newExpiry(ex, now)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		if st.advance > 0 {
			ff.FastForward(st.advance)
			ff.SetTime(now)
			clk.advance(now)
		}
		for _, c := range st.cmds {
			want, got := runCmd(ctx, ffc, c), runCmd(ctx, exc, c)
			if got != want {
				t.Fatalf("step %d, %v: %s, want %s", i, c, got, want)
			}
		}
		clk.settle()
		if got, want := state(ex), state(ff); got != want {
			t.Fatalf("after step %d (%v):\n%s\nwant:\n%s", i, st.cmds, got, want)
		}
	}
}

func pipedMiniredis(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	t.Cleanup(mr.Close)
	c := redis.NewClient(&redis.Options{MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return mr.Dial() }})
	t.Cleanup(func() { c.Close() })
	return mr, c
}

func runCmd(ctx context.Context, c *redis.Client, cmd []any) string {
	var v any
	var err error
	if cmd[0] == "script" {
		v, err = ensureTTL.Run(ctx, c, []string{cmd[1].(string)}, cmd[2]).Result()
	} else {
		v, err = c.Do(ctx, cmd...).Result()
	}
	if err != nil && err != redis.Nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(v)
}

// state is a server's keys and values, and which keys have a TTL.
func state(mr *miniredis.Miniredis) string {
	var b strings.Builder
	b.WriteString(mr.Dump())
	for _, k := range mr.Keys() {
		fmt.Fprintf(&b, "%s has a TTL: %t\n", k, mr.TTL(k) > 0)
	}
	return b.String()
}

package lua

import (
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"
)

// A channel's budget and the overall one: one message is taken from both,
// or from neither.
func TestTakeBudget(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k, err := NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	a, all := k.Budget("#a")
	b, _ := k.Budget("#b")
	slow := Budget{Rate: 0.001, Burst: 2}
	overall := Budget{Rate: 0.001, Burst: 3}
	take := func(key string) bool {
		t.Helper()
		ok, _, err := s.TakeBudget(ctx, key, all, slow, overall)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// #a has 2; the overall budget 3: #b gets the third, and then no one.
	for i, want := range []bool{true, true, false} {
		if got := take(a); got != want {
			t.Fatalf("#a, message %d: %v, want %v", i, got, want)
		}
	}
	if !take(b) || take(b) {
		t.Fatal("#b: want one message, the overall budget's last")
	}
	// Refilled at its rate.
	fast := Budget{Rate: 1000, Burst: 1}
	c, _ := k.Budget("#c")
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, _, err := s.TakeBudget(ctx, c, all, fast, fast)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the budgets never refilled")
		}
	}
	// Unusable arguments write nothing: not a new bucket, nor a refill of
	// one that exists.
	d, _ := k.Budget("#d")
	before := rdb.HGetAll(ctx, all).Val()
	for _, bad := range []struct{ channel, overall Budget }{
		{Budget{Rate: 0, Burst: 1}, fast},
		{fast, Budget{Rate: 1, Burst: 0}},
		{Budget{Rate: 1, Burst: 100001}, fast},
	} {
		if _, _, err := s.TakeBudget(ctx, d, all, bad.channel, bad.overall); err == nil {
			t.Errorf("budgets %+v and %+v were taken", bad.channel, bad.overall)
		}
	}
	if n := rdb.Exists(ctx, d).Val(); n != 0 {
		t.Error("a refused call made the channel's bucket")
	}
	if after := rdb.HGetAll(ctx, all).Val(); !maps.Equal(before, after) {
		t.Errorf("a refused call changed the overall bucket: %v, then %v", before, after)
	}
}

// An empty budget says how long until it holds a message again: the
// slower of the two buckets to refill one, at its rate.
func TestTakeBudgetWait(t *testing.T) {
	s, _, prefix := newScripts(t)
	ctx := t.Context()
	k, err := NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		channel, overall Budget
		min, max         time.Duration
	}{
		{"the channel is the slower", Budget{Rate: 0.5, Burst: 1}, Budget{Rate: 100, Burst: 100}, 1500 * time.Millisecond, 2 * time.Second},
		{"the overall budget is the slower", Budget{Rate: 100, Burst: 100}, Budget{Rate: 0.25, Burst: 1}, 3500 * time.Millisecond, 4 * time.Second},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, _ := k.Budget(fmt.Sprintf("#wait-%d", i))
			all := k.prefix + ":{budget}:all-" + strconv.Itoa(i)
			ok, wait, err := s.TakeBudget(ctx, ch, all, tt.channel, tt.overall)
			if err != nil || !ok || wait != 0 {
				t.Fatalf("first message: %v, %v, %v; want it taken, no wait", ok, wait, err)
			}
			ok, wait, err = s.TakeBudget(ctx, ch, all, tt.channel, tt.overall)
			if err != nil || ok {
				t.Fatalf("second message: %v, %v; want it refused", ok, err)
			}
			if wait < tt.min || wait > tt.max {
				t.Errorf("wait %v, want %v to %v", wait, tt.min, tt.max)
			}
		})
	}
}

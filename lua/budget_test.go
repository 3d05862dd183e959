package lua

import (
	"testing"
	"time"
)

// A channel's budget and the overall one: one message is taken from both,
// or from neither.
func TestTakeBudget(t *testing.T) {
	s, _, prefix := newScripts(t)
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
		ok, err := s.TakeBudget(ctx, key, all, slow, overall)
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
		ok, err := s.TakeBudget(ctx, c, all, fast, fast)
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
	if _, err := s.TakeBudget(ctx, c, all, Budget{Rate: 0, Burst: 1}, fast); err == nil {
		t.Error("a zero rate was taken")
	}
}

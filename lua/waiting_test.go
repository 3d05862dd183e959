package lua

import (
	"strings"
	"testing"
	"time"
)

// alert_wait keeps a rule's alerts as they come in (the first whole, the
// others compact), seals them for a drainer and drops them once done;
// every alert waits once, new or sealed; the bound is over every rule;
// the index counts each rule's alerts and names its channel.
func TestWait(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k, err := NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	a, b := k.Waiting("r-a"), k.Waiting("r-b")
	wait := func(keys WaitingKeys, rule, id string) Wait {
		t.Helper()
		w, err := s.Wait(ctx, keys, rule, id, []byte("whole "+id), []byte("compact "+id), "#fraud", 4, time.Hour)
		if err != nil {
			t.Fatalf("wait %s: %v", id, err)
		}
		return w
	}
	index := func() map[string]RuleWaiting {
		t.Helper()
		got, err := s.WaitingRules(ctx, k.WaitingIndex())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, st := range []struct {
		keys     WaitingKeys
		rule, id string
		want     Wait
	}{
		{a, "r-a", "r-a/e1", Waits},
		{a, "r-a", "r-a/e2", Waits},
		{a, "r-a", "r-a/e1", WaitsAlready},
		{b, "r-b", "r-b/e1", Waits},
	} {
		if got := wait(st.keys, st.rule, st.id); got != st.want {
			t.Errorf("wait %s: %v, want %v", st.id, got, st.want)
		}
	}
	if got := index(); len(got) != 2 || got["r-a"] != (RuleWaiting{2, "#fraud"}) || got["r-b"] != (RuleWaiting{1, "#fraud"}) {
		t.Fatalf("index %v", got)
	}
	if n, err := s.TakeWaiting(ctx, a, "r-a"); err != nil || n != 2 {
		t.Fatalf("seal = %d, %v; want 2", n, err)
	}
	sealed, err := s.Sealed(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != 2 || sealed["r-a/e1"] != "whole r-a/e1" || sealed["r-a/e2"] != "compact r-a/e2" {
		t.Fatalf("sealed %v, want the first whole and the second compact", sealed)
	}
	// While sealed: a copy of a sealed one waits already, a new one comes
	// in whole (the first of the new hash), and sealing again keeps the
	// sealed ones (a drainer that died before it was done).
	if got := wait(a, "r-a", "r-a/e2"); got != WaitsAlready {
		t.Errorf("a sealed alert again: %v, want WaitsAlready", got)
	}
	if got := wait(a, "r-a", "r-a/e3"); got != Waits {
		t.Errorf("a new alert while two are sealed: %v", got)
	}
	if got := wait(b, "r-b", "r-b/e2"); got != WaitFull {
		t.Errorf("a fifth alert, past the bound of 4 over both rules: %v, want WaitFull", got)
	}
	if n, err := s.TakeWaiting(ctx, a, "r-a"); err != nil || n != 2 {
		t.Fatalf("seal again = %d, %v; want the 2 still sealed", n, err)
	}
	if n, err := s.WaitDone(ctx, a, "r-a", "r-a/e1", "r-a/e2"); err != nil || n != 1 {
		t.Fatalf("done = %d, %v; want 1 still waiting (e3)", n, err)
	}
	if n, err := s.TakeWaiting(ctx, a, "r-a"); err != nil || n != 1 {
		t.Fatalf("seal e3 = %d, %v", n, err)
	}
	if sealed, _ := s.Sealed(ctx, a); sealed["r-a/e3"] != "whole r-a/e3" {
		t.Errorf("sealed %v, want e3 whole", sealed)
	}
	if ttl := rdb.TTL(ctx, a.Sealed).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("the sealed hash lives %v, want the hour it came in with", ttl)
	}
	if n, err := s.WaitDone(ctx, a, "r-a", "r-a/e3"); err != nil || n != 0 {
		t.Fatalf("done = %d, %v; want none left", n, err)
	}
	if got := index(); len(got) != 1 || got["r-b"].Count != 1 {
		t.Errorf("index %v, want r-b's alone", got)
	}
	if n := rdb.Exists(ctx, a.New, a.Sealed).Val(); n != 0 {
		t.Errorf("%d of r-a's hashes left with nothing in them", n)
	}
}

// A count that went wrong (the rule's hashes expired or were deleted,
// the index kept) is written again when a drainer seals the rule, so that
// it holds no room in the bound.
func TestWaitCountsAgainOnSeal(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k, _ := NewKeys(prefix)
	a := k.Waiting("r-a")
	if _, err := s.Wait(ctx, a, "r-a", "r-a/e1", []byte("w"), []byte("c"), "", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, a.New)
	if got, _ := s.Wait(ctx, a, "r-a", "r-a/e2", []byte("w"), []byte("c"), "", 1, time.Hour); got != WaitFull {
		t.Fatalf("wait = %v; want the stale count to hold the bound until a seal", got)
	}
	if n, err := s.TakeWaiting(ctx, a, "r-a"); err != nil || n != 0 {
		t.Fatalf("seal = %d, %v; want nothing", n, err)
	}
	if got, _ := s.Wait(ctx, a, "r-a", "r-a/e2", []byte("w"), []byte("c"), "", 1, time.Hour); got != Waits {
		t.Fatalf("wait after the seal = %v, want Waits", got)
	}
}

// alert_wait refuses unusable arguments without writing, and a key of
// another type holds none of its alerts.
func TestWaitArgumentsAndForeignKeys(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k, _ := NewKeys(prefix)
	a := k.Waiting("r-a")
	for _, bad := range []struct {
		name, rule, id, whole, compact, channel string
		limit                                   int
		life                                    time.Duration
	}{
		{"no rule", "", "r/e", "w", "c", "", 10, time.Hour},
		{"rule too long", strings.Repeat("r", 65), "r/e", "w", "c", "", 10, time.Hour},
		{"empty id", "r-a", "", "w", "c", "", 10, time.Hour},
		{"id too long", "r-a", strings.Repeat("i", 257), "w", "c", "", 10, time.Hour},
		{"no data", "r-a", "r/e", "", "c", "", 10, time.Hour},
		{"no compact data", "r-a", "r/e", "w", "", "", 10, time.Hour},
		{"data too long", "r-a", "r/e", strings.Repeat("d", 65537), "c", "", 10, time.Hour},
		{"channel too long", "r-a", "r/e", "w", "c", strings.Repeat("c", 513), 10, time.Hour},
		{"no cap", "r-a", "r/e", "w", "c", "", 0, time.Hour},
		{"cap too large", "r-a", "r/e", "w", "c", "", 1000001, time.Hour},
		{"no lifetime", "r-a", "r/e", "w", "c", "", 10, 0},
	} {
		if _, err := s.Wait(ctx, a, bad.rule, bad.id, []byte(bad.whole), []byte(bad.compact), bad.channel, bad.limit, bad.life); err == nil {
			t.Errorf("%s: waits", bad.name)
		}
	}
	if n := rdb.Exists(ctx, a.Index, a.New, a.Sealed).Val(); n != 0 {
		t.Error("a refused wait wrote")
	}
	for _, kind := range []string{"a string", "a list"} {
		for _, key := range []string{a.Index, a.New, a.Sealed} {
			foreign(t, rdb, kind, key)
			if got, err := s.Wait(ctx, a, "r-a", "r-a/e1", []byte("w"), []byte("c"), "", 10, time.Hour); err != nil || got != Waits {
				t.Fatalf("%s at %s: wait = %v, %v", kind, key, got, err)
			}
			if n, err := s.TakeWaiting(ctx, a, "r-a"); err != nil || n != 1 {
				t.Fatalf("%s at %s: seal = %d, %v", kind, key, n, err)
			}
			if n, err := s.WaitDone(ctx, a, "r-a", "r-a/e1"); err != nil || n != 0 {
				t.Fatalf("%s at %s: done = %d, %v", kind, key, n, err)
			}
		}
	}
}

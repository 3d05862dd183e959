package lua

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

func TestScriptFlushIsSurvived(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w, amount := testWindow(prefix, "w", time.Minute, 250), testWindow(prefix, "amount", time.Minute, 1_000_000)
	for i := range 4 {
		// Other packages' tests share this server; their calls load the
		// scripts again the same way.
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// An event's windows of one bucket go in one call: the bucket
		// remembers the offsets it applied.
		got := count(t, s, []Window{w, amount}, ev{"0:o", int64(i), fmt.Sprint("o", i), 100})[0]
		if want := int64(100 * (i + 1)); got.Current != want || got.First != (i == 2) {
			t.Fatalf("count after flush %d: %+v", i, got)
		}
		rdb.ScriptFlush(ctx)
		refund(t, s, []Window{amount}, ev{"0:r", int64(i), fmt.Sprint("r", i), 50})
		rdb.ScriptFlush(ctx) // evidence goes through the same runner
		e := &Evidence{Windows: []EvidenceWindow{{Key: w.Key + ":l", Window: w.Key, Keep: 5, TTL: time.Minute}},
			Entries: []EvidenceEntry{{Text: fmt.Sprint("o", i), List: true}}}
		if err := s.AddEvidence(ctx, []*Evidence{e}); err != nil || len(e.Lists) != 1 || len(e.Lists[0]) != i+1 {
			t.Fatalf("evidence after flush %d: %v, %q", i, err, e.Lists)
		}
		rdb.ScriptFlush(ctx)
		if _, err := s.ClaimAlert(ctx, testClaim(prefix+":{t}:cd", prefix+fmt.Sprint(":{t}:rec", i), fmt.Sprint("a", i), 0)); err != nil {
			t.Fatalf("claim after flush %d: %v", i, err)
		}
		rdb.ScriptFlush(ctx)
		if err := settleOne(ctx, s, prefix+":{t}:cd", prefix+fmt.Sprint(":{t}:rec", i), fmt.Sprint("a", i), true); err != nil {
			t.Fatalf("settle after flush %d: %v", i, err)
		}
	}
	if v := value(t, rdb, amount); v != 200 {
		t.Fatalf("amount = %d, want 200", v)
	}
}

// An error Redis answers fails the call whole (the batch is retried) and
// counts in the errors metric. Here Redis is full (maxmemory 1 byte, no
// eviction), which refuses a script's first write with OOM: a crossing's
// mark (slide_and_check's first write) must not take that for marks of
// another type and delete the window's marks to write it, nor alert_budget
// its buckets.
func TestRedisErrorsAreCounted(t *testing.T) {
	rdb := redistest.Connect(t, redistest.Start(t).Addr)
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, prefix := t.Context(), redistest.Prefix(t)
	fixed, sliding := testWindow(prefix, "f", time.Minute, 1), slidingWindow(prefix, "s", time.Minute, 0, 1)
	values := distinctWindow(prefix, "d", false, time.Minute, 0, 1)
	// Before Redis is full: a crossing, whose window then ends; its mark
	// stays. A message from the budgets.
	slide(t, s, []Window{sliding}, sev{src: "0:t", offset: 1, id: "a", amount: 1})
	rdb.Del(ctx, sliding.Key)
	budget, all, rate := prefix+":{b}:c", prefix+":{b}:all", Budget{Rate: 1, Burst: 5}
	if ok, _, err := s.TakeBudget(ctx, budget, all, rate, rate); err != nil || !ok {
		t.Fatalf("budget: %v, %v", ok, err)
	}
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		script string
		call   func() error
	}{
		{IncrAndCheckName, func() error {
			_, err := tryCount(ctx, s, []Window{fixed}, ev{"0:t", 2, "b", 1})
			return err
		}},
		{SalesDecrName, func() error {
			b := s.Batch()
			r := &Call{Kind: Refund, Source: "0:r", Offsets: offsetsOf(fixed), Windows: []Window{fixed},
				Changes: []Change{{Offset: 2, ID: IDOf("b"), Amount: 1}}}
			if err := b.Add(r); err != nil {
				t.Fatal(err)
			}
			return b.Exec(ctx)
		}},
		{SlideAndCheckName, func() error {
			_, err := trySlide(ctx, s, []Window{sliding}, sev{src: "0:t", offset: 2, id: "b", amount: 1})
			return err
		}},
		{DistinctAndCheckName, func() error {
			_, err := tryDistinct(ctx, s, []Window{values}, sev{src: "0:t", offset: 2, id: "b", value: "v"})
			return err
		}},
		{AlertBudgetName, func() error {
			_, _, err := s.TakeBudget(ctx, budget, all, rate, rate)
			return err
		}},
	} {
		err := tc.call()
		if _, ok := errors.AsType[redis.Error](err); !ok || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("%s on a full Redis: %v, want Redis's OOM error", tc.script, err)
		}
		if n := testutil.ToFloat64(s.errors.WithLabelValues(tc.script)); n != 1 {
			t.Fatalf("%s: script errors = %v, want 1", tc.script, n)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	id := IDOf("a")
	if !rdb.HExists(ctx, sliding.Marks, string(id[:])).Val() {
		t.Fatal("the window's marks lost their crossing")
	}
	if got := rdb.HGet(ctx, budget, "t").Val(); got != "4" {
		t.Fatalf("the budget holds %q tokens, want the 4 left before Redis was full", got)
	}
}

// reloading is a client that counts the times it is asked to read its
// map of slots again.
type reloading struct {
	*redis.Client
	reloads int
}

func (r *reloading) ReloadState(context.Context) { r.reloads++ }

// A call that gets no answer makes a cluster client read its slot map
// again, so that the retry finds a master that took over; an error
// Redis answered does not.
func TestNoAnswerReloadsTheClusterState(t *testing.T) {
	prefix := redistest.Prefix(t)
	// A Redis that answers with an error: out of memory (maxmemory 1 byte,
	// no eviction), it refuses the claim's write.
	full := redistest.Connect(t, redistest.Start(t).Addr)
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := full.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	dead := redistest.Connect(t, "127.0.0.1:1")
	tests := []struct {
		name        string
		client      *redis.Client
		wantReloads int
	}{
		{"no answer", dead, 1},
		{"an answer", full, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := &reloading{Client: tt.client}
			s, err := New(Config{}, rdb, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ClaimAlert(t.Context(), testClaim(prefix+":{t}:cd", prefix+":{t}:rec", "a", time.Minute)); err == nil {
				t.Fatal("the claim succeeded; want it to fail")
			}
			if rdb.reloads != tt.wantReloads {
				t.Errorf("reloads = %d, want %d", rdb.reloads, tt.wantReloads)
			}
		})
	}
}

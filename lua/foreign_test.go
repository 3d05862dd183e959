package lua

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// What the counting scripts do with a key of another type under one of
// theirs (written by another: by hand, or by a bug). Read with redis.call,
// such a key raised WRONGTYPE, which failed the call, and the batch on every
// retry: the partition stuck for good.

// foreign writes a value of kind ("a string", "a hash", "a hash, c no
// number": a fixed window's count that is none, or "a list") at key,
// in place of what was there.
func foreign(t *testing.T, rdb redis.UniversalClient, kind, key string) {
	t.Helper()
	ctx := t.Context()
	rdb.Del(ctx, key)
	var err error
	switch kind {
	case "a string":
		err = rdb.Set(ctx, key, "x", time.Hour).Err()
	case "a hash":
		err = rdb.HSet(ctx, key, "f", "v").Err()
	case "a hash, c no number":
		err = rdb.HSet(ctx, key, "c", "x").Err()
	case "a list":
		err = rdb.RPush(ctx, key, "a", "b").Err()
	default:
		t.Fatalf("no kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// countingScript is a counting script as these tests call it.
type countingScript struct {
	name string
	// windows are two windows of the bucket of prefix.
	windows func(prefix string, threshold int64) []Window
	// setup prepares ws before the event at offset 1 (sales_decr: orders
	// to refund); nil for run(ws, 1).
	setup func(t *testing.T, ws []Window)
	// run counts the event at offset off into each of ws.
	run func(t *testing.T, ws []Window, off int64) []Counted
}

func countingScripts(s *Scripts) []countingScript {
	fixed := func(prefix string, threshold int64) []Window {
		return []Window{testWindow(prefix, "a", time.Minute, threshold), testWindow(prefix, "b", time.Minute, threshold)}
	}
	counts := func(t *testing.T, ws []Window, off int64) []Counted {
		return count(t, s, ws, ev{"0:t", off, fmt.Sprint("e", off), 1})
	}
	distinctOf := func(sliding bool) func(string, int64) []Window {
		return func(prefix string, threshold int64) []Window {
			return []Window{distinctWindow(prefix, "a", sliding, time.Minute, 0, threshold),
				distinctWindow(prefix, "b", sliding, time.Minute, 0, threshold)}
		}
	}
	distincts := func(t *testing.T, ws []Window, off int64) []Counted {
		return distinct(t, s, ws, sev{src: "0:t", offset: off, id: fmt.Sprint("e", off), at: float64(off), value: fmt.Sprint("v", off)})
	}
	return []countingScript{
		{name: IncrAndCheckName, windows: fixed, run: counts},
		{name: SalesDecrName, windows: fixed,
			setup: func(t *testing.T, ws []Window) { count(t, s, ws, ev{"0:t", 1, "order", 10}) },
			run: func(t *testing.T, ws []Window, off int64) []Counted {
				return refund(t, s, ws, ev{"0:r", off, fmt.Sprint("e", off), 1})
			}},
		{name: SlideAndCheckName,
			windows: func(prefix string, threshold int64) []Window {
				return []Window{slidingWindow(prefix, "a", time.Minute, 0, threshold),
					slidingWindow(prefix, "b", time.Minute, 0, threshold)}
			},
			run: func(t *testing.T, ws []Window, off int64) []Counted {
				return slide(t, s, ws, sev{src: "0:t", offset: off, id: fmt.Sprint("e", off), at: float64(off), amount: 1})
			}},
		{name: DistinctAndCheckName + " (fixed)", windows: distinctOf(false), run: distincts},
		{name: DistinctAndCheckName + " (sliding)", windows: distinctOf(true), run: distincts},
	}
}

// The bucket's offsets of another type are none, and are replaced: the
// call counts, once, and its redelivery is known.
func TestOffsetsOfAnotherTypeAreReplaced(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	for i, sc := range countingScripts(s) {
		for _, kind := range []string{"a string", "a list"} {
			t.Run(sc.name+", "+kind, func(t *testing.T) {
				ws := sc.windows(fmt.Sprint(prefix, ":", i, kind[2:]), 100)[:1]
				if sc.setup != nil {
					sc.setup(t, ws)
				}
				o := offsetsOf(ws[0])
				foreign(t, rdb, kind, o)
				first := sc.run(t, ws, 2)
				again := sc.run(t, ws, 2)
				if first[0].Err != nil || again[0] != first[0] {
					t.Fatalf("%+v, then %+v: want a count, then the same (counted once)", first, again)
				}
				if typ := rdb.Type(t.Context(), o).Val(); typ != "hash" {
					t.Fatalf("the offsets are a %s, want a hash", typ)
				}
			})
		}
	}
}

// Crossing marks of another type are none, and a crossing replaces them: it
// leaves its mark, which a redelivery answers, so that the alert is handed
// off again.
func TestMarksOfAnotherTypeAreReplaced(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	for i, sc := range countingScripts(s) {
		if sc.name == SalesDecrName {
			continue // no marks
		}
		for _, kind := range []string{"a string", "a list"} {
			t.Run(sc.name+", "+kind+" at the crossing", func(t *testing.T) {
				ws := sc.windows(fmt.Sprint(prefix, ":", i, kind[2:], "c"), 1)[:1]
				foreign(t, rdb, kind, ws[0].Marks)
				crossed := sc.run(t, ws, 1)
				again := sc.run(t, ws, 1)
				if !crossed[0].First || crossed[0].Err != nil || again[0] != crossed[0] {
					t.Fatalf("%+v, then %+v: want the crossing, then its mark", crossed, again)
				}
				if typ := rdb.Type(ctx, ws[0].Marks).Val(); typ != "hash" {
					t.Fatalf("the marks are a %s, want a hash", typ)
				}
			})
			t.Run(sc.name+", "+kind+" at a redelivery", func(t *testing.T) {
				ws := sc.windows(fmt.Sprint(prefix, ":", i, kind[2:], "r"), 1)[:1]
				crossed := sc.run(t, ws, 1)
				foreign(t, rdb, kind, ws[0].Marks)
				again := sc.run(t, ws, 1)
				if !crossed[0].First || again[0].Err != nil || again[0].First || again[0].Current != 1 {
					t.Fatalf("%+v, then %+v: want the crossing, then the value without a mark", crossed, again)
				}
			})
		}
	}
}

// A window whose key holds another type is unusable: its changes answer
// ErrInvalidArguments and nothing is written to it; the call's other
// windows still count.
func TestWindowsOfAnotherTypeAreUnusable(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	scripts := map[string]countingScript{}
	for _, sc := range countingScripts(s) {
		scripts[sc.name] = sc
	}
	key := func(w Window) string { return w.Key }
	values := func(w Window) string { return w.Values }
	for i, tc := range []struct {
		script, what string
		key          func(Window) string
		kinds        []string
	}{
		// A string is a counter of the version before, whose count moves
		// into a hash: "x" holds none.
		{IncrAndCheckName, "counter", key, []string{"a string", "a hash, c no number", "a list"}},
		{SalesDecrName, "counter", key, []string{"a string", "a hash, c no number", "a list"}},
		{SlideAndCheckName, "hash", key, []string{"a string", "a list"}},
		{DistinctAndCheckName + " (fixed)", "hash", key, []string{"a string", "a list"}},
		{DistinctAndCheckName + " (fixed)", "values", values, []string{"a string", "a hash", "a list"}},
		{DistinctAndCheckName + " (sliding)", "hash", key, []string{"a string", "a list"}},
		{DistinctAndCheckName + " (sliding)", "values", values, []string{"a string", "a hash", "a list"}},
	} {
		sc := scripts[tc.script]
		for _, kind := range tc.kinds {
			t.Run(fmt.Sprintf("%s, %s: %s", tc.script, tc.what, kind), func(t *testing.T) {
				ws := sc.windows(fmt.Sprint(prefix, ":", i, kind[2:]), 1)
				// Both windows hold what a call wrote; then one of them a
				// value of another type.
				if sc.setup != nil {
					sc.setup(t, ws)
				} else {
					sc.run(t, ws, 1)
				}
				fouled := tc.key(ws[0])
				foreign(t, rdb, kind, fouled)
				before := rdb.Dump(ctx, fouled).Val()
				got := sc.run(t, ws, 2)
				again := sc.run(t, ws, 2) // a redelivery
				if got[0].Err != ErrInvalidArguments || again[0].Err != ErrInvalidArguments {
					t.Fatalf("the unusable window answered %+v, then %+v; want ErrInvalidArguments", got[0], again[0])
				}
				if got[1].Err != nil || again[1] != got[1] || got[1].Current == 0 {
					t.Fatalf("the other window answered %+v, then %+v; want a count, then the same", got[1], again[1])
				}
				if rdb.Dump(ctx, fouled).Val() != before {
					t.Fatal("the unusable window's key was written")
				}
			})
		}
	}
}

// The alert scripts' keys of another type: none fails the alert's
// delivery, which would fail on every retry. A record, a cooldown or a
// bucket of another type is none and is replaced; silences are none; a
// cooldown of another type is not the settling alert's; the parked alerts
// of another type go.
func TestAlertScriptsTakeKeysOfAnotherType(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	keys, err := NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name  string
		kinds []string
		// run writes kind at a key of the script's under p (in one hash
		// tag), calls it and checks its answer.
		run func(t *testing.T, kind, p string)
	}{
		{"alert_claim, the delivery record", []string{"a string", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":rec")
			if claim, err := s.ClaimAlert(ctx, testClaim(p+":cd", p+":rec", "a", time.Minute)); err != nil || claim != ClaimSend {
				t.Fatalf("claim = %v, %v; want ClaimSend", claim, err)
			}
			if got := rdb.HGet(ctx, p+":rec", "state").Val(); got != "pending" {
				t.Fatalf("the record holds %q, want it replaced by pending", got)
			}
		}},
		{"alert_claim, the record of the version before", []string{"a hash", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":rec:legacy")
			if claim, err := s.ClaimAlert(ctx, testClaim(p+":cd", p+":rec", "a", time.Minute)); err != nil || claim != ClaimSend {
				t.Fatalf("claim = %v, %v; want ClaimSend", claim, err)
			}
		}},
		{"alert_settle, the record", []string{"a string", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":rec")
			if err := settleOne(ctx, s, p+":cd", p+":rec", "a", true); err != nil {
				t.Fatal(err)
			}
			if got := rdb.HGet(ctx, p+":rec", "state").Val(); got != "sent" {
				t.Fatalf("the record holds %q, want it replaced by sent", got)
			}
		}},
		{"alert_ack, the record", []string{"a string", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":rec")
			if _, err := s.AcknowledgeAlert(ctx, p+":rec", "slack:U1"); !errors.Is(err, ErrNoRecord) {
				t.Fatalf("ack = %v; want ErrNoRecord", err)
			}
		}},
		{"alert_claim, the cooldown", []string{"a hash", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":cd")
			if claim, err := s.ClaimAlert(ctx, testClaim(p+":cd", p+":rec", "a", time.Minute)); err != nil || claim != ClaimSend {
				t.Fatalf("claim = %v, %v; want ClaimSend", claim, err)
			}
			if got := rdb.Get(ctx, p+":cd").Val(); got != "a" {
				t.Fatalf("the cooldown holds %q, want it replaced by the alert's id", got)
			}
		}},
		{"alert_claim, the silences", []string{"a string", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":s")
			foreign(t, rdb, kind, p+":rs")
			claim, err := s.ClaimAlert(ctx, testClaim(p+":cd", p+":rec", "a", time.Minute, p+":s", p+":rs"))
			if err != nil || claim != ClaimSend {
				t.Fatalf("claim = %v, %v; want ClaimSend: no silence", claim, err)
			}
		}},
		{"alert_settle, the cooldown", []string{"a hash", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":cd")
			before := rdb.Dump(ctx, p+":cd").Val()
			if err := settleOne(ctx, s, p+":cd", p+":rec", "a", false); err != nil {
				t.Fatal(err)
			}
			if rdb.HGet(ctx, p+":rec", "state").Val() != "failed" || rdb.Dump(ctx, p+":cd").Val() != before {
				t.Fatal("want the record failed and the cooldown, not the alert's, left")
			}
		}},
		{"alert_park, the parked alerts", []string{"a string", "a list"}, func(t *testing.T, kind, p string) {
			foreign(t, rdb, kind, p+":parked")
			if got, err := s.Park(ctx, p+":parked", "a", []byte("{}"), 10, time.Hour); err != nil || got != Parked {
				t.Fatalf("park = %v, %v; want parked", got, err)
			}
			if got, err := s.Parked(ctx, p+":parked"); err != nil || len(got) != 1 || got["a"] != "{}" {
				t.Fatalf("parked %v, %v; want the alert alone", got, err)
			}
		}},
		{"alert_budget, a channel's and the overall bucket", []string{"a string", "a list"}, func(t *testing.T, kind, _ string) {
			channel, all := keys.Budget("#" + kind)
			foreign(t, rdb, kind, channel)
			foreign(t, rdb, kind, all)
			ok, _, err := s.TakeBudget(ctx, channel, all, Budget{Rate: 1, Burst: 2}, Budget{Rate: 1, Burst: 2})
			if err != nil || !ok {
				t.Fatalf("take = %v, %v; want a message from full buckets", ok, err)
			}
			for _, k := range []string{channel, all} {
				if got := rdb.HGet(ctx, k, "t").Val(); got != "1" {
					t.Fatalf("bucket %s holds %q tokens, want 1: replaced, one taken", k, got)
				}
			}
		}},
	} {
		for _, kind := range tc.kinds {
			t.Run(tc.name+", "+kind, func(t *testing.T) {
				tc.run(t, kind, fmt.Sprint(prefix, ":{t}:", i, kind[2:]))
			})
		}
	}
}

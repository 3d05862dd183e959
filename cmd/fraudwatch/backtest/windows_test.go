package backtest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// now is the scored tests' --now: a day after their outcomes.
var now = t0.Add(48 * time.Hour)

// randomTruth labels about a third of the input's orders: fraud, legit or
// unclear.
func randomTruth(t *testing.T, evs *Events, seed uint64) truth {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	outs := NewOutcomes(now)
	labels := []string{"fraud", "fraud", "legit", "unclear"}
	for _, rec := range evs.list {
		if rec.order != "" && r.IntN(3) == 0 {
			outs.Add(fmt.Appendf(nil, `{"type":"outcome","order_id":%q,"outcome":%q,"source":"t","occurred_at":%q}`,
				rec.order, labels[r.IntN(len(labels))], t0.Format("2006-01-02T15:04:05Z")))
		}
	}
	return truthOf(evs, outs)
}

// A scored replay finds the same, orders listed and caught included,
// through the scripts' Go model and the Lua scripts, in any number of
// shares; and its fraud orders are caught by more than listing alone.
func TestScoredEnginesAgree(t *testing.T) {
	rs := parseRules(t, everyKind).Rules
	// Two histories, seeds 0 and 1: TestEnginesAgree replays seeds 2 and 3,
	// unscored; each of these costs CI some 8 s under -race, most of it the
	// Lua replay.
	for seed := range uint64(2) {
		evs, err := Read(strings.NewReader(strings.Join(randomHistory(seed, 1200, true), "\n")), 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		tr := randomTruth(t, evs, seed)
		var reports []*Report
		for _, c := range []replayConfig{{engine: Model, parallel: runtime.GOMAXPROCS(0)}, {engine: Lua, parallel: 3}, {engine: Model, parallel: 1}} {
			c.score = &scoring{fraud: tr.fraud}
			rep, err := replay(t.Context(), []RuleSet{{Rules: rs}}, evs, c)
			if err != nil {
				t.Fatal(err)
			}
			reports = append(reports, rep)
		}
		for i, rep := range reports[1:] {
			if !reflect.DeepEqual(reports[0], rep) {
				t.Errorf("seed %d: replay %d differs from the first:\n%s", seed, i+2, reportDiff(reports[0], rep))
			}
		}
		listed, after := 0, 0
		for _, a := range reports[0].Alerts {
			listed += len(a.Listed)
			after += len(a.CaughtAfter)
		}
		if s := tr.score(reports[0]); s.FraudOrders < 50 || listed < 1000 || after < 5 {
			t.Errorf("seed %d: %d fraud orders, %d orders listed, %d caught after a crossing: the history tests too little", seed, s.FraudOrders, listed, after)
		}
	}
}

// The windows a scored replay follows end when the scripts' keys do: here
// against the TTLs the Lua scripts give in miniredis, after every batch.
// Without refunds, every window; with them, the fixed ones (a refund
// renews a sliding window, which windows leaves to the order that
// follows, see its comment).
func TestWindowsFollowTheScripts(t *testing.T) {
	rs := parseRules(t, everyKind).Rules
	for _, refunds := range []bool{false, true} {
		// 600 events: 1,500 compared 73,778 windows without refunds and
		// 14,560 with them, and cost CI some 40 s of Lua under -race.
		evs, err := Read(strings.NewReader(strings.Join(randomHistory(1, 600, refunds), "\n")), 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex // the shares check at once
		compared, failures := 0, 0
		check := func(srv *replayServer, f *follower) error {
			mu.Lock()
			defer mu.Unlock()
			e := srv.expiry
			e.settle()
			for key, due := range e.due {
				if refunds && !strings.Contains(key, ":f:") || !followed(key) {
					continue
				}
				compared++
				if end, ok := f.windows.end[key]; (!ok || end != due) && failures < 5 {
					failures++
					t.Errorf("refunds %v: %s ends at %v in Redis, %v (%v) in the windows followed", refunds, key, due, end, ok)
				}
			}
			return nil
		}
		_, err = replay(t.Context(), []RuleSet{{Rules: rs}}, evs, replayConfig{engine: Lua, parallel: 2,
			score: &scoring{fraud: map[int64]bool{}, afterBatch: check}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("refunds %v: %d windows compared", refunds, compared)
		if compared < 1000 {
			t.Errorf("refunds %v: %d windows compared: the history tests too little", refunds, compared)
		}
	}
}

// followed says whether a key is a window's: a fixed window's counter
// (f), or a sliding or distinct window's hash (w).
func followed(key string) bool { return strings.Contains(key, ":f:") || strings.Contains(key, ":w:") }

// What a scored replay follows of the scripts is of their code as it is:
// a script whose code changed fails this test (and a scored replay) until
// the reading of it is checked again; a comment edit does not.
func TestScoringFollowsTheScripts(t *testing.T) {
	if err := checkFollowed(); err != nil {
		t.Error(err)
	}
}

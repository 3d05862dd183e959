package backtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// evidence does what evidence_add does: random calls run on a real Redis
// through lua.Scripts and on evidence give the same lists, and leave the
// same evidence, living as long. The windows' lives move between calls
// (a sliding one's renewed, one gone), so that an evidence that took its
// window's life and one that kept its own differ.
func TestEvidenceAgrees(t *testing.T) {
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	prefix := "{" + redistest.Prefix(t) + "}" // one hash tag: a call's keys share it
	w := newWindows(t0, nil)
	x := newEvidence(w)
	type window struct {
		lua.EvidenceWindow
		life time.Duration // 0: no window
	}
	var ws []window
	for i, keep := range []int{1, 3, 5, 20} {
		ws = append(ws, window{EvidenceWindow: lua.EvidenceWindow{Key: fmt.Sprintf("%s:l%d", prefix, i), Window: fmt.Sprintf("%s:w%d", prefix, i),
			Keep: keep, TTL: 100 * time.Second, Slides: i%2 == 1}})
	}
	r := rand.New(rand.NewPCG(5, 5))
	// Redis's clock runs during the test; evidence's does not. Since a
	// key's life was last set in Redis, its PTTL has run down by at most
	// the time passed (on a loaded machine, seconds over a few rounds), and
	// a little more: Redis stamps a command with a clock it caches, and
	// PTTL rounds to the millisecond. A key that takes its window's life
	// takes what is left of it, so it has run down since the window's was
	// set, which may be rounds before evidence's changed.
	lives, since, windowSet := map[string]time.Duration{}, map[string]time.Time{}, map[string]time.Time{}
	for round := range 300 {
		began := time.Now()
		for i := range ws {
			// Now and then a window moves: another life, or none.
			if r.IntN(3) == 0 {
				ws[i].life = []time.Duration{0, 20 * time.Second, 40 * time.Second, 60 * time.Second}[r.IntN(4)]
				if ws[i].life == 0 {
					rdb.Del(ctx, ws[i].Window)
					w.set(ws[i].Window, 0)
				} else {
					windowSet[ws[i].Window] = time.Now()
					rdb.Set(ctx, ws[i].Window, "1", ws[i].life)
					w.set(ws[i].Window, ws[i].life)
				}
			}
		}
		var some []lua.EvidenceWindow
		for _, i := range r.Perm(len(ws))[:1+r.IntN(len(ws))] {
			some = append(some, ws[i].EvidenceWindow)
		}
		call := randomEvidenceCall(r, round, some)
		want := *call
		if err := scripts.AddEvidence(ctx, []*lua.Evidence{&want}); err != nil {
			t.Fatal(err)
		}
		got := *call
		if err := x.AddEvidence(ctx, []*lua.Evidence{&got}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Lists, want.Lists) {
			t.Fatalf("round %d: lists %q, evidence_add's %q", round, got.Lists, want.Lists)
		}
		for _, win := range ws {
			value := rdb.Get(ctx, win.Key).Val()
			if left, _ := x.left(win.Key); left != lives[win.Key] {
				lives[win.Key], since[win.Key] = left, began
				if windowLeft, alive := w.left(win.Window); alive && left == windowLeft {
					since[win.Key] = windowSet[win.Window] // took its window's life
				}
			}
			pttl := rdb.PTTL(ctx, win.Key).Val()
			compareEvidence(t, round, value, pttl, time.Since(since[win.Key])+100*time.Millisecond, x, win.Key)
		}
	}
}

// randomEvidenceCall is a call of 1 to 8 entries to ws, some of them
// crossings.
func randomEvidenceCall(r *rand.Rand, round int, ws []lua.EvidenceWindow) *lua.Evidence {
	c := &lua.Evidence{Windows: ws}
	for j := range 1 + r.IntN(8) {
		c.Entries = append(c.Entries, lua.EvidenceEntry{Window: r.IntN(len(ws)), Text: fmt.Sprintf("r%d-e%d", round, j), List: r.IntN(3) == 0})
	}
	return c
}

// compareEvidence compares a key's evidence in Redis (its value and
// PTTL) with evidence's.
func compareEvidence(t *testing.T, round int, value string, pttl, ranDown time.Duration, x *evidence, key string) {
	t.Helper()
	var entries []string
	if value != "" {
		if !strings.HasPrefix(value, lua.EvidenceSep) {
			t.Fatalf("round %d: %s holds %q: not entries", round, key, value)
		}
		entries = strings.Split(value[1:], lua.EvidenceSep)
	}
	got := x.current(key)
	left, _ := x.left(key)
	if !reflect.DeepEqual(got, entries) {
		t.Fatalf("round %d: %s holds %q, evidence_add's %q", round, key, got, entries)
	}
	// Redis's life may have run down by ranDown since evidence's last
	// changed, and by no more.
	if d := left - pttl; len(entries) > 0 && (d < 0 || d > ranDown) {
		t.Fatalf("round %d: %s lives %v, evidence_add's %v (Redis's clock ran %v since)", round, key, left, pttl, ranDown)
	}
}

// evidence refuses the calls evidence_add refuses, the encoder's and the
// script's refusals alike (a TTL past 2^32-1 s is packed as 0, which the
// script refuses), and takes those it takes.
func TestEvidenceRefusesAsTheScript(t *testing.T) {
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "{" + redistest.Prefix(t) + "}"
	x := newEvidence(newWindows(t0, nil))
	w := lua.EvidenceWindow{Key: prefix + ":l", Window: prefix + ":w", Keep: 5, TTL: time.Minute}
	with := func(f func(*lua.EvidenceWindow)) []lua.EvidenceWindow {
		v := w
		f(&v)
		return []lua.EvidenceWindow{v}
	}
	one := []lua.EvidenceEntry{{Text: "x", List: true}}
	for _, tc := range []struct {
		name string
		call lua.Evidence
		ok   bool
	}{
		{"a usable call", lua.Evidence{Windows: []lua.EvidenceWindow{w}, Entries: one}, true},
		{"a TTL of 2^32-1 s", lua.Evidence{Windows: with(func(v *lua.EvidenceWindow) { v.TTL = math.MaxUint32 * time.Second }), Entries: one}, true},
		{"a TTL past 2^32-1 s", lua.Evidence{Windows: with(func(v *lua.EvidenceWindow) { v.TTL = (math.MaxUint32 + 1) * time.Second }), Entries: one}, false},
		{"keep 0", lua.Evidence{Windows: with(func(v *lua.EvidenceWindow) { v.Keep = 0 }), Entries: one}, false},
		{"keep 21", lua.Evidence{Windows: with(func(v *lua.EvidenceWindow) { v.Keep = 21 }), Entries: one}, false},
		{"no entries", lua.Evidence{Windows: []lua.EvidenceWindow{w}}, false},
		{"an entry to no window", lua.Evidence{Windows: []lua.EvidenceWindow{w}, Entries: []lua.EvidenceEntry{{Window: 1, Text: "x"}}}, false},
		{"a text of 513 bytes", lua.Evidence{Windows: []lua.EvidenceWindow{w}, Entries: []lua.EvidenceEntry{{Text: strings.Repeat("x", 513)}}}, false},
		{"a text holding the separator", lua.Evidence{Windows: []lua.EvidenceWindow{w}, Entries: []lua.EvidenceEntry{{Text: "x" + lua.EvidenceSep}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got := tc.call, tc.call
			werr := scripts.AddEvidence(t.Context(), []*lua.Evidence{&want})
			gerr := x.AddEvidence(t.Context(), []*lua.Evidence{&got})
			if (werr == nil) != tc.ok || errors.Is(werr, lua.ErrInvalidArguments) == tc.ok {
				t.Fatalf("evidence_add: %v; want taken %v", werr, tc.ok)
			}
			if (gerr == nil) != tc.ok || errors.Is(gerr, lua.ErrInvalidArguments) == tc.ok {
				t.Fatalf("evidence: %v; want taken %v", gerr, tc.ok)
			}
			if !reflect.DeepEqual(got.Lists, want.Lists) {
				t.Fatalf("lists %q, evidence_add's %q", got.Lists, want.Lists)
			}
		})
	}
}

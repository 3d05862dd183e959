package backtest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// evidencePin is the fingerprint of the code of evidence_add that
// evidence follows (lua.Fingerprint); checkFollowed fails a scored replay
// when the script's code changed.
const evidencePin = "7317a6ebef505a8e38598a00207c26d41fd2aa7e"

// evidence answers the engine's evidence_add calls in a scored replay, as
// the script does, in Go: the orders an alert lists are the crossing and
// its evidence (docs/alerts.md, Evidence), which a scored backtest judges
// the alert by. lua/model has no evidence_add, and a plain replay keeps
// no evidence (shareSets); the Lua scripts in miniredis would give it a
// window's TTL as the clock of --lua keeps it (expiry's unset), not the
// window's life. So both engines take this one, which TestEvidenceAgrees
// holds to the script on a real Redis.
//
// A window's evidence is its entries, oldest first, trimmed to its newest
// keep when a call takes it past 2 × keep entries of the call's longest;
// made, or written for a sliding window, it takes the window's remaining
// life (windows), else it keeps its own; without a live window, its TTL.
// Only sliding and distinct windows keep evidence here: a fixed count or
// amount window's is in its hash, written by its counting call, which the
// model keeps.
type evidence struct {
	lives
	lists   map[string][]string // by evidence key: entries, oldest first
	windows *windows
}

func newEvidence(w *windows) *evidence {
	return &evidence{lives: newLives(w.base), lists: map[string][]string{}, windows: w}
}

// advance moves the evidence's clock to t: the evidence due by then goes.
func (x *evidence) advance(t time.Time) {
	x.lives.advance(t, func(key string) { delete(x.lists, key) })
}

// AddEvidence runs the calls as evidence_add would, one after another,
// and sets their Lists. A call the script would refuse is an error
// wrapping lua.ErrInvalidArguments, and writes nothing.
func (x *evidence) AddEvidence(_ context.Context, calls []*lua.Evidence) error {
	var refused error
	for _, c := range calls {
		if err := checkEvidenceCall(c); err != nil {
			refused = err
			continue
		}
		x.call(c)
	}
	return refused
}

func checkEvidenceCall(c *lua.Evidence) error {
	ok := len(c.Windows) >= 1 && len(c.Windows) <= lua.MaxWindows && len(c.Entries) >= 1 && len(c.Entries) <= lua.MaxChanges
	for _, w := range c.Windows {
		// A TTL goes in whole seconds, as a uint32 (0 past it: refused).
		ok = ok && w.Keep >= 1 && w.Keep <= lua.MaxEvidence && (w.TTL+time.Second-1)/time.Second <= math.MaxUint32
	}
	for _, e := range c.Entries {
		ok = ok && e.Window >= 0 && e.Window < len(c.Windows) && len(e.Text) <= lua.MaxEvidenceText &&
			!strings.Contains(e.Text, lua.EvidenceSep)
	}
	if !ok {
		return fmt.Errorf("backtest: an evidence call the script would refuse: %w", lua.ErrInvalidArguments)
	}
	return nil
}

// call runs one call: each window's entries appended, trimmed past the
// call's trim point, then the list each crossing asks for.
func (x *evidence) call(c *lua.Evidence) {
	texts := make([][]string, len(c.Windows)) // each window's, oldest first
	width := make([]int, len(c.Windows))      // the longest, with its separator
	for _, e := range c.Entries {
		texts[e.Window] = append(texts[e.Window], e.Text)
		width[e.Window] = max(width[e.Window], len(e.Text)+1)
	}
	olds := make([][]string, len(c.Windows))
	for i, w := range c.Windows {
		if texts[i] == nil {
			continue
		}
		old := x.current(w.Key)
		left, alive := x.windows.left(w.Window)
		olds[i] = old
		kept := append(slices.Clip(old), texts[i]...)
		if bytesOf(kept) > 2*w.Keep*width[i] {
			kept = kept[max(len(kept)-w.Keep, 0):]
		}
		x.lists[w.Key] = kept
		// A fixed window's end stays put, and so does its evidence's; a
		// sliding one's moves with each change, and so must its
		// evidence's.
		switch {
		case alive && (len(old) == 0 || w.Slides):
			x.set(w.Key, left)
		case len(old) > 0: // its end kept
		default:
			x.set(w.Key, max((w.TTL+time.Second-1)/time.Second*time.Second, time.Second)) // whole seconds, as sent
		}
	}
	c.Lists = [][]string{}
	seen := make([]int, len(c.Windows))
	for _, e := range c.Entries {
		seen[e.Window]++
		if !e.List {
			continue
		}
		upto := append(slices.Clip(olds[e.Window]), texts[e.Window][:seen[e.Window]]...)
		list := slices.Clone(upto[max(len(upto)-c.Windows[e.Window].Keep, 0):])
		slices.Reverse(list)
		c.Lists = append(c.Lists, list)
	}
}

// bytesOf is the length of entries in a window's evidence, each with its
// separator.
func bytesOf(entries []string) int {
	n := len(entries)
	for _, e := range entries {
		n += len(e)
	}
	return n
}

// current is the evidence under key, if it is alive.
func (x *evidence) current(key string) []string {
	if _, alive := x.left(key); !alive {
		return nil
	}
	return x.lists[key]
}

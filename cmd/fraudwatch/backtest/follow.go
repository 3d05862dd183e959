package backtest

import (
	"slices"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
)

// scoring is what a scored replay follows besides its alerts: the events
// of the fraud orders, by their offsets in the replay.
type scoring struct {
	fraud map[int64]bool
	// afterBatch, when set, is called after each batch of each share
	// (tests look into the share's server and its follower there).
	afterBatch func(*replayServer, *follower) error
}

// follower is a share's side of a scored replay: the windows it follows
// and the evidence it keeps, and the alerts whose windows it judges once
// every event is replayed.
type follower struct {
	windows    *windows
	evidence   *evidence
	keys       lua.Keys
	pending    []pending
	afterBatch func(*replayServer, *follower) error
}

// pending is an alert, by its place among the share's, whose window a
// fraud order may be counted into after it: the window's key, the
// crossing's offset, and the window's end, on the clock (fixed windows)
// or in event time (sliding ones).
type pending struct {
	index    int
	key      string
	offset   int64
	sliding  bool
	clockEnd time.Duration
	timeEnd  time.Time
}

func newFollower(s *scoring, base time.Time) *follower {
	w := newWindows(base, s.fraud)
	keys, _ := lua.NewKeysIn("backtest", 1) // a prefix and a count known good
	return &follower{windows: w, evidence: newEvidence(w), keys: keys, afterBatch: s.afterBatch}
}

// advance moves the share's clock to t.
func (f *follower) advance(t time.Time) {
	f.windows.advance(t, func(string) {})
	f.evidence.advance(t)
}

// crossed takes found[i], the copy of a, which is sent or a shadow
// rule's: the orders it lists, and its window for finish.
func (f *follower) crossed(found []batchAlert, i int, a alert.Alert, batch []*event.Event) {
	listed := []string{strings.Clone(a.OrderID)}
	for _, e := range a.Evidence {
		if !slices.Contains(listed, e.OrderID) {
			listed = append(listed, strings.Clone(e.OrderID))
		}
	}
	found[i].Listed = listed
	g, err := f.keys.ParseGroup(a.Group)
	if err != nil {
		return // no window to find: it catches no order after it
	}
	state := a.Rule + "." + a.Definition // rules.Rule.State
	p := pending{index: i, key: f.keys.Counter(g, state), offset: -1, sliding: a.WindowType == alert.Sliding}
	if p.sliding || a.Metric == alert.Distinct {
		p.key = f.keys.Window(g, state)
	}
	for _, ev := range batch {
		if ev.EventID == a.EventID && ev.OrderID == a.OrderID {
			p.offset, p.timeEnd = ev.Source.Offset, ev.Source.Time.Add(a.Window)
			break
		}
	}
	left, _ := f.windows.left(p.key)
	p.clockEnd = f.windows.now + left
	if p.offset >= 0 {
		f.pending = append(f.pending, p)
	}
}

// finish gives each alert taken the fraud orders counted into its window
// after its crossing, before the window ended: on the replay's clock for a
// fixed window (its key's end), by event time for a sliding one (the
// windows that still hold the crossing order).
func (f *follower) finish(found []batchAlert, evs *Events) {
	for _, p := range f.pending {
		var caught []string
		for _, c := range f.windows.counted[p.key] {
			switch {
			case c.offset <= p.offset:
			case p.sliding && !evs.list[c.offset].at.Before(p.timeEnd):
			case !p.sliding && c.clock >= p.clockEnd:
			default:
				if order := evs.list[c.offset].order; !slices.Contains(caught, order) {
					caught = append(caught, order)
				}
			}
		}
		found[p.index].CaughtAfter = caught
	}
}

package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Limits of a replay's batches. A batch is counted as one step of Redis's
// clock, so it spans little event time: fixed windows, which run on
// Redis's clock, then open and close as they did when the events came.
const (
	batchSize = 500
	batchSpan = time.Second
	// clockStep is how far event time moves before Redis's clock follows.
	// Windows and cooldowns are whole seconds; a key expires at most this
	// much late.
	clockStep = time.Second
)

// collector is the engine's sink: it keeps the crossings of a batch.
type collector struct{ alerts []alert.Alert }

func (c *collector) Publish(_ context.Context, alerts ...alert.Alert) error {
	c.alerts = append(c.alerts, alerts...)
	return nil
}

// Replay runs the events through rs on fresh in-process Redis servers, the
// scripts' work done by engine. progress, when set, is called now and then
// with the events replayed so far by every server.
//
// Rules keep their own windows, marks and cooldowns, so they are replayed
// apart: a share of them on each of up to GOMAXPROCS servers, each share
// over every event, at once. A replay waits on its server's answers (one
// goroutine hands calls to another), so even two cores gain. What a rule
// does does not depend on the share it is in: each share steps its clock
// and cuts its batches as the events alone say.
func Replay(ctx context.Context, rs []rules.Rule, evs *Events, engine Engine, progress func(done int)) (*Report, error) {
	return replay(ctx, []RuleSet{{Rules: rs}}, evs, replayConfig{engine: engine, progress: progress, parallel: runtime.GOMAXPROCS(0)})
}

// replayConfig is how a replay runs: its engine, its progress, over at
// most parallel servers, and, when score is set, scored.
type replayConfig struct {
	engine   Engine
	progress func(done int)
	parallel int
	score    *scoring
}

// replay is ReplaySets as c says. The report's version is the last set's.
func replay(ctx context.Context, sets []RuleSet, evs *Events, c replayConfig) (*Report, error) {
	rep := &Report{Version: rules.Version(sets[len(sets)-1].Rules)}
	if n := len(evs.list); n > 0 {
		rep.From, rep.To = evs.list[0].at, evs.list[n-1].at
	}
	if c.score != nil {
		if err := checkFollowed(); err != nil {
			return nil, err
		}
	}
	rs := allRules(sets)
	n := max(1, min(len(rs), c.parallel))
	shares := shareSets(sets, rs, n, c.score != nil)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := &shareProgress{done: make([]int, n), report: c.progress}
	found := make([][]batchAlert, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, share := range shares {
		wg.Go(func() {
			found[i], errs[i] = replayShare(ctx, share, evs, c, func(d int) { done.update(i, d) })
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// A share's own failure, rather than the others' cancellation.
	slices.SortStableFunc(errs, func(a, b error) int {
		return cmp.Compare(rank(a), rank(b))
	})
	if errs[0] != nil {
		return nil, errs[0]
	}
	// In the order of the batches, then of the crossing events' times,
	// then of the rules: the same whatever the shares. A rule's crossings
	// of one time keep their order.
	order := make(map[string]int, len(rs))
	for i, r := range rs {
		order[r.Name] = i
	}
	all := slices.Concat(found...)
	slices.SortStableFunc(all, func(a, b batchAlert) int {
		return cmp.Or(cmp.Compare(a.batch, b.batch), a.At.Compare(b.At), cmp.Compare(order[a.Rule], order[b.Rule]))
	})
	for _, a := range all {
		rep.Alerts = append(rep.Alerts, a.Alert)
	}
	rep.Rules = summarize(rs, rep.Alerts)
	return rep, nil
}

// rank orders a replay's errors: failures first, then cancellations, then
// none.
func rank(err error) int {
	switch {
	case err == nil:
		return 2
	case errors.Is(err, context.Canceled):
		return 1
	}
	return 0
}

// batchAlert is an alert and the batch it came in.
type batchAlert struct {
	Alert
	batch int
}

// shareProgress reports the events that every share has replayed.
type shareProgress struct {
	mu     sync.Mutex
	done   []int
	report func(int)
}

// add is update for replays that each replay every event (a sweep's):
// it reports the events they replayed in all.
func (p *shareProgress) add(replay, done int) {
	if p.report == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[replay] = done
	sum := 0
	for _, d := range p.done {
		sum += d
	}
	p.report(sum)
}

func (p *shareProgress) update(share, done int) {
	if p.report == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[share] = done
	p.report(slices.Min(p.done))
}

// share is one share's replay: its server, the engine over it, and what
// it found.
type share struct {
	srv       *replayServer
	scripts   *lua.Scripts
	keys      lua.Keys
	eng       *rules.Engine
	sink      *collector
	clock     time.Time // the engine's, the latest time of the batch
	redisTime time.Time // the server's
	follow    *follower // a scored replay's; nil for a plain one
	found     []batchAlert
}

// newShare starts a share's server and engine, under the first set.
func newShare(sets []RuleSet, evs *Events, c replayConfig) (*share, error) {
	s := &share{sink: &collector{}}
	if len(evs.list) > 0 {
		s.redisTime = evs.list[0].at
	}
	var err error
	if s.srv, err = newServer(c.engine, s.redisTime); err != nil {
		return nil, err
	}
	rdb := s.srv.rdb
	if c.score != nil {
		s.follow = newFollower(c.score, s.redisTime)
		rdb = tapped(rdb, s.follow.windows)
	}
	if s.scripts, err = lua.New(lua.Config{}, rdb, nil); err != nil {
		s.srv.close()
		return nil, err
	}
	counters := replayScripts{Scripts: s.scripts}
	if s.follow != nil {
		counters.evidence = s.follow.evidence
	}
	// One bucket: no cluster to spread keys over, and each call costs
	// more than each change (in miniredis, a Lua state of its own).
	s.eng, err = rules.NewEngine(rules.EngineConfig{KeyPrefix: "backtest", Now: func() time.Time { return s.clock }, Buckets: 1},
		sets[0].Rules, counters, s.sink, nil, nil)
	if err == nil {
		s.keys, err = lua.NewKeysIn("backtest", 1)
	}
	if err != nil {
		s.srv.close()
		return nil, err
	}
	return s, nil
}

// replayShare runs every event through the sets on a fresh in-process
// Redis and returns their crossings in the order the engine found them.
func replayShare(ctx context.Context, sets []RuleSet, evs *Events, c replayConfig, progress func(done int)) ([]batchAlert, error) {
	s, err := newShare(sets, evs, c)
	if err != nil {
		return nil, err
	}
	defer s.srv.close()
	list := evs.list
	next := 1 // the next set to take effect
	for start, batchNo := 0, 0; start < len(list); batchNo++ {
		// A set takes effect between batches, as a reload does.
		for ; next < len(sets) && !list[start].at.Before(sets[next].At); next++ {
			s.eng.SetRules(sets[next].Rules)
		}
		end := start + 1
		for end < len(list) && end-start < batchSize && list[end].at.Sub(list[start].at) < batchSpan &&
			(next == len(sets) || list[end].at.Before(sets[next].At)) {
			end++
		}
		if err := s.batch(ctx, evs, start, end, batchNo); err != nil {
			return nil, err
		}
		start = end
		if progress != nil {
			progress(start)
		}
	}
	if s.follow != nil {
		s.follow.finish(s.found, evs)
	}
	return s.found, nil
}

// batch replays events start to end, the batch numbered batchNo.
func (s *share) batch(ctx context.Context, evs *Events, start, end, batchNo int) error {
	batch, err := evs.decoded(start, end)
	if err != nil {
		return err
	}
	// Redis's clock moves to the batch, so that TTLs (fixed windows,
	// cooldowns) run out as they did, to within clockStep.
	if at := batch[0].Source.Time; at.Sub(s.redisTime) >= clockStep {
		s.srv.advance(at)
		s.redisTime = at
		if s.follow != nil {
			s.follow.advance(at)
		}
	}
	s.clock = batch[len(batch)-1].Source.Time
	s.sink.alerts = s.sink.alerts[:0]
	if _, err := s.eng.Handle(ctx, batch); err != nil {
		return fmt.Errorf("backtest: events %d to %d: %w", start, end, err)
	}
	if s.follow != nil && s.follow.windows.err != nil {
		return s.follow.windows.err
	}
	for _, a := range s.sink.alerts {
		outcome, err := claim(ctx, s.scripts, s.keys, a)
		if err != nil {
			return err
		}
		// Copies: the batch's events share one allocation, which an
		// alert must not keep.
		s.found = append(s.found, batchAlert{batch: batchNo, Alert: Alert{At: a.At, Rule: a.Rule, Group: groupText(a),
			Value: a.Current, Order: strings.Clone(a.OrderID), Event: strings.Clone(a.EventID), Outcome: outcome}})
		if s.follow != nil && outcome != dispatch.SuppressedCooldown {
			s.follow.crossed(s.found, len(s.found)-1, a, batch)
		}
	}
	if s.follow != nil && s.follow.afterBatch != nil {
		return s.follow.afterBatch(s.srv, s.follow)
	}
	return nil
}

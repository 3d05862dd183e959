package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/model"
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
	return replay(ctx, []RuleSet{{Rules: rs}}, evs, engine, progress, runtime.GOMAXPROCS(0))
}

// replay is ReplaySets over at most parallel servers. The report's version
// is the last set's.
func replay(ctx context.Context, sets []RuleSet, evs *Events, engine Engine, progress func(done int), parallel int) (*Report, error) {
	rep := &Report{Version: rules.Version(sets[len(sets)-1].Rules)}
	if n := len(evs.list); n > 0 {
		rep.From, rep.To = evs.list[0].at, evs.list[n-1].at
	}
	rs := allRules(sets)
	n := max(1, min(len(rs), parallel))
	shares := shareSets(sets, rs, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := &shareProgress{done: make([]int, n), report: progress}
	found := make([][]batchAlert, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, share := range shares {
		wg.Go(func() {
			found[i], errs[i] = replayShare(ctx, share, evs, engine, func(d int) { done.update(i, d) })
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

func (p *shareProgress) update(share, done int) {
	if p.report == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[share] = done
	p.report(slices.Min(p.done))
}

// replayShare runs every event through rs on a fresh in-process Redis and
// returns their crossings in the order the engine found them.
func replayShare(ctx context.Context, sets []RuleSet, evs *Events, engine Engine, progress func(done int)) ([]batchAlert, error) {
	list := evs.list
	var redisTime time.Time
	if len(list) > 0 {
		redisTime = list[0].at
	}
	srv, err := newServer(engine, redisTime)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	scripts, err := lua.New(lua.Config{}, srv.rdb, nil)
	if err != nil {
		return nil, err
	}
	var clock time.Time // the engine's, the latest time of the batch
	sink := &collector{}
	// One bucket: no cluster to spread keys over, and each call costs
	// more than each change (in miniredis, a Lua state of its own).
	eng, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: "backtest", Now: func() time.Time { return clock }, Buckets: 1},
		sets[0].Rules, unsealed{scripts}, sink, nil, nil)
	if err != nil {
		return nil, err
	}
	keys, err := lua.NewKeysIn("backtest", 1)
	if err != nil {
		return nil, err
	}
	var found []batchAlert
	next := 1 // the next set to take effect
	for start, batchNo := 0, 0; start < len(list); batchNo++ {
		// A set takes effect between batches, as a reload does.
		for ; next < len(sets) && !list[start].at.Before(sets[next].At); next++ {
			eng.SetRules(sets[next].Rules)
		}
		end := start + 1
		for end < len(list) && end-start < batchSize && list[end].at.Sub(list[start].at) < batchSpan &&
			(next == len(sets) || list[end].at.Before(sets[next].At)) {
			end++
		}
		batch, err := evs.decoded(start, end)
		if err != nil {
			return nil, err
		}
		// Redis's clock moves to the batch, so that TTLs (fixed windows,
		// cooldowns) run out as they did, to within clockStep.
		if at := batch[0].Source.Time; at.Sub(redisTime) >= clockStep {
			srv.advance(at)
			redisTime = at
		}
		clock = batch[len(batch)-1].Source.Time
		sink.alerts = sink.alerts[:0]
		if _, err := eng.Handle(ctx, batch); err != nil {
			return nil, fmt.Errorf("backtest: events %d to %d: %w", start, end, err)
		}
		for _, a := range sink.alerts {
			outcome, err := claim(ctx, scripts, keys, a)
			if err != nil {
				return nil, err
			}
			// Copies: the batch's events share one allocation, which an
			// alert must not keep.
			found = append(found, batchAlert{batch: batchNo, Alert: Alert{At: a.At, Rule: a.Rule, Group: groupText(a),
				Value: a.Current, Order: strings.Clone(a.OrderID), Event: strings.Clone(a.EventID), Outcome: outcome}})
		}
		start = end
		if progress != nil {
			progress(start)
		}
	}
	return found, nil
}

// unsealed is the scripts without the alerts' seals: a replay's alerts go
// to no dispatcher, so nothing would read them. (Written, a batch's seals
// are one pipeline of two commands an alert, which miniredis's in-memory
// pipe, unbuffered, could not take: the server blocked answering the
// first while the client still wrote the rest.)
type unsealed struct{ *lua.Scripts }

func (unsealed) Seal(context.Context, string, []lua.Seal) error { return nil }

// Engine is what does the scripts' work in a replay.
type Engine int

const (
	// Model runs what the scripts do in Go (package lua/model, held to
	// the scripts by its tests), over ten times faster.
	Model Engine = iota
	// Lua runs the scripts themselves, in miniredis's Lua interpreter.
	Lua
)

// String is how a report names the engine.
func (e Engine) String() string {
	if e == Lua {
		return "lua"
	}
	return "go model"
}

// replayServer is a replay's Redis: a client for the scripts' calls that never
// leaves the process, and its clock.
type replayServer struct {
	rdb     *redis.Client
	advance func(now time.Time) // moves the clock to now: keys due expire
	close   func()
}

func newServer(engine Engine, now time.Time) (*replayServer, error) {
	if engine == Model {
		st := model.New(now)
		rdb := st.Client()
		return &replayServer{rdb: rdb, advance: st.SetTime, close: func() { rdb.Close() }}, nil
	}
	// No listener: the client's connections are pipes in memory, so a
	// replay opens no port and never touches the network.
	mr := miniredis.NewMiniRedis()
	clk, err := newExpiry(mr, now)
	if err != nil {
		mr.Close()
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return mr.Dial() }})
	return &replayServer{rdb: rdb, advance: clk.advance, close: func() { rdb.Close(); mr.Close() }}, nil
}

// claim decides an alert as the dispatcher does: shadow rules never
// notify, and an alert whose (rule, group) holds a cooldown is suppressed.
// Its record is the replay's own receiver's ("backtest"), claimed by the
// alert's one delivery.
func claim(ctx context.Context, s *lua.Scripts, keys lua.Keys, a alert.Alert) (string, error) {
	if a.Shadow() {
		return dispatch.SuppressedShadow, nil
	}
	g, err := keys.ParseGroup(a.Group)
	if err != nil {
		return "", fmt.Errorf("backtest: claim alert: %w", err)
	}
	c := lua.AlertClaim{CooldownKey: a.CooldownKey, RecordKey: keys.Record(g, a.Rule, a.EventID, "backtest"),
		LegacyKey: a.RecordKey, AlertKey: keys.Alert(g, a.Rule, a.EventID), ID: a.ID, Claimant: "backtest", Cooldown: a.Cooldown}
	claimed, err := s.ClaimAlert(ctx, c)
	if err != nil {
		return "", fmt.Errorf("backtest: claim alert: %w", err)
	}
	if claimed != lua.ClaimSend {
		return dispatch.SuppressedCooldown, nil
	}
	err = s.SettleAlerts(ctx, lua.SettleSent, lua.Settlement{CooldownKey: c.CooldownKey, RecordKey: c.RecordKey, AlertKey: c.AlertKey,
		ID: c.ID, Claimant: c.Claimant})
	if err != nil {
		return "", fmt.Errorf("backtest: settle alert: %w", err)
	}
	return "sent", nil
}

func groupText(a alert.Alert) string {
	parts := make([]string, len(a.GroupBy))
	for i, f := range a.GroupBy {
		v := ""
		if i < len(a.GroupValues) {
			v = a.GroupValues[i]
		}
		parts[i] = f + "=" + v
	}
	return strings.Join(parts, ",")
}

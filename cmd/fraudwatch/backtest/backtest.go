// Package backtest replays recorded events through the rules and the calls
// production's engine makes to its scripts, answered inside this process
// (never by the production Redis; the rules shared among several answerers)
// by the scripts' Go model (lua/model) or, for Lua, by the Lua scripts
// themselves in miniredis, in event-time order, and reports what the rules
// would have done: crossings, alerts after cooldowns, the groups that
// crossed most, and the alert list. It is what `fraudwatch backtest` runs.
package backtest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
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

// Events is a replay's input, in event-time order. It keeps each event as
// the bytes it came as, and decodes them again, a batch at a time, as they
// are replayed: a decoded event takes more than twice its message's bytes,
// and a replay holds every event at once, since it sorts them first.
type Events struct {
	list []record
	// Invalid counts the lines that are not events, by reason.
	Invalid map[event.Reason]int
	Orders  int
	Refunds int
	// RuleSets are the rules lines of the input, in its order: the rules
	// a recording ran under (see RulesType).
	RuleSets []RuleSet
}

// Len is how many events there are.
func (e *Events) Len() int { return len(e.list) }

// record is one valid event as it came: its bytes, the type its topic
// implies ("" for a line, which must say), and its time.
type record struct {
	data []byte
	typ  event.Type
	at   time.Time
}

// decoded decodes events from to to, which are one partition in event-time
// order: the windows take their offsets as the order of the events. They
// share their allocations, which live as long as any of them does.
func (e *Events) decoded(from, to int) ([]*event.Event, error) {
	values := make([][]byte, to-from)
	for i, r := range e.list[from:to] {
		values[i] = r.data
	}
	b := event.NewBatch(values)
	evs := make([]*event.Event, len(values))
	for i, r := range e.list[from:to] {
		ev, err := b.Decode(i, r.typ)
		if err != nil {
			// Every record was decoded once, when it was read.
			return nil, fmt.Errorf("backtest: event %d no longer decodes: %w", from+i, err)
		}
		ev.Source = event.Source{Topic: "backtest", Partition: 0, Offset: int64(from + i), Time: r.at}
		evs[i] = ev
	}
	return evs, nil
}

// reader builds Events: it checks each event as it comes, counts the
// invalid ones, and keeps the valid ones' bytes in large blocks, so that
// a record costs its bytes and a few words.
type reader struct {
	evs Events
	// maxBytes bounds an event, as kafka.max_event_bytes bounds the
	// consumer's messages: a larger one is oversized, as it would be there.
	maxBytes int
	last     time.Time // the time of the event before
	block    []byte
}

// blockSize is the size of the blocks records are kept in.
const blockSize = 1 << 20

func newReader(maxBytes int) *reader {
	return &reader{evs: Events{Invalid: map[event.Reason]int{}}, maxBytes: maxBytes}
}

// add checks one event: its bytes, the type its topic implies ("" for a
// line, which must say), and its record's time (zero for a line). Its time
// is its occurred_at, else its record's time, else the time of the event
// before. data is copied.
func (r *reader) add(data []byte, typ event.Type, recordTime time.Time) {
	if len(data) > r.maxBytes {
		r.evs.Invalid[event.ReasonOversized]++
		return
	}
	ev, err := event.Decode(data, typ)
	if err != nil {
		reason := event.ReasonMalformedJSON
		if inv, ok := errors.AsType[*event.InvalidError](err); ok {
			reason = inv.Reason
		}
		r.evs.Invalid[reason]++
		return
	}
	switch {
	case !ev.OccurredAt.IsZero():
		r.last = ev.OccurredAt
	case !recordTime.IsZero():
		r.last = recordTime
	}
	if ev.Type == event.Refund {
		r.evs.Refunds++
	} else {
		r.evs.Orders++
	}
	if cap(r.block)-len(r.block) < len(data) {
		r.block = make([]byte, 0, max(blockSize, len(data)))
	}
	n := len(r.block)
	r.block = append(r.block, data...)
	r.evs.list = append(r.evs.list, record{data: r.block[n:len(r.block):len(r.block)], typ: typ, at: r.last})
}

// done puts the events in event-time order, those of one time in the order
// they came.
func (r *reader) done() *Events {
	slices.SortStableFunc(r.evs.list, func(a, b record) int { return a.at.Compare(b.at) })
	r.evs.list = slices.Clip(r.evs.list)
	return &r.evs
}

// Read reads JSON-lines events, one event a line with its "type" as
// `fraudwatch produce` takes them, and puts them in event-time order. An
// event's time is its occurred_at; one without takes the time of the line
// before it. Blank lines are skipped; other lines that are not valid events
// are counted by reason, and a line longer than maxBytes (the consumer's
// kafka.max_event_bytes) is oversized, as its message would be, without
// being kept whole. Rules lines (RulesType) go to RuleSets; one that is
// not usable, or not later than the one before, fails the read.
func Read(in io.Reader, maxBytes int) (*Events, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("backtest: an event's bound must be positive, not %d", maxBytes)
	}
	// Room for the longest event, its \r\n, and one byte more that tells
	// a longer line.
	br := bufio.NewReaderSize(in, maxBytes+3)
	r := newReader(maxBytes)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			r.evs.Invalid[event.ReasonOversized]++
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			line = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("backtest: read: %w", err)
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case IsRulesLine(line):
			if err := r.addRules(line, n); err != nil {
				return nil, err
			}
		case len(bytes.TrimSpace(line)) > 0:
			r.add(line, "", time.Time{})
		}
		if err != nil {
			return r.done(), nil
		}
	}
}

// Alert is one crossing of the replay and what became of it.
type Alert struct {
	At    time.Time `json:"at"`
	Rule  string    `json:"rule"`
	Group string    `json:"group"`
	Value int64     `json:"value"`
	Order string    `json:"order_id"`
	Event string    `json:"event_id"`
	// Outcome is "sent", or why not: "cooldown" or "shadow".
	Outcome string `json:"outcome"`
}

// Rule sums up one rule's crossings.
type Rule struct {
	Name      string       `json:"name"`
	Crossings int          `json:"crossings"`
	Sent      int          `json:"alerts"`
	Cooldown  int          `json:"suppressed_cooldown"`
	Shadow    int          `json:"suppressed_shadow"`
	Top       []GroupCount `json:"top_groups"`
}

// GroupCount is how often one group crossed one rule.
type GroupCount struct {
	Group     string `json:"group"`
	Crossings int    `json:"crossings"`
}

// Report is what a replay found.
type Report struct {
	Version string    `json:"rules_version"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Rules   []Rule    `json:"rules"`
	Alerts  []Alert   `json:"alerts"`
}

// topGroups is how many groups a rule's summary names.
const topGroups = 3

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
		sets[0].Rules, scripts, sink, nil, nil)
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
			outcome, err := claim(ctx, scripts, a)
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
func claim(ctx context.Context, s *lua.Scripts, a alert.Alert) (string, error) {
	if a.Shadow() {
		return alert.SuppressedShadow, nil
	}
	c, err := s.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, a.Cooldown)
	if err != nil {
		return "", fmt.Errorf("backtest: claim alert: %w", err)
	}
	if c != lua.ClaimSend {
		return alert.SuppressedCooldown, nil
	}
	if err := s.SettleAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, true); err != nil {
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

func summarize(rs []rules.Rule, alerts []Alert) []Rule {
	out := make([]Rule, len(rs))
	index := map[string]int{}
	groups := make([]map[string]int, len(rs))
	for i, r := range rs {
		out[i].Name = r.Name
		index[r.Name] = i
		groups[i] = map[string]int{}
	}
	for _, a := range alerts {
		i := index[a.Rule]
		out[i].Crossings++
		groups[i][a.Group]++
		switch a.Outcome {
		case "sent":
			out[i].Sent++
		case alert.SuppressedCooldown:
			out[i].Cooldown++
		case alert.SuppressedShadow:
			out[i].Shadow++
		}
	}
	for i := range out {
		out[i].Top = []GroupCount{}
		for g, n := range groups[i] {
			out[i].Top = append(out[i].Top, GroupCount{g, n})
		}
		slices.SortFunc(out[i].Top, func(a, b GroupCount) int {
			return cmp.Or(cmp.Compare(b.Crossings, a.Crossings), cmp.Compare(a.Group, b.Group))
		})
		out[i].Top = out[i].Top[:min(len(out[i].Top), topGroups)]
	}
	return out
}

// Difference is what changing the rules does to the alerts sent.
type Difference struct {
	Added   []Alert `json:"added"`
	Removed []Alert `json:"removed"`
}

// Compare lists the alerts sent under new but not old, and under old but
// not new, each in time order. Alerts of one rule and group are paired in
// time order: a group alerted under both, by another event, is no change.
func Compare(old, new *Report) Difference {
	key := func(a Alert) string { return a.Rule + "\x00" + a.Group }
	count := func(r *Report) map[string]int {
		m := map[string]int{}
		for _, a := range r.Alerts {
			if a.Outcome == "sent" {
				m[key(a)]++
			}
		}
		return m
	}
	// unpaired keeps the alerts of r beyond the number the other report
	// has of their rule and group.
	unpaired := func(r *Report, other map[string]int) []Alert {
		out := []Alert{}
		seen := map[string]int{}
		for _, a := range r.Alerts {
			if a.Outcome != "sent" {
				continue
			}
			k := key(a)
			if seen[k]++; seen[k] > other[k] {
				out = append(out, a)
			}
		}
		return out
	}
	return Difference{Added: unpaired(new, count(old)), Removed: unpaired(old, count(new))}
}

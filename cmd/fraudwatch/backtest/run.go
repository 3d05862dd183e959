package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// Options are one `fraudwatch backtest`.
type Options struct {
	// Rules are replayed; RulesFrom says where they came from. An input
	// that carries rules (a demo's recording, see RulesType) is replayed
	// under its own rules instead, unless RulesOverInput (--rules).
	// With no Rules, the input must carry rules (ErrNoRules).
	Rules          []rules.Rule
	RulesFrom      string
	RulesOverInput bool
	// SettingsFrom, when set, says where MaxEventBytes and RetryWindow
	// came from: a configuration file, or the defaults.
	SettingsFrom string
	// Compare, when set, is replayed too, and the alerts Rules add, remove
	// and move against it are listed, with each rule's totals under both
	// (see Compare); CompareFrom says where it came from.
	Compare     []rules.Rule
	CompareFrom string
	// Input is JSON lines (see Read), or, when nil, Events gives the
	// events (FromTopics); InputName names them.
	Input     io.Reader
	Events    func(context.Context) (*Events, error)
	InputName string
	// MaxEventBytes bounds an event of Input: a larger one is oversized,
	// as the consumer's kafka.max_event_bytes makes it (whose default it
	// takes when 0).
	MaxEventBytes int
	// RetryWindow is the consumer's kafka.retry_window: a line whose
	// event_id a line at most this many before had is a producer's retry,
	// not replayed, as the consumer does not process it (0: off).
	RetryWindow int
	// Engine does the scripts' work (Model, the default, or Lua).
	Engine Engine
	// Format is "text" (the default) or "json".
	Format string
	// Out receives the report; Progress, when set, a progress line now and
	// then (a terminal's).
	Out      io.Writer
	Progress io.Writer
	// Outcomes, when set, adds outcomes after the input's own outcome
	// lines (IsOutcomeLine): --outcomes FILE's, then the outcomes
	// topic's. A backtest with outcomes from either is scored
	// (docs/outcomes.md).
	Outcomes func(context.Context, *Outcomes) error
	// Now is when the backtest runs (default: when Run starts): an outcome
	// more than a day after it is refused, as the outcomes topic's
	// consumer refuses it.
	Now time.Time
	// Sweep, when set, replays its rule alone once for each of its values
	// and scores each, rather than the plain backtest; MaxAlertsPerDay,
	// when set, is the budget its rows are marked within.
	Sweep           *Sweep
	MaxAlertsPerDay *float64
}

// ErrNoRules is Run's error when Options give no rules and the input
// carries none.
var ErrNoRules = errors.New("no rules")

// result is what a backtest found: the replay of the rules (rep) and, with
// Compare, of the old ones; and, scored, their scores.
type result struct {
	evs               *Events
	rep, old          *Report
	scores, oldScores *Scores
}

// Run replays the input and writes the report.
func Run(ctx context.Context, o Options) error {
	if err := o.check(); err != nil {
		return err
	}
	evs, err := o.read(ctx)
	if err != nil {
		return stopped(ctx, err)
	}
	sets := []RuleSet{{Rules: o.Rules}}
	if len(evs.RuleSets) > 0 && !o.RulesOverInput {
		sets, o.RulesFrom = evs.RuleSets, recordedFrom(o.InputName, evs.RuleSets)
	}
	if len(sets[0].Rules) == 0 {
		return fmt.Errorf("backtest: %w: %s carries none", ErrNoRules, o.InputName)
	}
	tr, err := o.truth(ctx, evs)
	if err != nil {
		return stopped(ctx, err)
	}
	if o.Sweep != nil {
		return o.sweep(ctx, evs, sets, *tr)
	}
	res := result{evs: evs}
	c := replayConfig{engine: o.Engine, progress: o.progress(o.RulesFrom, evs.Len()), parallel: runtime.GOMAXPROCS(0)}
	if tr != nil {
		c.score = &scoring{fraud: tr.fraud}
	}
	if res.rep, err = replaySets(ctx, sets, evs, c); err != nil {
		return stopped(ctx, err)
	}
	if o.Compare != nil {
		c.progress = o.progress(o.CompareFrom, evs.Len())
		if res.old, err = replay(ctx, []RuleSet{{Rules: o.Compare}}, evs, c); err != nil {
			return stopped(ctx, err)
		}
	}
	if tr != nil {
		s := tr.score(res.rep)
		res.scores = &s
		if res.old != nil {
			old := tr.score(res.old)
			res.oldScores = &old
		}
	}
	if o.Format == "json" {
		return writeJSON(o, res)
	}
	return writeText(o, res)
}

// check fills in the defaults and refuses options that cannot run.
func (o *Options) check() error {
	o.Format = cmp.Or(o.Format, "text")
	if o.MaxEventBytes == 0 {
		o.MaxEventBytes = config.Default().Kafka.MaxEventBytes
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	switch {
	case o.Format != "text" && o.Format != "json":
		return fmt.Errorf("backtest: --format must be text or json, not %q", o.Format)
	case len(o.Rules) == 0 && o.Input == nil:
		return fmt.Errorf("backtest: %w: topics carry none", ErrNoRules) // only a recording does
	case o.Sweep != nil && o.Compare != nil:
		return errors.New("backtest: --sweep and --compare do not go together")
	case o.MaxAlertsPerDay != nil && o.Sweep == nil:
		return errors.New("backtest: --max-alerts-per-day is a sweep's budget: give --sweep")
	case o.MaxAlertsPerDay != nil && *o.MaxAlertsPerDay < 0:
		return fmt.Errorf("backtest: --max-alerts-per-day must not be negative, not %v", *o.MaxAlertsPerDay)
	}
	return nil
}

// read reads the input's events.
func (o *Options) read(ctx context.Context) (*Events, error) {
	switch {
	case o.Input != nil:
		return readUntilDone(ctx, o.Input, o.MaxEventBytes, o.RetryWindow)
	case o.Events != nil:
		return o.Events(ctx)
	}
	return nil, errors.New("backtest: no input")
}

// truth reads the outcomes, the input's own lines first, and what they
// say of the input; nil when the backtest is not scored: no outcome lines
// in the input, no Outcomes and no sweep.
func (o *Options) truth(ctx context.Context, evs *Events) (*truth, error) {
	if len(evs.OutcomeLines) == 0 && o.Outcomes == nil && o.Sweep == nil {
		return nil, nil
	}
	outs := NewOutcomes(o.Now)
	for _, l := range evs.OutcomeLines {
		outs.Add(l)
	}
	if o.Outcomes != nil {
		if err := o.Outcomes(ctx, outs); err != nil {
			return nil, err
		}
	}
	t := truthOf(evs, outs)
	return &t, nil
}

// progress is a replay's progress line, when Progress is set.
func (o *Options) progress(what string, total int) func(int) {
	if o.Progress == nil {
		return nil
	}
	return newProgress(o.Progress, what, total, time.Now).update
}

// stopped says that a run was interrupted (a signal), rather than where
// the interruption happened to find it: a script call, a fetch.
// readUntilDone reads the input as Read does, but returns when ctx ends
// too: a read of standard input waits for as long as its writer, however
// often the user presses Ctrl-C. The read goes on until its input ends or
// fails; the command does not wait for it.
func readUntilDone(ctx context.Context, in io.Reader, maxBytes, retryWindow int) (*Events, error) {
	type read struct {
		evs *Events
		err error
	}
	done := make(chan read, 1)
	go func() {
		evs, err := readEvents(in, maxBytes, retryWindow)
		done <- read{evs, err}
	}()
	select {
	case r := <-done:
		return r.evs, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("backtest: interrupted, nothing reported: %w", context.Cause(ctx))
	}
	return err
}

// progress keeps a terminal's line up to date while a replay runs: how
// many events it has replayed, at what rate, and about how long it has
// left. A replay of a day can take minutes.
type progress struct {
	w           io.Writer
	what        string
	total       int
	now         func() time.Time
	began, last time.Time
}

// progressEvery is how often the line is written again at most.
const progressEvery = 100 * time.Millisecond

func newProgress(w io.Writer, what string, total int, now func() time.Time) *progress {
	t := now()
	return &progress{w: w, what: what, total: total, now: now, began: t, last: t}
}

// update says that done events have been replayed; the last call says all.
func (p *progress) update(done int) {
	now := p.now()
	if done < p.total && now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	line := fmt.Sprintf("backtest: %s: %d of %d events", p.what, done, p.total)
	elapsed := now.Sub(p.began)
	if done > 0 && elapsed > 0 {
		rate := float64(done) / elapsed.Seconds()
		if done < p.total {
			left := time.Duration(float64(p.total-done) / rate * float64(time.Second))
			line += fmt.Sprintf(", %.0f events/s, about %v left", rate, left.Round(time.Second))
		} else {
			line += fmt.Sprintf(" in %v, %.0f events/s", elapsed.Round(time.Millisecond), rate)
		}
	}
	// \r goes back to the line's start, \x1b[K clears what a longer line
	// before left.
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	if done >= p.total {
		fmt.Fprintln(p.w)
	}
}

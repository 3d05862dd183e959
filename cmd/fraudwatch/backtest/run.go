package backtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
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
}

// ErrNoRules is Run's error when Options give no rules and the input
// carries none.
var ErrNoRules = errors.New("no rules")

// Run replays the input and writes the report.
func Run(ctx context.Context, o Options) error {
	if o.Format == "" {
		o.Format = "text"
	}
	if o.MaxEventBytes == 0 {
		o.MaxEventBytes = config.Default().Kafka.MaxEventBytes
	}
	if o.Format != "text" && o.Format != "json" {
		return fmt.Errorf("backtest: --format must be text or json, not %q", o.Format)
	}
	if len(o.Rules) == 0 && o.Input == nil {
		return fmt.Errorf("backtest: %w: topics carry none", ErrNoRules) // only a recording does
	}
	var evs *Events
	var err error
	switch {
	case o.Input != nil:
		evs, err = readUntilDone(ctx, o.Input, o.MaxEventBytes, o.RetryWindow)
	case o.Events != nil:
		evs, err = o.Events(ctx)
	default:
		err = errors.New("backtest: no input")
	}
	if err != nil {
		return stopped(ctx, err)
	}
	progress := func(string) func(int) { return nil }
	if o.Progress != nil {
		progress = func(what string) func(int) {
			return newProgress(o.Progress, what, evs.Len(), time.Now).update
		}
	}
	sets := []RuleSet{{Rules: o.Rules}}
	if len(evs.RuleSets) > 0 && !o.RulesOverInput {
		sets, o.RulesFrom = evs.RuleSets, recordedFrom(o.InputName, evs.RuleSets)
	}
	if len(sets[0].Rules) == 0 {
		return fmt.Errorf("backtest: %w: %s carries none", ErrNoRules, o.InputName)
	}
	rep, err := ReplaySets(ctx, sets, evs, o.Engine, progress(o.RulesFrom))
	if err != nil {
		return stopped(ctx, err)
	}
	var old *Report
	if o.Compare != nil {
		if old, err = Replay(ctx, o.Compare, evs, o.Engine, progress(o.CompareFrom)); err != nil {
			return stopped(ctx, err)
		}
	}
	if o.Format == "json" {
		return writeJSON(o, evs, rep, old)
	}
	return writeText(o, evs, rep, old)
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

// replayJSON is a plain backtest's JSON: one rule set's replay of the
// input.
type replayJSON struct {
	Input        string         `json:"input"`
	Orders       int            `json:"orders"`
	Refunds      int            `json:"refunds"`
	Invalid      map[string]int `json:"invalid"`
	Retried      int            `json:"retried"`
	RulesFrom    string         `json:"rules_from"`
	SettingsFrom string         `json:"settings_from"`
	Scripts      string         `json:"scripts"`
	Report       *Report        `json:"report"`
}

// writeJSON writes rep as a plain backtest's JSON; against old, both
// replays (old, new) and the comparison.
func writeJSON(o Options, evs *Events, rep, old *Report) error {
	invalid := map[string]int{}
	for r, n := range evs.Invalid {
		invalid[string(r)] = n
	}
	of := func(from string, r *Report) replayJSON {
		return replayJSON{o.InputName, evs.Orders, evs.Refunds, invalid, evs.Retried, from, o.SettingsFrom, o.Engine.String(), r}
	}
	var out any = of(o.RulesFrom, rep)
	if old != nil {
		out = struct {
			Old     replayJSON `json:"old"`
			New     replayJSON `json:"new"`
			Compare Difference `json:"compare"`
		}{of(o.CompareFrom, old), of(o.RulesFrom, rep), Compare(old, rep)}
	}
	enc := json.NewEncoder(o.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeText(o Options, evs *Events, rep, old *Report) error {
	w := o.Out
	fmt.Fprintf(w, "backtest of %s: %s (%s, %s)", o.InputName, plural(evs.Len(), "event"), plural(evs.Orders, "order"), plural(evs.Refunds, "refund"))
	if evs.Len() > 0 {
		fmt.Fprintf(w, " from %s to %s", stamp(rep.From), stamp(rep.To))
	}
	fmt.Fprintln(w)
	if len(evs.Invalid) > 0 {
		total := 0
		var parts []string
		for _, r := range slices.Sorted(maps.Keys(evs.Invalid)) {
			total += evs.Invalid[r]
			parts = append(parts, fmt.Sprintf("%s %d", r, evs.Invalid[r]))
		}
		fmt.Fprintf(w, "invalid lines: %d (%s)\n", total, strings.Join(parts, ", "))
	}
	if evs.Retried > 0 {
		fmt.Fprintf(w, "retries: %d (second records of an event, not replayed)\n", evs.Retried)
	}
	fmt.Fprintf(w, "rules: %s, version %s; ", o.RulesFrom, rep.Version)
	if o.SettingsFrom != "" {
		fmt.Fprintf(w, "settings: %s; ", o.SettingsFrom)
	}
	fmt.Fprintf(w, "scripts: %s\n\n", o.Engine)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tCROSSINGS\tALERTS\tCOOLDOWN\tSHADOW\tTOP GROUPS")
	for _, r := range rep.Rules {
		top := make([]string, len(r.Top))
		for i, g := range r.Top {
			top[i] = fmt.Sprintf("%s (%d)", g.Group, g.Crossings)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", r.Name, r.Crossings, r.Sent, r.Cooldown, r.Shadow, cmp.Or(strings.Join(top, ", "), "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncrossings (%d): time, rule, group, value, order, outcome\n", len(rep.Alerts))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range rep.Alerts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", stamp(a.At), a.Rule, a.Group, a.Value, a.Order, a.Outcome)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if old != nil {
		return writeDifference(w, o.CompareFrom, Compare(old, rep))
	}
	return nil
}

// stampLayout prints a time at one width, in UTC to the millisecond: an
// input's events may carry several zones, and finer digits than a Kafka
// record's timestamp are noise in a replay whose clock steps by seconds.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

func stamp(t time.Time) string { return t.UTC().Format(stampLayout) }

// plural is "1 order", "2 orders".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

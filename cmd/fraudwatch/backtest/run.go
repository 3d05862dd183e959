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
	Rules          []rules.Rule
	RulesFrom      string
	RulesOverInput bool
	// Compare, when set, is replayed too, and the alerts Rules add and
	// remove against it are listed; CompareFrom says where it came from.
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
	// Engine does the scripts' work (Model, the default, or Lua).
	Engine Engine
	// Format is "text" (the default) or "json".
	Format string
	// Out receives the report; Progress, when set, a progress line now and
	// then (a terminal's).
	Out      io.Writer
	Progress io.Writer
}

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
	if len(o.Rules) == 0 {
		return errors.New("backtest: no rules")
	}
	var evs *Events
	var err error
	switch {
	case o.Input != nil:
		evs, err = readUntilDone(ctx, o.Input, o.MaxEventBytes)
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
	rep, err := ReplaySets(ctx, sets, evs, o.Engine, progress(o.RulesFrom))
	if err != nil {
		return stopped(ctx, err)
	}
	var diff *Difference
	if o.Compare != nil {
		old, err := Replay(ctx, o.Compare, evs, o.Engine, progress(o.CompareFrom))
		if err != nil {
			return stopped(ctx, err)
		}
		d := Compare(old, rep)
		diff = &d
	}
	if o.Format == "json" {
		return writeJSON(o, evs, rep, diff)
	}
	return writeText(o, evs, rep, diff)
}

// stopped says that a run was interrupted (a signal), rather than where
// the interruption happened to find it: a script call, a fetch.
// readUntilDone reads the input as Read does, but returns when ctx ends
// too: a read of standard input waits for as long as its writer, however
// often the user presses Ctrl-C. The read goes on until its input ends or
// fails; the command does not wait for it.
func readUntilDone(ctx context.Context, in io.Reader, maxBytes int) (*Events, error) {
	type read struct {
		evs *Events
		err error
	}
	done := make(chan read, 1)
	go func() {
		evs, err := Read(in, maxBytes)
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

func writeJSON(o Options, evs *Events, rep *Report, diff *Difference) error {
	invalid := map[string]int{}
	for r, n := range evs.Invalid {
		invalid[string(r)] = n
	}
	out := struct {
		Input       string         `json:"input"`
		Orders      int            `json:"orders"`
		Refunds     int            `json:"refunds"`
		Invalid     map[string]int `json:"invalid"`
		RulesFrom   string         `json:"rules_from"`
		Scripts     string         `json:"scripts"`
		Report      *Report        `json:"report"`
		CompareFrom string         `json:"compare_from,omitempty"`
		Compare     *Difference    `json:"compare,omitempty"`
	}{o.InputName, evs.Orders, evs.Refunds, invalid, o.RulesFrom, o.Engine.String(), rep, o.CompareFrom, diff}
	enc := json.NewEncoder(o.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeText(o Options, evs *Events, rep *Report, diff *Difference) error {
	w := o.Out
	fmt.Fprintf(w, "backtest of %s: %d events (%d orders, %d refunds)", o.InputName, evs.Len(), evs.Orders, evs.Refunds)
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
	fmt.Fprintf(w, "rules: %s, version %s; scripts: %s\n\n", o.RulesFrom, rep.Version, o.Engine)

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
	alertLines(w, "  ", rep.Alerts, true)
	if diff != nil {
		fmt.Fprintf(w, "\nagainst %s: %d alerts added, %d removed\n", o.CompareFrom, len(diff.Added), len(diff.Removed))
		alertLines(w, "+ ", diff.Added, false)
		alertLines(w, "- ", diff.Removed, false)
	}
	return nil
}

func alertLines(w io.Writer, prefix string, alerts []Alert, outcome bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range alerts {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d\t%s", prefix, stamp(a.At), a.Rule, a.Group, a.Value, a.Order)
		if outcome {
			fmt.Fprintf(tw, "\t%s", a.Outcome)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

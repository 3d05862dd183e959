package backtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// replayJSON is a plain backtest's JSON: one rule set's replay of the
// input, and its scores when it is scored.
type replayJSON struct {
	inputJSON
	Report *Report `json:"report"`
	Scores *Scores `json:"scores,omitempty"`
}

// inputJSON says what was replayed, how and under what.
type inputJSON struct {
	Input        string         `json:"input"`
	Orders       int            `json:"orders"`
	Refunds      int            `json:"refunds"`
	Invalid      map[string]int `json:"invalid"`
	Retried      int            `json:"retried"`
	RulesFrom    string         `json:"rules_from"`
	SettingsFrom string         `json:"settings_from"`
	Scripts      string         `json:"scripts"`
}

func (o Options) inputJSON(evs *Events, rulesFrom string) inputJSON {
	invalid := map[string]int{}
	for r, n := range evs.Invalid {
		invalid[string(r)] = n
	}
	return inputJSON{o.InputName, evs.Orders, evs.Refunds, invalid, evs.Retried, rulesFrom, o.SettingsFrom, o.Engine.String()}
}

// writeJSON writes a plain backtest's JSON; against old, both replays
// (old, new) and the comparison.
func writeJSON(o Options, res result) error {
	var out any = replayJSON{o.inputJSON(res.evs, o.RulesFrom), res.rep, res.scores}
	if res.old != nil {
		out = struct {
			Old     replayJSON `json:"old"`
			New     replayJSON `json:"new"`
			Compare Difference `json:"compare"`
		}{replayJSON{o.inputJSON(res.evs, o.CompareFrom), res.old, res.oldScores}, out.(replayJSON), Compare(res.old, res.rep)}
	}
	return encodeJSON(o.Out, out)
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeInput writes the lines that say what was read: the events and
// their span, the invalid lines, the retries.
func writeInput(w io.Writer, o Options, evs *Events, what string) {
	fmt.Fprintf(w, "%s %s: %s (%s, %s)", what, o.InputName, plural(evs.Len(), "event"), plural(evs.Orders, "order"), plural(evs.Refunds, "refund"))
	if n := evs.Len(); n > 0 {
		fmt.Fprintf(w, " from %s to %s", stamp(evs.list[0].at), stamp(evs.list[n-1].at))
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
}

// writeRulesLine says which rules, settings and scripts.
func writeRulesLine(w io.Writer, o Options, version string) {
	fmt.Fprintf(w, "rules: %s, version %s; ", o.RulesFrom, version)
	if o.SettingsFrom != "" {
		fmt.Fprintf(w, "settings: %s; ", o.SettingsFrom)
	}
	fmt.Fprintf(w, "scripts: %s\n", o.Engine)
}

func writeText(o Options, res result) error {
	w, rep := o.Out, res.rep
	writeInput(w, o, res.evs, "backtest of")
	writeRulesLine(w, o, rep.Version)
	if res.scores != nil {
		writeOutcomes(w, *res.scores)
	}
	fmt.Fprintln(w)
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
	if res.scores != nil {
		if err := writeScores(w, *res.scores); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\ncrossings (%d): time, rule, group, value, order, outcome\n", len(rep.Alerts))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range rep.Alerts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", stamp(a.At), a.Rule, a.Group, a.Value, a.Order, a.Outcome)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.old == nil {
		return nil
	}
	if err := writeDifference(w, o.CompareFrom, Compare(res.old, rep)); err != nil {
		return err
	}
	if res.scores != nil {
		return writeScoresCompare(w, o.CompareFrom, *res.oldScores, *res.scores)
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

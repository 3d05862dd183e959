package silence

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

	"github.com/fraudwatch/fraudwatch/alert"
)

// ErrUsage marks the errors of a command given wrongly: exit code 2.
var ErrUsage = errors.New("usage")

// Command is one `fraudwatch silence` command: add, list or expire.
type Command struct {
	Name  string
	Rules Rules
	Rule  string
	Match map[string]string
	For   time.Duration
	// Reason is add's; Author who adds, or who expires.
	Reason string
	Author string
	ID     string
	// History makes list show the history instead of the silences in
	// force.
	History bool
	Format  string
	Out     io.Writer
	Now     time.Time
}

// Run runs c against the store and writes what it did. Text shows every
// value through alert.Printable: a silence's match and reason may come
// from event data, and would otherwise reach the terminal as they are (an
// escape sequence, a newline that forges a row); JSON escapes them itself.
func Run(ctx context.Context, s *Store, c Command) error {
	switch c.Name {
	case "add":
		sil, err := s.Add(ctx, c.Rules, Spec{Rule: c.Rule, Match: c.Match, For: c.For, Reason: c.Reason, Author: c.Author}, c.Now)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Out, "silence %s: %s until %s (%v)\n", sil.ID, describe(sil), stamp(sil.Ends), c.For)
		return nil
	case "list":
		if c.Format != "text" && c.Format != "" && c.Format != "json" {
			return usage("--format must be text or json, not %q", c.Format)
		}
		if c.History {
			return listHistory(ctx, s, c)
		}
		return list(ctx, s, c)
	case "expire":
		sil, err := s.Expire(ctx, c.Rules, c.ID, c.Author, c.Now)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Out, "silence %s expired: %s alerts again\n", sil.ID, describe(sil))
		return nil
	}
	return usage("no command %q: add, list or expire", c.Name)
}

func list(ctx context.Context, s *Store, c Command) error {
	sils, err := s.List(ctx, c.Now)
	if err != nil {
		return err
	}
	if c.Format == "json" {
		return writeJSON(c.Out, sils)
	}
	if len(sils) == 0 {
		fmt.Fprintln(c.Out, "no silences in force")
		return nil
	}
	tw := tabwriter.NewWriter(c.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSILENCES\tGROUP REF\tENDS\tLEFT\tAUTHOR\tREASON")
	for _, sil := range sils {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shown(sil.ID), describe(sil), ref(sil), stamp(sil.Ends),
			sil.Ends.Sub(c.Now).Round(time.Second), shown(sil.Author), shown(sil.Reason))
	}
	return tw.Flush()
}

func listHistory(ctx context.Context, s *Store, c Command) error {
	events, err := s.History(ctx, c.Now)
	if err != nil {
		return err
	}
	if c.Format == "json" {
		return writeJSON(c.Out, events)
	}
	if len(events) == 0 {
		fmt.Fprintf(c.Out, "nothing in the history (it keeps %v)\n", HistoryFor)
		return nil
	}
	tw := tabwriter.NewWriter(c.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tEVENT\tBY\tID\tSILENCES\tGROUP REF\tAUTHOR\tREASON")
	for _, e := range events {
		what := describe(e.Silence)
		if e.What == Acknowledged {
			what = "alert of " + what
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", stamp(e.At), shown(e.What), shown(e.By), shown(e.ID),
			what, ref(e.Silence), shown(e.Author), shown(e.Reason))
	}
	return tw.Flush()
}

// writeJSON writes a list as indented JSON: [] when empty, not null.
func writeJSON[T any](w io.Writer, v []T) error {
	if v == nil {
		v = []T{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// usageError is an error of how a command was given; it is ErrUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usage(format string, args ...any) error {
	return &usageError{"silence: " + fmt.Sprintf(format, args...)}
}

// describe says what a silence stops: "rule r (every group)" or "rule r
// for f=v", printable.
func describe(s Silence) string {
	if len(s.Match) == 0 && s.Group == "" {
		return "rule " + shown(s.Rule) + " (every group)"
	}
	if len(s.Match) == 0 {
		return "rule " + shown(s.Rule) + " for one group"
	}
	parts := make([]string, 0, len(s.Match))
	for _, f := range slices.Sorted(maps.Keys(s.Match)) {
		parts = append(parts, f+"="+s.Match[f])
	}
	return "rule " + shown(s.Rule) + " for " + shown(strings.Join(parts, ","))
}

func ref(s Silence) string { return cmp.Or(shown(s.GroupRef), "-") }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// shown is a value as text shows it: on its row, with nothing a terminal
// would act on (alert.Printable); "-" for none.
func shown(s string) string { return cmp.Or(alert.Printable(s), "-") }

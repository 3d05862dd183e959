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
)

// ErrUsage marks the errors of a command given wrongly: exit code 2.
var ErrUsage = errors.New("usage")

// Command is one `fraudwatch silence` command: add, list or expire.
type Command struct {
	Name   string
	Rules  Rules
	Rule   string
	Match  map[string]string
	For    time.Duration
	Reason string
	Author string
	ID     string
	Format string
	Out    io.Writer
	Now    time.Time
}

// Run runs c against the store and writes what it did.
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
		list, err := s.List(ctx, c.Now)
		if err != nil {
			return err
		}
		switch c.Format {
		case "json":
			if list == nil {
				list = []Silence{}
			}
			enc := json.NewEncoder(c.Out)
			enc.SetIndent("", "  ")
			return enc.Encode(list)
		case "text", "":
		default:
			return usage("--format must be text or json, not %q", c.Format)
		}
		if len(list) == 0 {
			fmt.Fprintln(c.Out, "no silences in force")
			return nil
		}
		tw := tabwriter.NewWriter(c.Out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSILENCES\tENDS\tLEFT\tAUTHOR\tREASON")
		for _, sil := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sil.ID, describe(sil), stamp(sil.Ends),
				sil.Ends.Sub(c.Now).Round(time.Second), cmp.Or(sil.Author, "-"), oneLine(sil.Reason))
		}
		return tw.Flush()
	case "expire":
		sil, err := s.Expire(ctx, c.Rules, c.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Out, "silence %s expired: %s alerts again\n", sil.ID, describe(sil))
		return nil
	}
	return usage("no command %q: add, list or expire", c.Name)
}

// usageError is an error of how a command was given; it is ErrUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usage(format string, args ...any) error {
	return &usageError{"silence: " + fmt.Sprintf(format, args...)}
}

// describe says what a silence stops: "rule r" or "rule r for f=v".
func describe(s Silence) string {
	if len(s.Match) == 0 {
		return "rule " + s.Rule + " (every group)"
	}
	parts := make([]string, 0, len(s.Match))
	for _, f := range slices.Sorted(maps.Keys(s.Match)) {
		parts = append(parts, f+"="+s.Match[f])
	}
	return "rule " + s.Rule + " for " + strings.Join(parts, ",")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// oneLine keeps a reason on its row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

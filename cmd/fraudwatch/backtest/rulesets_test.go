package backtest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	rulesV1 = "rules:\n  - {name: burst, metric: count, group_by: [customer_id], window: 10m, threshold: 3}\n"
	rulesV2 = "rules:\n  - {name: burst, metric: count, group_by: [customer_id], window: 10m, threshold: 2}\n"
)

func rulesLineAt(t *testing.T, at time.Duration, from, content string) string {
	t.Helper()
	b, err := RulesLine(t0.Add(at), from, []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A reload between 29.9 s and 30 s: customer a's two orders come before
// it (threshold 3, no alert), b's two after it (threshold 2: b2 alerts),
// all four within a second, which a batch would otherwise hold together.
func reloadInput(t *testing.T) string {
	return strings.Join([]string{
		rulesLineAt(t, -time.Second, "v1", rulesV1),
		line("a1", "", "a", "k", 1, 29500*time.Millisecond),
		line("a2", "", "a", "k", 1, 29900*time.Millisecond),
		rulesLineAt(t, 30*time.Second, "v2", rulesV2),
		line("b1", "", "b", "k", 1, 30*time.Second),
		line("b2", "", "b", "k", 1, 30200*time.Millisecond),
	}, "\n")
}

func TestReadRulesLines(t *testing.T) {
	evs, err := Read(strings.NewReader(reloadInput(t)), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if evs.Len() != 4 || evs.Orders != 4 || len(evs.Invalid) != 0 {
		t.Errorf("%d events, %d orders, invalid %v; want the 4 orders and no invalid line", evs.Len(), evs.Orders, evs.Invalid)
	}
	if len(evs.RuleSets) != 2 {
		t.Fatalf("%d rule sets, want 2", len(evs.RuleSets))
	}
	for i, want := range []struct {
		at        time.Duration
		from      string
		threshold int64
	}{{-time.Second, "v1", 3}, {30 * time.Second, "v2", 2}} {
		s := evs.RuleSets[i]
		if !s.At.Equal(t0.Add(want.at)) || s.From != want.from || len(s.Rules) != 1 || s.Rules[0].Threshold != want.threshold {
			t.Errorf("set %d: from %s %q, rules %+v; want from %s %q, threshold %d", i, s.At, s.From, s.Rules, t0.Add(want.at), want.from, want.threshold)
		}
	}
}

func TestReadRefusesUnusableRulesLines(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"no time", `{"type":"rules","from":"x","rules":"` + strings.ReplaceAll(rulesV1, "\n", `\n`) + `"}`, `"at" is not an RFC 3339 time`},
		{"invalid rule", `{"type":"rules","at":"2026-03-01T12:00:00Z","rules":"rules:\n  - {name: x, metric: count}\n"}`, "rules line 2"},
		{"no rules", `{"type":"rules","at":"2026-03-01T12:00:00Z","rules":""}`, "rules line 2"},
		{"not after the one before", rulesLineAt(t, -2*time.Second, "v0", rulesV1), "not after the rules line before it"},
		{"rules not a string", `{"type":"rules","at":"2026-03-01T12:00:00Z","rules":[1]}`, "rules line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := rulesLineAt(t, -time.Second, "v1", rulesV1) + "\n" + tt.line + "\n" + line("a", "", "a", "k", 1, 0)
			_, err := Read(strings.NewReader(input), 1<<16)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read: %v; want an error with %q", err, tt.want)
			}
		})
	}
}

// A rule set takes effect at its time, between batches, keeping the
// windows (a reload's), by either engine.
func TestReplaySetsTakeEffectAtTheirTime(t *testing.T) {
	evs, err := Read(strings.NewReader(reloadInput(t)), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			rep, err := ReplaySets(t.Context(), evs.RuleSets, evs, e.e, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range rep.Alerts {
				got = append(got, a.Rule+" "+a.Group+" "+a.Order+" "+a.Outcome)
			}
			if want := "burst customer_id=b o-b2 sent"; strings.Join(got, "; ") != want {
				t.Errorf("alerts %q, want %q", got, want)
			}
		})
	}
	if _, err := ReplaySets(t.Context(), []RuleSet{evs.RuleSets[1], evs.RuleSets[0]}, evs, Model, nil); err == nil {
		t.Error("sets out of time order were replayed")
	}
}

// Run replays a recording under its own rules unless told otherwise
// (--rules), and says which.
func TestRunUsesRecordedRules(t *testing.T) {
	o := parseRules(t, "rules:\n  - {name: other, metric: count, group_by: [customer_id], window: 1m, threshold: 2}\n")
	out := run(t, o, reloadInput(t))
	if !strings.Contains(out, "rules: recorded in events.jsonl: v1; from 2026-03-01T12:00:30Z: v2, version") ||
		!regexpMatch(`burst\s+customer_id=b\s+2\s+o-b2\s+sent`, out) || strings.Contains(out, "other") {
		t.Errorf("not replayed under the recorded rules:\n%s", out)
	}
	o.RulesOverInput = true
	out = run(t, o, reloadInput(t))
	if !strings.Contains(out, "rules: rules.yaml, version") || strings.Contains(out, "burst") ||
		!regexpMatch(`other\s+customer_id=a\s+2\s+o-a2\s+sent`, out) {
		t.Errorf("--rules did not replace the recorded rules:\n%s", out)
	}
}

// A rules line's "from" is shown in the report: no escape sequence of it
// reaches the terminal.
func TestRulesLineFromIsPrintable(t *testing.T) {
	input := rulesLineAt(t, 0, "v1\x1b[2J\nrules: forged", rulesV1) + "\n" + line("a", "", "a", "k", 1, time.Second)
	evs, err := Read(strings.NewReader(input), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if got := evs.RuleSets[0].From; got != "v1 [2J rules: forged" {
		t.Errorf("from %q, want its control characters as spaces", got)
	}
}

// Without rules of its own (no --config), Run replays an input under the
// rules it carries, and refuses, with ErrNoRules, one that carries none.
func TestRunWithoutRulesNeedsRecordedOnes(t *testing.T) {
	o := Options{InputName: "events.jsonl"}
	if out := run(t, o, reloadInput(t)); !regexpMatch(`burst\s+customer_id=b\s+2\s+o-b2\s+sent`, out) {
		t.Errorf("not replayed under the recorded rules:\n%s", out)
	}
	var out strings.Builder
	o.Input, o.Out = strings.NewReader(line("a", "", "a", "k", 1, 0)), &out
	if err := Run(t.Context(), o); !errors.Is(err, ErrNoRules) || !strings.Contains(err.Error(), "events.jsonl carries none") || out.Len() > 0 {
		t.Errorf("an input without rules: %v, %q; want ErrNoRules naming it and no report", err, out.String())
	}
}

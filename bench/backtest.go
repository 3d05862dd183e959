package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// backtestRate is the event time the backtest's input spans first: 5,000
// events a second, a busy shop's. Then the same events are spread over
// backtestSpread, a steady shop's: a replay's time should not depend on
// the span.
const (
	backtestRate   = 5000
	backtestSpread = 2 * time.Hour
)

// everyKindYAML is a rule set of every kind of window, with thresholds low
// enough that the workload crosses them often: the backtest rows' check that
// both engines give one report means something only where there are
// crossings, cooldowns and expiries to agree on.
const everyKindYAML = `rules:
  - {name: opc, metric: count, group_by: [customer_id], window: 10m, threshold: 3, cooldown: 1m}
  - {name: apc, metric: amount, group_by: [customer_id], window: 1m, threshold: 200000}
  - {name: opc-sliding, metric: count, group_by: [customer_id], window_type: sliding, window: 2m, threshold: 3, cooldown: 30s}
  - {name: amount-card-sliding, metric: amount, group_by: [card_fingerprint], window_type: sliding, window: 5m, threshold: 300000}
  - {name: cards-per-customer, metric: distinct, field: card_fingerprint, group_by: [customer_id], window: 10m, threshold: 2}
  - {name: ips-per-customer, metric: distinct, field: ip, group_by: [customer_id], window_type: sliding, window: 10m, threshold: 2, cooldown: 0s}
  - {name: orders-per-ip, metric: count, group_by: [ip], window: 30s, threshold: 4, mode: shadow}
`

// backtest measures `fraudwatch backtest` over the workload written as
// JSON lines: through the four rules with event times at backtestRate and
// then over backtestSpread, and through everyKindYAML at backtestRate; each
// with both engines, failing when their reports differ.
func (b *bench) backtest(ctx context.Context) error {
	n := min(b.o.backtestEvents, b.o.events)
	if n <= 0 {
		return nil // -backtest-events 0: no backtest rows
	}
	burst := time.Duration(n) * time.Second / backtestRate
	for _, c := range []struct {
		name, rules string
		spans       []time.Duration
	}{
		{"the 4 rules", rulesYAML, []time.Duration{burst, backtestSpread}},
		{"7 rules of every kind, low thresholds", everyKindYAML, []time.Duration{burst}},
	} {
		dir, err := os.MkdirTemp(b.dir, "backtest-")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(c.rules), 0o644); err != nil {
			return err
		}
		cfg := filepath.Join(dir, "fraudwatch.yaml")
		if err := os.WriteFile(cfg, []byte("rules_file: rules.yaml\n"), 0o644); err != nil {
			return err
		}
		for _, span := range c.spans {
			input := filepath.Join(b.dir, "backtest.jsonl")
			if err := b.writeBacktestInput(input, n, span); err != nil {
				return err
			}
			if err := b.backtestBoth(ctx, cfg, input, n, fmt.Sprintf("%s events in %s of event time (%s", thousands(n), spanText(span), c.name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// backtestBoth replays input through the scripts' Go model, the default,
// then through the Lua scripts themselves, adds a row for each, and fails
// when their reports differ.
func (b *bench) backtestBoth(ctx context.Context, cfg, input string, n int, what string) error {
	var reports []json.RawMessage
	crossings := 0
	for _, engine := range []struct{ flag, name string }{{"", "the scripts' Go model"}, {"--lua", "the Lua scripts in miniredis"}} {
		progress("backtest of %s, %s)", what, engine.name)
		args := []string{"backtest", "--config", cfg, "--input", input, "--format", "json"}
		if engine.flag != "" {
			args = append(args, engine.flag)
		}
		began := time.Now()
		cmd := exec.CommandContext(ctx, b.fw.bin, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
		secs := time.Since(began).Seconds()
		var rep struct {
			Orders  int             `json:"orders"`
			Refunds int             `json:"refunds"`
			Report  json.RawMessage `json:"report"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			return fmt.Errorf("backtest's report: %w", err)
		}
		if rep.Orders+rep.Refunds != n {
			return fmt.Errorf("backtest replayed %d events of %d", rep.Orders+rep.Refunds, n)
		}
		var alerts struct {
			Alerts []json.RawMessage `json:"alerts"`
		}
		if err := json.Unmarshal(rep.Report, &alerts); err != nil {
			return fmt.Errorf("backtest's report: %w", err)
		}
		crossings = len(alerts.Alerts)
		reports = append(reports, rep.Report)
		b.tbl.add("b", fmt.Sprintf("fraudwatch backtest of %s, %s)", what, engine.name),
			fmt.Sprintf("%.0f events/s", float64(n)/secs),
			fmt.Sprintf("the whole command: reading, replaying in event-time order, the report; %s crossings", thousands(crossings)))
	}
	if !bytes.Equal(reports[0], reports[1]) {
		return fmt.Errorf("backtest of %s): the Go model's report differs from the Lua scripts'", what)
	}
	return nil
}

// spanText is d as a table says it: 2 h, 20s.
func spanText(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return d.String()
}

// writeBacktestInput writes the first n events of the workload as JSON
// lines with their type and time, as `fraudwatch produce` takes them,
// evenly over span.
func (b *bench) writeBacktestInput(path string, n int, span time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	i := 0
	err = b.workload(n, b.o.seed).generate(func(ev benchEvent) error {
		line, err := json.Marshal(struct {
			benchEvent
			OccurredAt string `json:"occurred_at"`
		}{ev, t0.Add(time.Duration(float64(span) * float64(i) / float64(n))).Format(time.RFC3339Nano)})
		if err != nil {
			return err
		}
		i++
		_, err = w.Write(append(line, '\n'))
		return err
	})
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

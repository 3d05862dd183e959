package main

import (
	"bufio"
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

// backtest measures `fraudwatch backtest` over the workload written as
// JSON lines, with event times at backtestRate and then over
// backtestSpread, through the four rules.
func (b *bench) backtest(ctx context.Context) error {
	n := min(b.o.backtestEvents, b.o.events)
	dir := filepath.Join(b.dir, "backtest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rulesYAML), 0o644); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "fraudwatch.yaml")
	if err := os.WriteFile(cfg, []byte("rules_file: rules.yaml\n"), 0o644); err != nil {
		return err
	}
	burst := time.Duration(n) * time.Second / backtestRate
	for _, span := range []time.Duration{burst, backtestSpread} {
		input := filepath.Join(b.dir, "backtest.jsonl")
		if err := b.writeBacktestInput(input, n, span); err != nil {
			return err
		}
		progress("backtest over %d events in %s of event time", n, spanText(span))
		began := time.Now()
		cmd := exec.CommandContext(ctx, b.fw.bin, "backtest", "--config", cfg, "--input", input, "--format", "json")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
		secs := time.Since(began).Seconds()
		var rep struct {
			Orders  int `json:"orders"`
			Refunds int `json:"refunds"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			return fmt.Errorf("backtest's report: %w", err)
		}
		if rep.Orders+rep.Refunds != n {
			return fmt.Errorf("backtest replayed %d events of %d", rep.Orders+rep.Refunds, n)
		}
		b.tbl.add("b", fmt.Sprintf("fraudwatch backtest of %s events in %s of event time (the 4 rules, on its in-process Redis)", thousands(n), spanText(span)),
			fmt.Sprintf("%.0f events/s", float64(n)/secs), "the whole command: reading, replaying in event-time order, the report")
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

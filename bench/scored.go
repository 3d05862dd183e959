package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"time"
)

// scoredBacktest measures `fraudwatch backtest` scored against outcomes
// (docs/backtest.md, Scored backtests): everyKindYAML over the workload at
// backtestRate, a tenth of its orders labelled fraud and a tenth legit, as
// a chargeback feed and reviews would; then a sweep of opc's threshold
// over 9 values. The sweep's row at opc's own threshold must be the scored
// backtest's: the bench fails otherwise.
func (b *bench) scoredBacktest(ctx context.Context) error {
	n := min(b.o.backtestEvents, b.o.events)
	if n <= 0 {
		return nil
	}
	dir, err := os.MkdirTemp(b.dir, "scored-")
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "fraudwatch.yaml")
	input, outcomes := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "outcomes.jsonl")
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(everyKindYAML), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(cfg, []byte("rules_file: rules.yaml\n"), 0o644); err != nil {
		return err
	}
	if err := b.writeBacktestInput(input, n, time.Duration(n)*time.Second/backtestRate); err != nil {
		return err
	}
	labelled, err := b.writeOutcomes(outcomes, n)
	if err != nil {
		return err
	}
	args := []string{"backtest", "--config", cfg, "--input", input, "--format", "json", "--now", "2026-04-01T00:00:00Z"}
	progress("backtest of %d events, unscored, scored and swept", n)
	plain, err := b.timed(ctx, nil, args...)
	if err != nil {
		return err
	}
	var scored struct {
		Scores struct{ Rules []json.RawMessage }
	}
	secs, err := b.timed(ctx, &scored, append(args, "--outcomes", outcomes)...)
	if err != nil {
		return err
	}
	var swept struct {
		Sweep struct{ Rows []json.RawMessage }
	}
	sweepSecs, err := b.timed(ctx, &swept, append(args, "--outcomes", outcomes, "--sweep", "opc:threshold=2..10")...)
	if err != nil {
		return err
	}
	if len(scored.Scores.Rules) == 0 || len(swept.Sweep.Rows) != 9 || !sameScore(scored.Scores.Rules[0], swept.Sweep.Rows[1]) {
		return fmt.Errorf("scored backtest: the sweep's row at opc's threshold (3) is not the scored backtest's opc row")
	}
	what := fmt.Sprintf("fraudwatch backtest of %s events in %s of event time (7 rules of every kind, low thresholds, the scripts' Go model), scored",
		thousands(n), spanText(time.Duration(n)*time.Second/backtestRate))
	b.tbl.add("b", what+" against "+thousands(labelled)+" outcomes", fmt.Sprintf("%.0f events/s", float64(n)/secs),
		fmt.Sprintf("the whole command, reading the outcomes too; %.2f × unscored (%.0f events/s in the same run): evidence kept and every counting call read", plain/secs, float64(n)/plain))
	b.tbl.add("b", what+", a sweep of one rule's threshold over 9 values (--sweep opc:threshold=2..10)", fmt.Sprintf("%.0f events/s", float64(n)/sweepSecs),
		fmt.Sprintf("the input's events over the whole command: 9 replays of the one rule, %.0f replayed events/s in all; its row at 3 is the scored backtest's", 9*float64(n)/sweepSecs))
	return nil
}

// sameScore says whether a sweep's row (a rule's scores, its value and
// budget besides) holds a rule's scores.
func sameScore(rule, row json.RawMessage) bool {
	var a, b map[string]any
	if json.Unmarshal(rule, &a) != nil || json.Unmarshal(row, &b) != nil {
		return false
	}
	delete(b, "value")
	delete(b, "within_budget")
	return reflect.DeepEqual(a, b)
}

// timed runs fraudwatch with args and decodes its output into into (when
// not nil); it returns how long the command took, in seconds.
func (b *bench) timed(ctx context.Context, into any, args ...string) (float64, error) {
	began := time.Now()
	cmd := exec.CommandContext(ctx, b.fw.bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("backtest: %w", err)
	}
	secs := time.Since(began).Seconds()
	if into != nil {
		if err := json.Unmarshal(out, into); err != nil {
			return 0, fmt.Errorf("backtest's report: %w", err)
		}
	}
	return secs, nil
}

// writeOutcomes writes outcomes of the first n events' orders, as the
// outcomes topic holds them: every tenth fraud, every tenth after the
// fifth legit. It returns how many.
func (b *bench) writeOutcomes(path string, n int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	i, written := 0, 0
	err = b.workload(n, b.o.seed).generate(func(ev benchEvent) error {
		i++
		label := map[int]string{0: "fraud", 5: "legit"}[i%10]
		if ev.Type != "order" || label == "" {
			return nil
		}
		written++
		_, err := fmt.Fprintf(w, `{"type":"outcome","order_id":%q,"outcome":%q,"source":"bench","occurred_at":"2026-03-20T00:00:00Z"}`+"\n", ev.OrderID, label)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return written, f.Close()
}

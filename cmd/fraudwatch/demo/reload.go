package demo

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/app"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

// reloadWithout is when the demo reloads its rules when it runs until
// Ctrl-C: with --duration, it reloads halfway.
const reloadWithout = time.Minute

// reloadWait bounds the wait for the pipeline to take the new rules.
const reloadWait = 5 * time.Second

// quietWait bounds the wait for a moment when no burst that trips the
// changed rule is under way: every cycle has two.
const quietWait = 2 * cycle

// rulesReload is the demo's hot reload: its rules are in a file of its
// own, which it rewrites halfway with one threshold lowered, as an
// operator would, so that the terminal shows the swap and the next alerts
// follow the new rule.
type rulesReload struct {
	path    string
	content []byte
	rule    string
	from    int64
	to      int64
	// recordFrom names the rules in a recording.
	recordFrom string
	// caughtUp waits until the pipeline has processed what was sent.
	caughtUp func(ctx context.Context, sent int) bool
}

// prepareReload writes the rules into a file of the demo's own in dir and
// picks the change: the alerting rule with the highest threshold gets 70 %
// of it. With the built-in rules that is the amount per card, KRW 700,000:
// still above what ordinary shoppers (two orders of at most 150,000) and
// order bursts (six of at most 100,000) pay with one card, so that only
// the big-order fraud crosses it, as before.
func prepareReload(dir string, content []byte, rs []rules.Rule) (*rulesReload, error) {
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		return nil, fmt.Errorf("demo: write the rules file: %w", err)
	}
	byThreshold := slices.Clone(rs)
	slices.SortStableFunc(byThreshold, func(a, b rules.Rule) int { return cmp.Compare(b.Threshold, a.Threshold) })
	for _, r := range byThreshold {
		if !r.Enabled || r.Mode != "alert" || r.Threshold < 2 {
			continue
		}
		to := r.Threshold * 7 / 10
		changed, ok := lowerThreshold(content, r.Name, r.Threshold, to)
		if !ok {
			continue
		}
		// The change must be exactly this one, or the demo would show
		// something else than it says.
		after, err := config.ParseRules(changed, path)
		if err != nil {
			continue
		}
		if d := rules.Diff(rs, after); len(d) != 1 || len(d[0].Fields) != 1 || d[0].Fields[0].Field != "threshold" {
			continue
		}
		return &rulesReload{path: path, content: changed, rule: r.Name, from: r.Threshold, to: to}, nil
	}
	return &rulesReload{path: path}, nil
}

// lowerThreshold replaces the threshold of the rule named name in a rules
// file's text: the first "threshold: from" after its name.
func lowerThreshold(content []byte, name string, from, to int64) ([]byte, bool) {
	at := regexp.MustCompile(`(?m)name:\s*` + regexp.QuoteMeta(name) + `\s*($|[,}#])`).FindIndex(content)
	if at == nil {
		return nil, false
	}
	re := regexp.MustCompile(`threshold:\s*` + strconv.FormatInt(from, 10) + `\b`)
	loc := re.FindIndex(content[at[1]:])
	if loc == nil {
		return nil, false
	}
	start, end := at[1]+loc[0], at[1]+loc[1]
	out := append([]byte(nil), content[:start]...)
	out = append(out, "threshold: "+strconv.FormatInt(to, 10)...)
	return append(out, content[end:]...), true
}

// when is how long after the start the reload comes: halfway through a
// run with a deadline, else reloadWithout.
func (rr *rulesReload) when(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl) / 2
	}
	return reloadWithout
}

// run rewrites the rules file at the reload's time, as editors save (a new
// file renamed over the old), waits for the pipeline to take it, and says
// so on the terminal. Meanwhile the traffic waits, and the pipeline has
// processed every event sent before: those ran under the old rules, every
// later one (stamped later) runs under the new. rec, when set, records the
// new rules between the two, where a backtest of the recording swaps them
// too.
//
// It waits first for a moment when no burst that trips the rule is under
// way: a lower threshold arriving mid-burst would find the window already
// above it, and the burst would never cross (prev < threshold <= current).
func (rr *rulesReload) run(ctx context.Context, a *app.App, tr *traffic, rec *recorder, out *output, started time.Time) {
	if rr == nil || rr.content == nil {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(rr.when(ctx)):
	}
	if !tr.holdQuiet(ctx, rr.rule, quietWait) {
		return
	}
	defer tr.turn.Unlock()
	// Begun, the reload ends even if the demo's time is up meanwhile (on a
	// busy machine the catch-up can outlast a short --duration): the
	// traffic waits for it, and the recording has it.
	ctx = context.WithoutCancel(ctx)
	caughtUp := rr.caughtUp(ctx, tr.sentSoFar().total())
	if err := rr.swap(ctx, a); err != nil {
		out.print(fmt.Sprintf("  ! %s  the rules were not reloaded: %v\n", clock(time.Since(started)), err))
		return
	}
	at := time.Since(started)
	change := fmt.Sprintf("%s threshold %d → %d", rr.rule, rr.from, rr.to)
	out.print(out.style(ansiBold, fmt.Sprintf("  ↻ %s  rules file changed and reloaded: %s, swapped in between batches, its windows kept; its next alerts follow it",
		clock(at), change)) + "\n")
	if !caughtUp {
		out.print(fmt.Sprintf("  ! the pipeline had not processed every event sent before the reload (no progress for %v, or %v in all): a backtest may differ around it\n", catchUp, catchUpMax))
	}
	if rec != nil {
		if err := rec.rules(started.Add(at), rr.recordFrom+", "+change, rr.content, "at "+clock(at)+": "+change); err != nil {
			out.print(fmt.Sprintf("  ! the reloaded rules are not in the recording: %v\n", err))
		}
	}
}

// swap replaces the rules file and waits until the pipeline has reloaded
// it.
func (rr *rulesReload) swap(ctx context.Context, a *app.App) error {
	tmp := rr.path + ".tmp"
	if err := os.WriteFile(tmp, rr.content, 0o600); err != nil {
		return fmt.Errorf("write the rules file: %w", err)
	}
	if err := os.Rename(tmp, rr.path); err != nil {
		return fmt.Errorf("replace the rules file: %w", err)
	}
	for deadline := time.Now().Add(reloadWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if gather(a).sum("fraudwatch_rules_reloads_total", "result", "ok") > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("the pipeline did not take the new rules within %v", reloadWait)
}

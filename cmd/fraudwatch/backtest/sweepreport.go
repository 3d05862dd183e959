package backtest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fraudwatch/fraudwatch/rules"
)

// SweepReport is a sweep's figures: a row a value, each the rule's scores
// replayed at that value. With a budget (--max-alerts-per-day), each row
// says whether it is within it, and Best names the value of the best
// recall within it (of those, the fewest alerts a day; then the first),
// nil when no row within it has a recall.
type SweepReport struct {
	Rule            string        `json:"rule"`
	Setting         string        `json:"setting"`
	MaxAlertsPerDay *float64      `json:"max_alerts_per_day"`
	Best            *string       `json:"best"`
	Rows            []SweepRow    `json:"rows"`
	Days            float64       `json:"days"`
	FraudOrders     int           `json:"fraud_orders"`
	Outcomes        OutcomeCounts `json:"outcomes"`
}

// SweepRow is the rule's scores at one value; WithinBudget is nil without
// a budget.
type SweepRow struct {
	Value        string `json:"value"`
	WithinBudget *bool  `json:"within_budget"`
	RuleScore
}

// sweep runs the sweep and writes its report.
func (o *Options) sweep(ctx context.Context, evs *Events, sets []RuleSet, tr truth) error {
	s := o.Sweep
	progress := o.progress(fmt.Sprintf("sweep of %s's %s", s.Rule, s.Setting), len(s.Values)*evs.Len())
	scores, err := s.run(ctx, sets, evs, tr, o.Engine, progress)
	if err != nil {
		return stopped(ctx, err)
	}
	whole := tr.score(&Report{}) // the outcomes' counts
	rep := SweepReport{Rule: s.Rule, Setting: s.Setting, MaxAlertsPerDay: o.MaxAlertsPerDay, FraudOrders: whole.FraudOrders,
		Outcomes: whole.Outcomes}
	if n := evs.Len(); n > 0 {
		rep.Days = evs.list[n-1].at.Sub(evs.list[0].at).Hours() / 24
	}
	for i, sc := range scores {
		row := SweepRow{Value: s.Values[i], RuleScore: sc}
		if b := o.MaxAlertsPerDay; b != nil {
			within := sc.Alerts == 0 || (sc.AlertsPerDay != nil && *sc.AlertsPerDay <= *b)
			row.WithinBudget = &within
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Best = rep.best()
	if o.Format == "json" {
		return encodeJSON(o.Out, struct {
			inputJSON
			Sweep SweepReport `json:"sweep"`
		}{o.inputJSON(evs, o.RulesFrom), rep})
	}
	writeInput(o.Out, *o, evs, "sweep over")
	writeRulesLine(o.Out, *o, rules.Version(sets[len(sets)-1].Rules))
	writeOutcomes(o.Out, Scores{FraudOrders: rep.FraudOrders, Outcomes: rep.Outcomes})
	return rep.write(o.Out)
}

// best is the value of the best recall within the budget.
func (r SweepReport) best() *string {
	var best *SweepRow
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.WithinBudget == nil || !*row.WithinBudget || row.Recall == nil {
			continue
		}
		if best == nil || *row.Recall > *best.Recall ||
			(*row.Recall == *best.Recall && perDay(row.RuleScore) < perDay(best.RuleScore)) {
			best = row
		}
	}
	if best == nil {
		return nil
	}
	return &best.Value
}

// perDay is a row's alerts a day, 0 for none.
func perDay(r RuleScore) float64 {
	if r.AlertsPerDay == nil {
		return 0
	}
	return *r.AlertsPerDay
}

func (r SweepReport) write(w io.Writer) error {
	fmt.Fprintf(w, "\n%s alone, at each %s (%s):\n", r.Rule, r.Setting, plural(len(r.Rows), "replay"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := strings.ToUpper(r.Setting) + "\t" + scoreHead
	if r.MaxAlertsPerDay != nil {
		head += "\tBUDGET"
	}
	fmt.Fprintln(tw, head)
	for _, row := range r.Rows {
		line := row.Value + "\t" + strings.Join(scoreCells(row.RuleScore), "\t")
		if row.WithinBudget != nil {
			line += "\t" + map[bool]string{true: "within", false: "over"}[*row.WithinBudget]
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.MaxAlertsPerDay == nil {
		return nil
	}
	budget := fmt.Sprintf("%s alerts a day", decimal(r.MaxAlertsPerDay))
	if r.Best == nil {
		fmt.Fprintf(w, "no value within %s has a recall\n", budget)
		return nil
	}
	for _, row := range r.Rows {
		if row.Value == *r.Best {
			fmt.Fprintf(w, "best recall within %s: %s=%s (recall %s, %s alerts a day, precision %s)\n", budget, r.Setting, row.Value,
				percent(row.Recall), decimal(row.AlertsPerDay), percent(row.Precision))
			break
		}
	}
	return nil
}

package backtest

import (
	"context"
	"runtime"
	"slices"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

// Scores are a replay's alerts judged by the orders' outcomes, as
// docs/outcomes.md defines them (Definitions): per rule, then the fraud
// orders no rule caught, and the outcomes read.
type Scores struct {
	Rules []RuleScore `json:"rules"`
	// Days is the input's span, from its first event's time to its
	// last's, in days: what alerts a day are over.
	Days float64 `json:"days"`
	// FraudOrders are the input's orders whose outcome is fraud; Missed
	// those no rule caught, MissedOrders the first of them (at most
	// maxMissedOrders) in the order of their first events.
	FraudOrders  int           `json:"fraud_orders"`
	Missed       int           `json:"missed"`
	MissedOrders []string      `json:"missed_orders"`
	Outcomes     OutcomeCounts `json:"outcomes"`
}

// RuleScore is one rule's figures. Alerts are the alerts it sent, and, for
// a shadow rule, which sends none, its crossings (ShadowCrossings of
// them). Precision is nil when no alert has a verdict (fraud or legit),
// Recall when the input has no fraud order.
type RuleScore struct {
	Rule              string   `json:"rule"`
	Alerts            int      `json:"alerts"`
	ShadowCrossings   int      `json:"shadow_crossings"`
	AlertsPerDay      *float64 `json:"alerts_per_day"`
	FraudAlerts       int      `json:"fraud_alerts"`
	LegitAlerts       int      `json:"legit_alerts"`
	UnclearAlerts     int      `json:"unclear_alerts"`
	Precision         *float64 `json:"precision"`
	FraudOrdersCaught int      `json:"fraud_orders_caught"`
	Recall            *float64 `json:"recall"`
}

// OutcomeCounts say what a scored backtest read of outcomes: every record
// (Read), those refused by reason, those a later outcome of their order
// replaced, the orders left with an outcome, and the fraud ones among them
// that are not orders of the input (not in recall).
type OutcomeCounts struct {
	Read       int            `json:"read"`
	Refused    map[string]int `json:"refused"`
	Replaced   int            `json:"replaced"`
	Orders     int            `json:"orders"`
	NotInInput int            `json:"not_in_input"`
}

// ReplayScored is ReplaySets scored against outs: the report, whose
// alerts carry the orders they list and those caught after them, and each
// rule's scores, as a scored backtest gives them.
func ReplayScored(ctx context.Context, sets []RuleSet, evs *Events, outs *Outcomes, engine Engine, progress func(done int)) (*Report, Scores, error) {
	t := truthOf(evs, outs)
	rep, err := replaySets(ctx, sets, evs, replayConfig{engine: engine, progress: progress, parallel: runtime.GOMAXPROCS(0),
		score: &scoring{fraud: t.fraud}})
	if err != nil {
		return nil, Scores{}, err
	}
	return rep, t.score(rep), nil
}

// maxMissedOrders is how many missed orders a report names.
const maxMissedOrders = 20

// truth is what the outcomes say of the input: its fraud orders, in the
// order of their first events, and their events' offsets.
type truth struct {
	outs        *Outcomes
	fraudOrders []string
	fraud       map[int64]bool
	notInInput  int
}

func truthOf(evs *Events, outs *Outcomes) truth {
	t := truth{outs: outs, fraud: map[int64]bool{}}
	seen := map[string]bool{}
	for i, r := range evs.list {
		if r.order == "" {
			continue
		}
		if l, _ := outs.Label(r.order); l == alert.LabelFraud {
			t.fraud[int64(i)] = true
			if !seen[r.order] {
				seen[r.order] = true
				t.fraudOrders = append(t.fraudOrders, r.order)
			}
		}
	}
	for _, o := range outs.byOrder {
		if o.Label == alert.LabelFraud && !seen[o.OrderID] {
			t.notInInput++
		}
	}
	return t
}

// verdict is what an alert listing these orders was: fraud when one of
// them is, legit when those with an outcome all are, else unclear; false
// when none has an outcome.
func (t truth) verdict(listed []string) (alert.Label, bool) {
	judged, legit := false, true
	for _, o := range listed {
		l, ok := t.outs.Label(o)
		switch {
		case !ok:
			continue
		case l == alert.LabelFraud:
			return l, true
		case l == alert.LabelUnclear:
			legit = false
		}
		judged = true
	}
	if !judged {
		return "", false
	}
	if legit {
		return alert.LabelLegit, true
	}
	return alert.LabelUnclear, true
}

// score judges rep's alerts: those sent and shadow rules' crossings, not
// those a cooldown suppressed.
func (t truth) score(rep *Report) Scores {
	s := Scores{Rules: make([]RuleScore, len(rep.Rules)), FraudOrders: len(t.fraudOrders), MissedOrders: []string{},
		Outcomes: t.counts()}
	if !rep.From.IsZero() {
		s.Days = rep.To.Sub(rep.From).Hours() / 24
	}
	index := map[string]int{}
	caught := make([]map[string]bool, len(rep.Rules))
	for i, r := range rep.Rules {
		s.Rules[i].Rule, index[r.Name], caught[i] = r.Name, i, map[string]bool{}
	}
	anyRule := map[string]bool{}
	for _, a := range rep.Alerts {
		i, ok := index[a.Rule]
		if !ok || a.Outcome == dispatch.SuppressedCooldown {
			continue
		}
		t.judge(&s.Rules[i], a)
		for _, o := range slices.Concat(a.Listed, a.CaughtAfter) {
			if l, _ := t.outs.Label(o); l == alert.LabelFraud {
				caught[i][o], anyRule[o] = true, true
			}
		}
	}
	for i := range s.Rules {
		r := &s.Rules[i]
		r.FraudOrdersCaught = len(caught[i])
		r.AlertsPerDay = ratio(float64(r.Alerts), s.Days)
		r.Precision = ratio(float64(r.FraudAlerts), float64(r.FraudAlerts+r.LegitAlerts))
		r.Recall = ratio(float64(r.FraudOrdersCaught), float64(s.FraudOrders))
	}
	for _, o := range t.fraudOrders {
		if !anyRule[o] {
			s.Missed++
			if len(s.MissedOrders) < maxMissedOrders {
				s.MissedOrders = append(s.MissedOrders, o)
			}
		}
	}
	return s
}

// judge counts one alert of r.
func (t truth) judge(r *RuleScore, a Alert) {
	r.Alerts++
	if a.Outcome == dispatch.SuppressedShadow {
		r.ShadowCrossings++
	}
	switch l, _ := t.verdict(a.Listed); l {
	case alert.LabelFraud:
		r.FraudAlerts++
	case alert.LabelLegit:
		r.LegitAlerts++
	case alert.LabelUnclear:
		r.UnclearAlerts++
	}
}

func (t truth) counts() OutcomeCounts {
	c := OutcomeCounts{Read: t.outs.Read, Refused: map[string]int{}, Replaced: t.outs.Replaced, Orders: t.outs.Orders(),
		NotInInput: t.notInInput}
	for r, n := range t.outs.Refused {
		c.Refused[string(r)] = n
	}
	return c
}

// ratio is n / d, nil when d is not positive.
func ratio(n, d float64) *float64 {
	if d <= 0 {
		return nil
	}
	r := n / d
	return &r
}

package demo

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/fraudwatch/fraudwatch/config"
)

// The truth's rule names are the built-in rules'.
func TestTruthNamesBuiltinRules(t *testing.T) {
	names := builtinNames(t)
	for _, r := range []string{ruleCustomer, ruleCard, ruleIP, ruleDevice, ruleCards} {
		if !slices.Contains(names, r) {
			t.Errorf("the truth names rule %s, which rules.yaml lacks (it has %v)", r, names)
		}
	}
}

// checkTrips checks a replay's crossings against the truth (Burst): each
// crossing is of a burst, on a rule the burst trips; a complete burst
// crosses each rule it trips exactly once first (alerted, or suppressed
// as a shadow rule's), and again within the cooldown once for each rule
// it repeats on; an incomplete one at most so. It returns the crossings
// per rule.
func checkTrips(t *testing.T, truth Truth, alerts []backtest.Alert) map[string]int {
	t.Helper()
	type key struct {
		burst int
		rule  string
	}
	first, repeat := map[key]int{}, map[key]int{}
	byRule := map[string]int{}
	for _, a := range alerts {
		byRule[a.Rule]++
		kind, b := truth.Of(a.Order)
		if b == nil {
			t.Errorf("%s crossed on order %s (%s), which no burst holds", a.Rule, a.Order, kind)
			continue
		}
		if a.Outcome == "cooldown" {
			repeat[key{b.ID, a.Rule}]++
		} else {
			first[key{b.ID, a.Rule}]++
		}
	}
	for _, b := range truth.Bursts {
		for _, r := range builtinNames(t) {
			k := key{b.ID, r}
			wantFirst, wantRepeat := 0, 0
			if slices.Contains(b.Trips, r) {
				wantFirst = 1
			}
			if slices.Contains(b.Repeats, r) {
				wantRepeat = 1
			}
			if b.Complete() && (first[k] != wantFirst || repeat[k] != wantRepeat) ||
				!b.Complete() && (first[k] > wantFirst || repeat[k] > wantRepeat) {
				t.Errorf("burst %d (%s, %d of %d orders sent) crossed %s %d times first and %d again; its truth says %d and %d",
					b.ID, b.Pattern, len(b.Orders), b.Planned, r, first[k], repeat[k], wantFirst, wantRepeat)
			}
		}
	}
	return byRule
}

// The truth holds: a backtest of four minutes of simulated traffic, with
// the outcomes it wrote, through the Go model and through the Lua
// scripts, crosses each rule on exactly the bursts whose truth says they
// trip it, once each, and on nothing else; and scores each rule as the
// truth alone says it should.
func TestTruthHolds(t *testing.T) {
	t.Parallel() // the Lua replay takes a few seconds
	msgs, truth := simulateTruth(t, 42, 4*time.Minute)
	var rec bytes.Buffer
	for _, s := range msgs {
		rec.Write(s.msg.Value)
		rec.WriteByte('\n')
	}
	evs, err := backtest.Read(&rec, config.Default().Kafka.MaxEventBytes)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := config.ParseRules(builtinRules, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	patterns := map[Pattern]int{}
	for _, b := range truth.Bursts {
		if b.Complete() {
			patterns[b.Pattern]++
		}
	}
	if len(patterns) != 8 {
		t.Errorf("complete bursts by pattern %v; want all 8 patterns", patterns)
	}
	// The scripts' model alone: the Lua scripts score the same (the
	// backtest's TestScoredEnginesAgree), and TestRunCatchesFraud checks a
	// real run's recording with both; Lua here took 18 of CI's seconds.
	for _, e := range []backtest.Engine{backtest.Model} {
		t.Run(e.String(), func(t *testing.T) {
			outs := backtest.NewOutcomes(simStart.Add(time.Hour))
			for _, l := range evs.OutcomeLines {
				outs.Add(l)
			}
			sets := []backtest.RuleSet{{Rules: rs}}
			rep, scores, err := backtest.ReplayScored(t.Context(), sets, evs, outs, e, nil)
			if err != nil {
				t.Fatal(err)
			}
			byRule := checkTrips(t, truth, rep.Alerts)
			checkScores(t, truth, scores)
			for _, r := range rs {
				if byRule[r.Name] == 0 {
					t.Errorf("rule %s never crossed", r.Name)
				}
			}
			t.Logf("crossings by rule: %v", byRule)
		})
	}
}

// Outcomes come as a chargeback feed and reviews would: for every order of
// a burst alike, after its last order, fraud from chargebacks for fraud,
// legit or unclear from manual reviews for look-alikes; for most fraud, a
// share of the look-alikes, and never an ordinary order.
func TestTruthOutcomes(t *testing.T) {
	msgs, truth := simulateTruth(t, 42, 4*time.Minute)
	sentAt := map[string]time.Duration{}
	labelled := map[string]int{}
	for _, s := range msgs {
		if s.ev != nil && s.ev.Type == "order" {
			sentAt[s.ev.OrderID] = s.at
		}
		if s.out == nil {
			continue
		}
		o := s.out
		labelled[o.OrderID]++
		if string(s.msg.Key) != o.OrderID || s.msg.Topic != testTopics.outcomes || !o.OccurredAt.Equal(simStart.Add(s.at)) {
			t.Errorf("outcome of %s: key %q, topic %q, occurred_at %v", o.OrderID, s.msg.Key, s.msg.Topic, o.OccurredAt)
		}
		_, b := truth.Of(o.OrderID)
		switch {
		case b == nil:
			t.Errorf("an outcome for ordinary order %s", o.OrderID)
		case o.Label != b.Outcome || o.Source != b.Source:
			t.Errorf("outcome %s from %s for an order of burst %d, whose truth says %s from %s", o.Label, o.Source, b.ID, b.Outcome, b.Source)
		case b.Fraud && (o.Label != alert.LabelFraud || o.Source != sourceChargeback),
			!b.Fraud && (o.Label == alert.LabelFraud || o.Source != sourceReview):
			t.Errorf("outcome %s from %s for a burst of %s", o.Label, o.Source, b.Pattern)
		}
		if b != nil && s.at < sentAt[b.Orders[len(b.Orders)-1]]+3*time.Second {
			t.Errorf("burst %d (%s): its outcome came %v after its last order, want a few seconds", b.ID, b.Pattern, s.at-sentAt[b.Orders[len(b.Orders)-1]])
		}
	}
	shares := map[string]int{}
	for _, b := range truth.Bursts {
		if !b.Complete() || b.Outcome == "" && len(b.Orders) > 0 && sentAt[b.Orders[len(b.Orders)-1]] > 4*time.Minute-6*time.Second {
			continue // its outcome may still be to come
		}
		shares[fmt.Sprintf("%s %s", b.Kind(), cmp.Or(string(b.Outcome), "none"))]++
		for _, id := range b.Orders {
			if want := min(1, len(b.Outcome)); labelled[id] != want {
				t.Errorf("order %s of burst %d (outcome %q) has %d outcomes", id, b.ID, b.Outcome, labelled[id])
			}
		}
	}
	t.Logf("bursts by outcome: %v", shares)
	for _, s := range []string{"fraud fraud", "fraud none", "look-alike legit", "look-alike unclear", "look-alike none"} {
		if shares[s] == 0 {
			t.Errorf("no %s burst in four minutes: %v", s, shares)
		}
	}
	if f := shares["fraud fraud"]; f < 3*shares["fraud none"] {
		t.Errorf("%d fraud bursts charged back, %d not: want most of them charged back", f, shares["fraud none"])
	}
}

// The patterns draw from a source of their own: the same seed plants the
// same bursts with the same outcomes however the steps fall.
func TestTruthIsRepeatable(t *testing.T) {
	plantedBy := func(step func(i int) time.Duration) []string {
		g := newGenerator(5)
		for el, i := time.Duration(0), 0; ; el, i = min(el+step(i), 2*time.Minute), i+1 {
			for _, p := range g.step(el) {
				p.sent()
			}
			if el == 2*time.Minute {
				break
			}
		}
		var out []string
		for _, b := range g.truth().Bursts {
			out = append(out, fmt.Sprintf("%d %s %v %d %v %s", b.ID, b.Pattern, b.Fraud, b.Planned, b.Trips, b.Outcome))
		}
		return out
	}
	even := plantedBy(func(int) time.Duration { return tick })
	uneven := plantedBy(func(i int) time.Duration { return time.Duration(30+i%7*20) * time.Millisecond })
	if !slices.Equal(even, uneven) {
		t.Errorf("steps of 100 ms planted\n%v\nuneven steps\n%v", even, uneven)
	}
}

// Every cycle leaves moments when no burst that trips the card rule is
// under way, which the reload waits for; in the middle of one, it is not
// quiet.
func TestQuietMoments(t *testing.T) {
	g := newGenerator(11)
	quiet := map[time.Duration]bool{}
	for el := time.Duration(0); el <= 2*time.Minute+cycle; el += tick {
		for _, p := range g.step(el) {
			p.sent()
		}
		quiet[el] = g.quiet(ruleCard)
	}
	for base := time.Duration(0); base < 2*time.Minute; base += cycle {
		for _, at := range []time.Duration{12500 * time.Millisecond, 14900 * time.Millisecond, 19100 * time.Millisecond, 22400 * time.Millisecond} {
			if !quiet[base+at] {
				t.Errorf("not quiet for %s at %v", ruleCard, base+at)
			}
		}
		// A card spike's first order is out by 2.9 s, its last not before 4 s.
		if quiet[base+3500*time.Millisecond] {
			t.Errorf("quiet for %s at %v, in a card spike", ruleCard, base+3500*time.Millisecond)
		}
	}
	if !g.quiet(ruleIP + "-not-a-rule") {
		t.Error("not quiet for a rule no burst trips")
	}
}

// The reload takes the traffic's turn only at a quiet moment: not in the
// middle of a card spike, but once its last order is out.
func TestHoldQuiet(t *testing.T) {
	tr := &traffic{gen: newGenerator(11)}
	el := time.Duration(0)
	advance := func() {
		tr.turn.Lock()
		defer tr.turn.Unlock()
		for _, p := range tr.gen.step(el) {
			p.sent()
		}
		el += tick
	}
	for el <= 3500*time.Millisecond { // a card spike is under way
		advance()
	}
	if tr.gen.quiet(ruleCard) {
		t.Fatal("quiet at 3.5 s, in a card spike")
	}
	type held struct {
		ok, quiet bool
		at        time.Duration
	}
	// Buffered: holdQuiet returns holding the turn, and the loop below
	// may be waiting for the turn in advance, not at done; unbuffered,
	// the two waited for each other for ever (CI: the test ran out its
	// 10 minutes).
	done := make(chan held, 1)
	go func() {
		ok := tr.holdQuiet(t.Context(), ruleCard, time.Minute)
		done <- held{ok, tr.gen.quiet(ruleCard), el}
		tr.turn.Unlock()
	}()
	for {
		select {
		case h := <-done:
			if !h.ok || !h.quiet || h.at < 4*time.Second {
				t.Errorf("took the turn at %v (ok %v), quiet %v; want once the spike is over, after 4 s", h.at, h.ok, h.quiet)
			}
			return
		default:
			advance()
			time.Sleep(time.Millisecond)
		}
	}
}

// expectedScore is what a scored backtest of the traffic should find for
// one rule, counted from the truth alone (see Burst): each burst with an
// outcome that trips the rule is one alert (sent, or a shadow rule's
// crossing; not a repeat within the cooldown) of that outcome, and when it
// is fraud, every order of it is caught: the alert lists the first, the
// rest fall in its window after the crossing.
type expectedScore struct {
	fraud, legit, unclear int
	caught                int
}

// expectScores counts each rule's expected figures from the truth, and
// the fraud orders: all of them, and those no rule trips on (missed).
// Precision is fraud / (fraud + legit), recall caught / fraudOrders.
func expectScores(truth Truth) (byRule map[string]expectedScore, fraudOrders, missed int) {
	byRule = map[string]expectedScore{}
	for _, b := range truth.Bursts {
		if b.Outcome == alert.LabelFraud {
			fraudOrders += len(b.Orders)
			if len(b.Trips) == 0 {
				missed += len(b.Orders)
			}
		}
		for _, r := range b.Trips {
			s := byRule[r]
			switch b.Outcome {
			case alert.LabelFraud:
				s.fraud++
				s.caught += len(b.Orders)
			case alert.LabelLegit:
				s.legit++
			case alert.LabelUnclear:
				s.unclear++
			}
			byRule[r] = s
		}
	}
	return byRule, fraudOrders, missed
}

func TestExpectScores(t *testing.T) {
	ids := func(n int) []string { return make([]string, n) }
	truth := Truth{Bursts: []Burst{
		{Pattern: PatternOrderBurst, Fraud: true, Orders: ids(5), Trips: []string{ruleCustomer, ruleDevice}, Outcome: alert.LabelFraud},
		{Pattern: PatternOrderBurst, Fraud: true, Orders: ids(4), Trips: []string{ruleCustomer, ruleDevice}}, // not charged back
		{Pattern: PatternReseller, Orders: ids(4), Trips: []string{ruleCustomer, ruleCard, ruleDevice}, Outcome: alert.LabelLegit},
		{Pattern: PatternFamilyCard, Orders: ids(3), Trips: []string{ruleCard}, Outcome: alert.LabelUnclear},
		{Pattern: PatternCardReturn, Fraud: true, Orders: ids(3), Trips: []string{ruleCard}, Repeats: []string{ruleCard}, Outcome: alert.LabelFraud},
		{Pattern: PatternLoneFraud, Fraud: true, Orders: ids(1), Outcome: alert.LabelFraud},
	}}
	byRule, fraudOrders, missed := expectScores(truth)
	want := map[string]expectedScore{
		ruleCustomer: {fraud: 1, legit: 1, caught: 5},
		ruleDevice:   {fraud: 1, legit: 1, caught: 5},
		ruleCard:     {fraud: 1, legit: 1, unclear: 1, caught: 3},
	}
	if fmt.Sprint(byRule) != fmt.Sprint(want) || fraudOrders != 9 || missed != 1 {
		t.Errorf("expected %v, %d fraud orders, %d missed; want %v, 9, 1", byRule, fraudOrders, missed, want)
	}
}

// checkScores checks a scored backtest's figures against those the truth
// alone gives (expectScores): per rule, the fraud, legit and unclear
// alerts, precision, the fraud orders caught and recall; the fraud orders
// and those no rule caught.
func checkScores(t *testing.T, truth Truth, s backtest.Scores) {
	t.Helper()
	byRule, fraudOrders, missed := expectScores(truth)
	if s.FraudOrders != fraudOrders || s.Missed != missed || fraudOrders == 0 {
		t.Errorf("%d fraud orders, %d missed; the truth says %d and %d", s.FraudOrders, s.Missed, fraudOrders, missed)
	}
	share := func(n, d int) string {
		if d == 0 {
			return "none"
		}
		return fmt.Sprintf("%.4f", float64(n)/float64(d))
	}
	shown := func(r *float64) string {
		if r == nil {
			return "none"
		}
		return fmt.Sprintf("%.4f", *r)
	}
	judged := 0
	for _, r := range s.Rules {
		w := byRule[r.Rule]
		got := fmt.Sprintf("fraud %d, legit %d, unclear %d, precision %s, caught %d, recall %s", r.FraudAlerts, r.LegitAlerts,
			r.UnclearAlerts, shown(r.Precision), r.FraudOrdersCaught, shown(r.Recall))
		want := fmt.Sprintf("fraud %d, legit %d, unclear %d, precision %s, caught %d, recall %s", w.fraud, w.legit,
			w.unclear, share(w.fraud, w.fraud+w.legit), w.caught, share(w.caught, fraudOrders))
		if got != want {
			t.Errorf("rule %s scored\n  %s\nthe truth says\n  %s", r.Rule, got, want)
		}
		judged += r.FraudAlerts + r.LegitAlerts
	}
	if len(s.Rules) != len(builtinNames(t)) || judged == 0 {
		t.Errorf("scores for %d rules, %d alerts judged fraud or legit", len(s.Rules), judged)
	}
}

package demo

import (
	"fmt"
	"slices"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
)

// Pattern names what a burst of the traffic is.
type Pattern string

// The patterns the traffic plants. Fraud ones come from new identities
// outside the shoppers' pool; look-alikes are legitimate customers whose
// orders trip rules all the same.
const (
	PatternOrderBurst  Pattern = "order-burst"  // fraud: one customer, 4-6 gift-card orders in seconds
	PatternCardSpike   Pattern = "card-spike"   // fraud: a stolen card, 4 big orders from 4 new accounts on one device
	PatternCardReturn  Pattern = "card-return"  // fraud: a stolen card that crosses again after a refund
	PatternBot         Pattern = "bot"          // fraud: one IP, orders for 10-12 accounts in seconds
	PatternCardTesting Pattern = "card-testing" // fraud: one customer tries 3-4 cards, one every 31-40 s
	PatternLoneFraud   Pattern = "lone-fraud"   // fraud: one order on a stolen card, like any other: no rule sees it
	PatternReseller    Pattern = "reseller"     // legit: a reseller's bulk orders, one customer, device and card
	PatternFamilyCard  Pattern = "family-card"  // legit: a family sharing one card, each on their own account and device
)

// Kind is an order's truth: part of a fraud burst, of a legitimate
// look-alike, or an ordinary shopper's.
type Kind string

// Kinds of order.
const (
	KindFraud     Kind = "fraud"
	KindLookAlike Kind = "look-alike"
	KindNormal    Kind = "normal"
)

// The built-in rules (rules.yaml) that the bursts are made to trip.
const (
	ruleCustomer = "orders-per-customer-1m"
	ruleCard     = "amount-per-card-10m"
	ruleIP       = "orders-per-ip-1m"
	ruleDevice   = "orders-per-device-1m"
	ruleCards    = "cards-per-customer-10m"
)

// The outcomes written, as a chargeback feed and a review queue would:
// most fraud is charged back, a share of the look-alikes is reviewed, and
// some of those reviews reach no verdict. A burst's outcomes are decided
// as it is planned, and written together, a few seconds after its last
// order.
const (
	chargebackShare    = 0.8
	reviewLegitShare   = 0.65
	reviewUnclearShare = 0.15
	sourceChargeback   = "chargeback"
	sourceReview       = "manual_review"
)

// Burst is one pattern the traffic planted, as far as it was sent.
//
// A complete burst trips each rule of Trips exactly once, with one alert
// (a shadow rule's is suppressed), and no other built-in rule. Repeats
// are the rules it crosses once more within their cooldown (card-return:
// a repeat, not another alert). A fraud burst's orders are all caught by
// each rule it trips: the alert lists those up to its crossing, and the
// rest are counted in its window after it.
// Each burst has groups of its own (customer, card, device, IP), so no
// alert mixes the orders of two bursts; the rules' reload waits for a
// moment when no burst tripping the changed rule is under way.
//
// Its outcomes, when written, label each of its orders alike: Outcome is
// that label ("" when none was written, or not before the run ended) and
// Source who gave it; they come after its last order, so a burst with an
// Outcome is complete.
type Burst struct {
	ID      int
	Pattern Pattern
	Fraud   bool
	// Orders are the ids of its orders Kafka acknowledged, in the order
	// sent; Planned is how many it has in all.
	Orders  []string
	Planned int
	Trips   []string
	Repeats []string
	Outcome alert.Label
	Source  string

	ids   []string    // every order id, as planned
	label alert.Label // the outcome planned, "" for none
}

// Complete says whether every order of the burst was sent.
func (b *Burst) Complete() bool { return len(b.Orders) == b.Planned }

// Kind is the truth of the burst's orders.
func (b *Burst) Kind() Kind {
	if b.Fraud {
		return KindFraud
	}
	return KindLookAlike
}

// Truth is what the traffic planted, as far as Kafka acknowledged it: its
// bursts in the order planned. Orders in none are ordinary shoppers'.
type Truth struct {
	Bursts []Burst
}

// Of says what an order is, and the burst it belongs to (nil for an
// ordinary order).
func (t Truth) Of(orderID string) (Kind, *Burst) {
	for i := range t.Bursts {
		if slices.Contains(t.Bursts[i].Orders, orderID) {
			return t.Bursts[i].Kind(), &t.Bursts[i]
		}
	}
	return KindNormal, nil
}

// plant starts a burst.
func (g *generator) plant(p Pattern, fraud bool, trips ...string) *Burst {
	b := &Burst{ID: len(g.bursts) + 1, Pattern: p, Fraud: fraud, Trips: trips}
	g.bursts = append(g.bursts, b)
	return b
}

// place queues one order of burst b at at, keyed by the burst (Key).
func (g *generator) place(b *Burst, at time.Duration, who identity, amount int64) *eventJSON {
	p := g.placed(b, at, who, amount)
	g.add(p)
	return p.ev
}

// placed is place's order, planned but not yet added.
func (g *generator) placed(b *Burst, at time.Duration, who identity, amount int64) planned {
	ev := g.order(who, amount)
	b.ids = append(b.ids, ev.OrderID)
	b.Planned++
	return planned{at: at, kind: kindOrder, ev: ev, key: b.Key(), burst: b}
}

// Key is the message key of the burst's orders: one partition holds them,
// in the order of their times, so that the pipeline counts them in that
// order however far behind it falls, as a backtest of the recording does
// (docs/backtest.md). Keyed by customer, as the other traffic is, a
// burst of several accounts (a bot's, a stolen card's) spreads over
// partitions, and a partition behind the others makes another order
// cross than in the backtest.
func (b *Burst) Key() string { return fmt.Sprintf("burst-%d", b.ID) }

// label decides b's outcome and queues an outcome for each of its orders,
// a few seconds after last, the time of its last order.
func (g *generator) label(b *Burst, last time.Duration) {
	u := g.plan.Float64()
	at := last + g.after(3*time.Second, 6*time.Second)
	switch {
	case b.Fraud && u < chargebackShare:
		b.label = alert.LabelFraud
	case !b.Fraud && u < reviewLegitShare:
		b.label = alert.LabelLegit
	case !b.Fraud && u < reviewLegitShare+reviewUnclearShare:
		b.label = alert.LabelUnclear
	default:
		return
	}
	source := sourceChargeback
	if !b.Fraud {
		source = sourceReview
	}
	for _, id := range b.ids {
		o := &outcome.Outcome{OrderID: id, Label: b.label, Source: source}
		g.add(planned{at: at, kind: kindOutcome, outcome: o, key: id, burst: b})
	}
}

// sent notes that Kafka acknowledged p.
func (p planned) sent() {
	switch {
	case p.burst == nil:
	case p.kind == kindOrder:
		p.burst.Orders = append(p.burst.Orders, p.ev.OrderID)
	case p.kind == kindOutcome:
		p.burst.Outcome, p.burst.Source = p.outcome.Label, p.outcome.Source
	}
}

// quiet says whether no burst that trips rule is under way: some of its
// orders sent, others still to come. Call it between steps.
func (g *generator) quiet(rule string) bool {
	for _, b := range g.bursts {
		if len(b.Orders) > 0 && !b.Complete() && (slices.Contains(b.Trips, rule) || slices.Contains(b.Repeats, rule)) {
			return false
		}
	}
	return true
}

// truth is a copy of what was planted and sent so far.
func (g *generator) truth() Truth {
	t := Truth{Bursts: make([]Burst, 0, len(g.bursts))}
	for _, b := range g.bursts {
		c := *b
		c.Orders, c.Trips, c.Repeats = slices.Clone(b.Orders), slices.Clone(b.Trips), slices.Clone(b.Repeats)
		c.ids = nil
		t.Bursts = append(t.Bursts, c)
	}
	return t
}

package demo

import (
	"fmt"
	"time"
)

// planCycle schedules one cycle of fraud and look-alikes starting at base.
// The first fraud comes within a second or two, so that a short run shows
// alerts at once. The patterns that pay a lot on one card (card spikes,
// the card that comes back, the reseller, the family) leave two moments a
// cycle free, from 12.4 s to 15 s and from 19 s to 22.5 s, in which the
// rules' reload changes the card rule (see generator.quiet).
func (g *generator) planCycle(base time.Duration) {
	jitter := func(d time.Duration) time.Duration {
		return base + d + time.Duration(g.plan.Int64N(int64(400*time.Millisecond)))
	}
	g.burst(jitter(300 * time.Millisecond))
	g.cardSpike(jitter(2500 * time.Millisecond))
	g.reseller(jitter(3 * time.Second))
	g.bot(jitter(5 * time.Second))
	g.clamp(jitter(9 * time.Second))
	g.burst(jitter(12 * time.Second))
	g.cardSpike(jitter(15 * time.Second))
	if base%(3*cycle) == 0 {
		g.cardTesting(jitter(7 * time.Second))
	}
	g.cardReturn(jitter(6 * time.Second))
	g.family(jitter(7500 * time.Millisecond))
	g.loneFraud(jitter(17 * time.Second))
	for t := invalidPeriod / 4; t < cycle; t += invalidPeriod {
		g.invalid(jitter(t))
	}
}

// burst: one customer places 4-6 gift-card orders within a few seconds
// (orders-per-customer-1m, and the shadow device rule from the 4th).
func (g *generator) burst(at time.Duration) {
	b := g.plant(PatternOrderBurst, true, ruleCustomer, ruleDevice)
	who := g.fraudster()
	n := 4 + g.plan.IntN(3)
	var last time.Duration
	for range n {
		amount := int64(50_000)
		if g.plan.IntN(2) == 0 {
			amount = 100_000
		}
		g.place(b, at, who, amount)
		last, at = at, at+g.after(300*time.Millisecond, 800*time.Millisecond)
	}
	g.label(b, last)
}

// cardSpike: one stolen card pays 4 big orders from 4 new accounts on one
// device (amount-per-card-10m from the 2nd, and the shadow device rule at
// the 4th). Each order is at least half the card rule's threshold, so
// that its alert lists the first as well (docs/alerts.md, Evidence) and
// every order of the spike is caught.
func (g *generator) cardSpike(at time.Duration) {
	b := g.plant(PatternCardSpike, true, ruleCard, ruleDevice)
	thief := g.fraudster()
	var last time.Duration
	for range 4 {
		who := g.fraudster()
		who.card, who.device, who.ip = thief.card, thief.device, thief.ip
		amount := roundTo(500_000+g.plan.Int64N(190_001), 1_000)
		g.place(b, at, who, amount)
		last, at = at, at+g.after(500*time.Millisecond, 1200*time.Millisecond)
	}
	g.label(b, last)
}

// cardReturn: a stolen card pays two big orders from two new accounts
// (amount-per-card-10m), one is refunded, and a third account pays another:
// the card crosses its threshold again within its cooldown, a repeat
// crossing shown in the thread of its alert. 600,000 an order crosses the
// threshold after the reload too (700,000), and the refund falls below
// both.
func (g *generator) cardReturn(at time.Duration) {
	const amount = 600_000
	b := g.plant(PatternCardReturn, true, ruleCard)
	b.Repeats = []string{ruleCard}
	thief := g.fraudster()
	var first *eventJSON
	for i := range 3 {
		who := g.fraudster()
		who.card, who.device, who.ip = thief.card, thief.device, thief.ip
		// The refund comes between the second order and the third, each
		// sent once the pipeline has processed what came before (the
		// refund goes through a topic of its own).
		p := g.placed(b, at, who, amount)
		p.settle = i == 2
		g.add(p)
		if i == 0 {
			first = p.ev
		}
		if i == 1 {
			at += g.after(1500*time.Millisecond, 2000*time.Millisecond)
			g.add(planned{at: at, kind: kindRefund, ev: g.refund(first, amount), key: first.CustomerID, settle: true})
		}
		if i == 2 {
			g.label(b, at)
		}
		at += g.after(1500*time.Millisecond, 2000*time.Millisecond)
	}
}

// bot: one IP orders for 10-12 different accounts in a few seconds
// (orders-per-ip-1m). Each cycle's bot has an address of its own, so
// that each is alerted; the rule's cooldown would keep one that came
// back within 5 minutes from alerting again.
func (g *generator) bot(at time.Duration) {
	b := g.plant(PatternBot, true, ruleIP)
	g.bots++
	ip := fmt.Sprintf("203.0.113.%d", 1+(g.bots-1)%254) // TEST-NET-3: documentation addresses
	n := 10 + g.plan.IntN(3)
	var last time.Duration
	for range n {
		who := g.fraudster()
		who.ip = ip
		amount := roundTo(9_900+g.plan.Int64N(20_001), 100)
		g.place(b, at, who, amount)
		last, at = at, at+g.after(200*time.Millisecond, 500*time.Millisecond)
	}
	g.label(b, last)
}

// cardTesting: one customer tries 3-4 stolen cards with small orders, one
// every 31-40 s, so that no minute holds 3 of their orders: only
// cards-per-customer-10m, which counts distinct cards, catches it.
func (g *generator) cardTesting(at time.Duration) {
	b := g.plant(PatternCardTesting, true, ruleCards)
	who := g.fraudster()
	n := 3 + g.plan.IntN(2)
	var last time.Duration
	for range n {
		who.card = fmt.Sprintf("card-%012x", mix(g.plan.Uint64())&0xffff_ffff_ffff)
		amount := roundTo(100+g.plan.Int64N(900), 100)
		g.place(b, at, who, amount)
		last, at = at, at+g.after(31*time.Second, 40*time.Second)
	}
	g.label(b, last)
}

// loneFraud: a stolen card used once, by a new account, for an amount an
// ordinary shopper might pay: no rule sees it, and its chargeback is a
// fraud order every rule missed.
func (g *generator) loneFraud(at time.Duration) {
	b := g.plant(PatternLoneFraud, true)
	amount := roundTo(60_000+g.plan.Int64N(90_001), 100)
	g.place(b, at, g.fraudster(), amount)
	g.label(b, at)
}

// reseller: a business customer buys stock, 4-5 orders of 300,000-450,000
// within seconds from its one device and card: legitimate, and it trips
// orders-per-customer-1m, amount-per-card-10m and the shadow device rule
// as fraud would.
func (g *generator) reseller(at time.Duration) {
	b := g.plant(PatternReseller, false, ruleCustomer, ruleCard, ruleDevice)
	g.businesses++
	who := newIdentity(fmt.Sprintf("cust-b%04d", g.businesses), mix(uint64(g.plan.Uint32())<<32|1<<31|uint64(g.businesses)))
	n := 4 + g.plan.IntN(2)
	var last time.Duration
	for range n {
		g.place(b, at, who, roundTo(300_000+g.plan.Int64N(150_001), 10_000))
		last, at = at, at+g.after(400*time.Millisecond, 900*time.Millisecond)
	}
	g.label(b, last)
}

// family: 3-4 members of a household, each with an account and a device of
// their own, pay 350,000-500,000 each with one shared card from home (one
// IP and address): legitimate, and it trips amount-per-card-10m as a
// card spike does, but not the device rule.
func (g *generator) family(at time.Duration) {
	b := g.plant(PatternFamilyCard, false, ruleCard)
	g.households++
	home := newIdentity("", mix(uint64(g.plan.Uint32())<<32|1<<30|uint64(g.households)))
	n := 3 + g.plan.IntN(2)
	var last time.Duration
	for i := range n {
		who := newIdentity(fmt.Sprintf("cust-h%04d-%d", g.households, i+1), mix(uint64(g.plan.Uint32())<<32|1<<29|uint64(g.households)))
		who.card, who.ip, who.address = home.card, home.ip, home.address
		g.place(b, at, who, roundTo(350_000+g.plan.Int64N(150_001), 10_000))
		last, at = at, at+g.after(800*time.Millisecond, 1500*time.Millisecond)
	}
	g.label(b, last)
}

// clamp: a small order, then a refund of an older, larger purchase on the
// same card: more than the card's window holds, so the counter clamps at 0.
func (g *generator) clamp(at time.Duration) {
	who := shopper(100_000 + g.plan.IntN(customerPool))
	small := roundTo(10_000+g.plan.Int64N(30_001), 100)
	g.add(planned{at: at, kind: kindOrder, ev: g.order(who, small), key: who.customer})
	older := g.order(who, 0) // an order from before the window
	refund := g.refund(older, roundTo(150_000+g.plan.Int64N(100_001), 1_000))
	g.add(planned{at: at + g.after(time.Second, 2*time.Second), kind: kindRefund, ev: refund, key: who.customer, settle: true})
}

// invalid sends a broken event, which goes to the dead-letter topic.
func (g *generator) invalid(at time.Duration) {
	g.events++
	id := fmt.Sprintf("ev-%06d", g.events)
	who := shopper(100_000 + g.plan.IntN(customerPool))
	var raw string
	switch g.invalids % 4 {
	case 0: // cut off in the middle
		raw = fmt.Sprintf(`{"event_id":%q,"type":"order","order_id":"ord-`, id)
	case 1: // an amount as a string
		raw = fmt.Sprintf(`{"event_id":%q,"type":"order","order_id":"ord-x%d","customer_id":%q,"amount":"12000","currency":"KRW"}`, id, g.events, who.customer)
	case 2: // no customer
		raw = fmt.Sprintf(`{"event_id":%q,"type":"order","order_id":"ord-x%d","amount":12000,"currency":"KRW"}`, id, g.events)
	case 3: // a negative amount
		raw = fmt.Sprintf(`{"event_id":%q,"type":"order","order_id":"ord-x%d","customer_id":%q,"amount":-5000,"currency":"KRW"}`, id, g.events, who.customer)
	}
	g.invalids++
	g.add(planned{at: at, kind: kindInvalid, raw: raw, key: who.customer})
}

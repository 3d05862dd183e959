package demo

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Traffic shape. Ordinary shoppers are drawn from a pool so large that one
// of them ordering three times in a minute, by chance, practically never
// happens: every alert in the demo comes from a deliberate fraud pattern.
const (
	minRate       = 20 // ordinary orders per second, drawn anew every second
	maxRate       = 32
	customerPool  = 900_000
	refundChance  = 0.04 // of ordinary orders, refunded a few seconds later
	cycle         = 20 * time.Second
	tick          = 100 * time.Millisecond
	demoCurrency  = "KRW"
	botIP         = "203.0.113.77" // TEST-NET-3: a documentation address
	invalidPeriod = 8 * time.Second
	writeTimeout  = 10 * time.Second
)

// kind says which topic a message goes to, and what it is counted as.
type kind int

const (
	kindOrder kind = iota
	kindRefund
	kindInvalid
)

// eventJSON is an event as the topics carry it (docs/events.md).
type eventJSON struct {
	EventID         string `json:"event_id"`
	Type            string `json:"type"`
	OrderID         string `json:"order_id"`
	CustomerID      string `json:"customer_id"`
	Email           string `json:"email,omitempty"`
	Phone           string `json:"phone,omitempty"`
	CardFingerprint string `json:"card_fingerprint,omitempty"`
	IP              string `json:"ip,omitempty"`
	DeviceID        string `json:"device_id,omitempty"`
	ShippingAddress string `json:"shipping_address,omitempty"`
	Amount          int64  `json:"amount"`
	Currency        string `json:"currency,omitempty"`
	OccurredAt      string `json:"occurred_at,omitempty"`
}

// identity is who places an order.
type identity struct {
	customer, email, phone, card, ip, device, address string
}

// planned is one message due at an offset from the start.
type planned struct {
	at   time.Duration
	kind kind
	ev   *eventJSON // nil for an invalid event
	raw  string     // the value of an invalid event
	key  string
}

// produced counts what the generator has had acknowledged by Kafka.
type produced struct {
	orders, refunds, invalid int
}

func (p produced) total() int { return p.orders + p.refunds + p.invalid }

func (p produced) String() string {
	return fmt.Sprintf("%s, %s, %d invalid", plural(int64(p.orders), "order"), plural(int64(p.refunds), "refund"), p.invalid)
}

// generator decides the demo's traffic. It is deterministic for a seed and
// a sequence of step times, and knows nothing of Kafka (see send).
type generator struct {
	rng      *rand.Rand
	events   int
	orders   int
	frauds   int
	invalids int

	rate      int           // ordinary orders per second, this second
	rateUntil time.Duration // when to draw the rate again
	owed      float64       // fractional ordinary orders carried between steps
	planned   time.Duration // cycles are planned up to here
	queue     []planned     // sorted by at
	last      time.Duration
}

func newGenerator(seed uint64) *generator {
	return &generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// step returns the messages due in (last step, elapsed], in order.
func (g *generator) step(elapsed time.Duration) []planned {
	for g.planned <= elapsed {
		g.planCycle(g.planned)
		g.planned += cycle
	}
	dt := elapsed - g.last
	if dt < 0 {
		dt = 0
	}
	if elapsed >= g.rateUntil {
		g.rate = minRate + g.rng.IntN(maxRate-minRate+1)
		g.rateUntil = elapsed + time.Second
	}
	g.owed += float64(g.rate) * dt.Seconds()
	for ; g.owed >= 1; g.owed-- {
		// Spread over the step, so that the orders are not all at its end.
		at := g.last + time.Duration(g.rng.Int64N(int64(dt)+1))
		g.ordinary(at)
	}
	g.last = elapsed

	n, _ := slices.BinarySearchFunc(g.queue, elapsed+1, func(p planned, t time.Duration) int { return cmp.Compare(p.at, t) })
	due := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	return due
}

// add queues a message, keeping the queue sorted (stable for equal times).
func (g *generator) add(p planned) {
	i, _ := slices.BinarySearchFunc(g.queue, p.at+1, func(q planned, t time.Duration) int { return cmp.Compare(q.at, t) })
	g.queue = slices.Insert(g.queue, i, p)
}

// planCycle schedules one cycle of fraud starting at base. The first fraud
// comes within a second or two, so that a short run shows alerts at once.
func (g *generator) planCycle(base time.Duration) {
	jitter := func(d time.Duration) time.Duration {
		return base + d + time.Duration(g.rng.Int64N(int64(400*time.Millisecond)))
	}
	g.burst(jitter(300 * time.Millisecond))
	g.cardSpike(jitter(2500 * time.Millisecond))
	g.bot(jitter(5 * time.Second))
	g.clamp(jitter(9 * time.Second))
	g.burst(jitter(12 * time.Second))
	g.cardSpike(jitter(15 * time.Second))
	if base%(3*cycle) == 0 {
		g.cardTesting(jitter(7 * time.Second))
	}
	g.cardReturn(jitter(6 * time.Second))
	for t := invalidPeriod / 4; t < cycle; t += invalidPeriod {
		g.invalid(jitter(t))
	}
}

// ordinary is one shopper's order, now and then refunded a little later.
func (g *generator) ordinary(at time.Duration) {
	who := shopper(100_000 + g.rng.IntN(customerPool))
	// Most baskets are small: squaring a uniform skews towards 5,000.
	u := g.rng.Float64()
	amount := roundTo(5_000+int64(u*u*145_000), 100)
	ev := g.order(who, amount)
	g.add(planned{at: at, kind: kindOrder, ev: ev, key: who.customer})
	if g.rng.Float64() < refundChance {
		refund := g.refund(ev, amount)
		g.add(planned{at: at + g.between(2*time.Second, 6*time.Second), kind: kindRefund, ev: refund, key: who.customer})
	}
}

// burst: one customer places 4-6 gift-card orders within a few seconds
// (orders-per-customer-1m, and the shadow device rule from the 4th).
func (g *generator) burst(at time.Duration) {
	who := g.fraudster()
	n := 4 + g.rng.IntN(3)
	for range n {
		amount := int64(50_000)
		if g.rng.IntN(2) == 0 {
			amount = 100_000
		}
		g.add(planned{at: at, kind: kindOrder, ev: g.order(who, amount), key: who.customer})
		at += g.between(300*time.Millisecond, 800*time.Millisecond)
	}
}

// cardSpike: one stolen card pays 4 big orders from 4 new accounts on one
// device (amount-per-card-10m).
func (g *generator) cardSpike(at time.Duration) {
	thief := g.fraudster()
	for range 4 {
		who := g.fraudster()
		who.card, who.device, who.ip = thief.card, thief.device, thief.ip
		amount := roundTo(300_000+g.rng.Int64N(200_001), 1_000)
		g.add(planned{at: at, kind: kindOrder, ev: g.order(who, amount), key: who.customer})
		at += g.between(500*time.Millisecond, 1200*time.Millisecond)
	}
}

// cardReturn: a stolen card pays two big orders from two new accounts
// (amount-per-card-10m), one is refunded, and a third account pays another:
// the card crosses its threshold again within its cooldown, a repeat
// crossing shown in the thread of its alert. 600,000 an order crosses the
// threshold after the reload too (700,000), and the refund falls below
// both.
func (g *generator) cardReturn(at time.Duration) {
	const amount = 600_000
	thief := g.fraudster()
	var first *eventJSON
	for i := range 3 {
		who := g.fraudster()
		who.card, who.device, who.ip = thief.card, thief.device, thief.ip
		ev := g.order(who, amount)
		g.add(planned{at: at, kind: kindOrder, ev: ev, key: who.customer})
		if i == 0 {
			first = ev
		}
		if i == 1 {
			// Its refund comes between the second order and the third,
			// far enough from each that the topics' order holds.
			at += g.between(1500*time.Millisecond, 2000*time.Millisecond)
			g.add(planned{at: at, kind: kindRefund, ev: g.refund(first, amount), key: first.CustomerID})
		}
		at += g.between(1500*time.Millisecond, 2000*time.Millisecond)
	}
}

// bot: one IP orders for 10-12 different accounts in a few seconds
// (orders-per-ip-1m). It is the same IP every cycle: within its cooldown it
// is not alerted again.
func (g *generator) bot(at time.Duration) {
	n := 10 + g.rng.IntN(3)
	for range n {
		who := g.fraudster()
		who.ip = botIP
		amount := roundTo(9_900+g.rng.Int64N(20_001), 100)
		g.add(planned{at: at, kind: kindOrder, ev: g.order(who, amount), key: who.customer})
		at += g.between(200*time.Millisecond, 500*time.Millisecond)
	}
}

// cardTesting: one customer tries 3-4 stolen cards with small orders, one
// every 31-40 s, so that no minute holds 3 of their orders: only
// cards-per-customer-10m, which counts distinct cards, catches it.
func (g *generator) cardTesting(at time.Duration) {
	who := g.fraudster()
	n := 3 + g.rng.IntN(2)
	for range n {
		who.card = fmt.Sprintf("card-%012x", mix(g.rng.Uint64())&0xffff_ffff_ffff)
		amount := roundTo(100+g.rng.Int64N(900), 100)
		g.add(planned{at: at, kind: kindOrder, ev: g.order(who, amount), key: who.customer})
		at += g.between(31*time.Second, 40*time.Second)
	}
}

// clamp: a small order, then a refund of an older, larger purchase on the
// same card: more than the card's window holds, so the counter clamps at 0.
func (g *generator) clamp(at time.Duration) {
	who := shopper(100_000 + g.rng.IntN(customerPool))
	small := roundTo(10_000+g.rng.Int64N(30_001), 100)
	g.add(planned{at: at, kind: kindOrder, ev: g.order(who, small), key: who.customer})
	older := g.order(who, 0) // an order from before the window
	refund := g.refund(older, roundTo(150_000+g.rng.Int64N(100_001), 1_000))
	g.add(planned{at: at + g.between(time.Second, 2*time.Second), kind: kindRefund, ev: refund, key: who.customer})
}

// invalid sends a broken event, which goes to the dead-letter topic.
func (g *generator) invalid(at time.Duration) {
	g.events++
	id := fmt.Sprintf("ev-%06d", g.events)
	who := shopper(100_000 + g.rng.IntN(customerPool))
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

func (g *generator) order(who identity, amount int64) *eventJSON {
	g.events++
	g.orders++
	return &eventJSON{
		EventID:         fmt.Sprintf("ev-%06d", g.events),
		Type:            "order",
		OrderID:         fmt.Sprintf("ord-%06d", 100_000+g.orders),
		CustomerID:      who.customer,
		Email:           who.email,
		Phone:           who.phone,
		CardFingerprint: who.card,
		IP:              who.ip,
		DeviceID:        who.device,
		ShippingAddress: who.address,
		Amount:          amount,
		Currency:        demoCurrency,
	}
}

func (g *generator) refund(o *eventJSON, amount int64) *eventJSON {
	g.events++
	r := *o
	r.EventID = fmt.Sprintf("ev-%06d", g.events)
	r.Type = "refund"
	r.Amount = amount
	return &r
}

// fraudster is a new identity outside the shoppers' pool.
func (g *generator) fraudster() identity {
	g.frauds++
	return newIdentity(fmt.Sprintf("cust-f%04d", g.frauds), mix(uint64(g.rng.Uint32())<<32|uint64(g.frauds)))
}

func (g *generator) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(g.rng.Int64N(int64(hi-lo)+1))
}

// shopper is customer n of the ordinary pool, with the same card, IP and
// device every time they order.
func shopper(n int) identity {
	return newIdentity(fmt.Sprintf("cust-%06d", n), mix(uint64(n)))
}

var districts = []string{"Gangnam-gu", "Mapo-gu", "Jongno-gu", "Songpa-gu", "Yongsan-gu", "Seocho-gu", "Haeundae-gu", "Suseong-gu"}

func newIdentity(customer string, h uint64) identity {
	return identity{
		customer: customer,
		email:    fmt.Sprintf("%s@example.com", customer),
		phone:    fmt.Sprintf("+82-10-%04d-%04d", h%10_000, (h>>16)%10_000),
		card:     fmt.Sprintf("card-%012x", h&0xffff_ffff_ffff),
		ip:       fmt.Sprintf("10.%d.%d.%d", (h>>8)&0xff, (h>>16)&0xff, 1+(h>>24)%254),
		device:   fmt.Sprintf("dev-%08x", uint32(h>>32)),
		address:  fmt.Sprintf("%d, %s, Seoul", 1+(h>>40)%300, districts[(h>>50)%uint64(len(districts))]),
	}
}

// mix is SplitMix64's finaliser: identities spread evenly without a table.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func roundTo(v, unit int64) int64 { return max(unit, v/unit*unit) }

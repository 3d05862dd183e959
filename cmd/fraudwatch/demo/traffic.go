package demo

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/outcome"
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
	invalidPeriod = 8 * time.Second
	writeTimeout  = 10 * time.Second
)

// kind says which topic a message goes to, and what it is counted as.
type kind int

const (
	kindOrder kind = iota
	kindRefund
	kindInvalid
	kindOutcome // to the outcomes topic
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
	at      time.Duration
	kind    kind
	ev      *eventJSON       // nil for an invalid event and an outcome
	raw     string           // the value of an invalid event
	outcome *outcome.Outcome // an outcome's, stamped when sent
	key     string
	burst   *Burst // the burst it belongs to, if any
	// settle holds it until the pipeline has processed everything sent
	// before it: a refund after its order, an order after a refund, which
	// go through topics of their own, stay in that order on a machine too
	// busy to keep up with the traffic.
	settle bool
}

// produced counts what the generator has had acknowledged by Kafka.
type produced struct {
	orders, refunds, invalid int
	// fraud, legit and unclear count the outcomes, by label.
	fraud, legit, unclear int
}

// total counts the events (outcomes are not).
func (p produced) total() int { return p.orders + p.refunds + p.invalid }

func (p produced) outcomes() int { return p.fraud + p.legit + p.unclear }

func (p produced) String() string {
	return fmt.Sprintf("%s, %s, %d invalid", plural(int64(p.orders), "order"), plural(int64(p.refunds), "refund"), p.invalid)
}

// generator decides the demo's traffic. It is deterministic for a seed and
// a sequence of step times, and knows nothing of Kafka (see send). Its
// patterns draw from a source of their own (plan), so that a seed plants
// the same bursts and outcomes however the steps fall; only the ids of
// orders and events depend on the ordinary orders between them.
type generator struct {
	rng      *rand.Rand // ordinary shoppers
	plan     *rand.Rand // the patterns, their outcomes, invalid events
	events   int
	orders   int
	frauds   int
	invalids int
	// counts of look-alike identities and of bots, which name them
	businesses, households, bots int
	bursts                       []*Burst

	rate      int           // ordinary orders per second, this second
	rateUntil time.Duration // when to draw the rate again
	owed      float64       // fractional ordinary orders carried between steps
	planned   time.Duration // cycles are planned up to here
	queue     []planned     // sorted by at
	last      time.Duration
}

func newGenerator(seed uint64) *generator {
	return &generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		plan: rand.New(rand.NewPCG(mix(seed), seed^0x5851f42d4c957f2d))}
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
		g.add(planned{at: at + between(g.rng, 2*time.Second, 6*time.Second), kind: kindRefund, ev: refund, key: who.customer})
	}
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
	return newIdentity(fmt.Sprintf("cust-f%04d", g.frauds), mix(uint64(g.plan.Uint32())<<32|uint64(g.frauds)))
}

// after is a planned delay between lo and hi.
func (g *generator) after(lo, hi time.Duration) time.Duration { return between(g.plan, lo, hi) }

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
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

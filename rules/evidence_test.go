package rules_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

// order is one order of an evidence test: its id, amount, card and seconds
// after testNow - 2m.
type order struct {
	id     string
	amount int64
	card   string
	at     int
}

// An alert lists the latest orders of its window up to the crossing one,
// newest first; a distinct rule's the values they brought. A count or
// distinct rule lists the last evidence orders up to the crossing, every
// one when its threshold is within evidence; an amount rule those from half
// its threshold. Windows further from their threshold keep none.
func TestAlertsCarryTheirEvidence(t *testing.T) {
	count := rule("orders", alert.Count, 6, "customer_id")
	count.Evidence = 3
	count10 := count
	count10.Evidence = 10
	three := rule("orders", alert.Count, 3, "customer_id")
	three.Evidence = 10
	five := rule("orders", alert.Count, 5, "customer_id")
	five.Evidence = 4
	amount := rule("paid", alert.Amount, 1000, "customer_id")
	amount.Evidence = 10
	smallAmount := rule("paid", alert.Amount, 5, "customer_id")
	smallAmount.Evidence = 10
	cards := rule("cards", alert.Distinct, 3, "customer_id")
	cards.Field, cards.Evidence = "card_fingerprint", 10
	fiveCards := cards
	fiveCards.Threshold, fiveCards.Evidence = 5, 4
	sliding := rule("sliding", alert.Count, 3, "customer_id")
	sliding.WindowType, sliding.Lateness, sliding.Evidence = alert.Sliding, time.Minute, 10
	slidingFive := sliding
	slidingFive.Threshold, slidingFive.Evidence = 5, 4
	none := rule("orders", alert.Count, 6, "customer_id")
	none.Evidence = 0
	far := rule("orders", alert.Count, 40, "customer_id")
	far.Evidence = 10

	numbered := func(n int, amount int64) []order {
		var out []order
		for i := 1; i <= n; i++ {
			out = append(out, order{id: fmt.Sprint("o", i), amount: amount, card: "c", at: i})
		}
		return out
	}
	carded := func(cards ...string) []order {
		var out []order
		for i, c := range cards {
			out = append(out, order{id: fmt.Sprint("o", i+1), amount: 1, card: c, at: i + 1})
		}
		return out
	}
	tests := []struct {
		name   string
		rule   rules.Rule
		orders []order
		want   []string // the alert's evidence: order ids, newest first; nil for no alert
		values []string // its values, for a distinct rule
		keeps  bool     // whether the window keeps evidence at the end
		stored int      // how many entries it holds then, when it matters
	}{
		// "3 orders by one customer within a minute": the three.
		{"threshold 3, evidence 10: the three orders", three, numbered(3, 1), []string{"o3", "o2", "o1"}, nil, true, 3},
		{"a count lists the last orders", count, numbered(7, 1), []string{"o6", "o5", "o4"}, nil, true, 3},
		// Threshold 6 within evidence 10: every order to the crossing; o7
		// came after it.
		{"nothing after the crossing", count10, numbered(8, 1), []string{"o6", "o5", "o4", "o3", "o2", "o1"}, nil, true, 6},
		{"threshold above evidence: the last evidence orders", five, numbered(5, 1), []string{"o5", "o4", "o3", "o2"}, nil, true, 4},
		{"an amount lists from half the threshold", amount, numbered(5, 300), []string{"o4", "o3", "o2"}, nil, true, 3},
		{"an amount within evidence lists from half the threshold too", smallAmount, numbered(5, 1), []string{"o5", "o4", "o3"}, nil, true, 3},
		// Every order that brought a value, and the one between them.
		{"a distinct rule lists its values", cards, carded("A", "B", "A", "C"),
			[]string{"o4", "o3", "o2", "o1"}, []string{"C", "A", "B", "A"}, true, 4},
		{"a distinct threshold above evidence: the last evidence orders", fiveCards, carded("A", "B", "C", "D", "E"),
			[]string{"o5", "o4", "o3", "o2"}, []string{"E", "D", "C", "B"}, true, 4},
		// o1 and o2 are in the evidence, and no longer in the window.
		{"a sliding window lists what it counts", sliding, []order{{"o1", 1, "c", 0}, {"o2", 1, "c", 5}, {"o3", 1, "c", 70}, {"o4", 1, "c", 80}, {"o5", 1, "c", 90}},
			[]string{"o5", "o4", "o3"}, nil, true, 5},
		{"a sliding threshold above evidence: the last evidence orders", slidingFive, numbered(5, 1), []string{"o5", "o4", "o3", "o2"}, nil, true, 4},
		{"evidence 0 keeps none", none, numbered(6, 1), []string{}, nil, false, 0},
		{"far from the threshold, none", far, numbered(5, 1), nil, nil, false, 0},
		// Threshold 40, evidence 10: kept from 31, the last 10 to 40.
		{"more than evidence short of the threshold, none", far, numbered(30, 1), nil, nil, false, 0},
		{"from evidence short of the threshold", far, numbered(32, 1), nil, nil, true, 2},
	}
	for _, oneBatch := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/one batch %v", tt.name, oneBatch), func(t *testing.T) {
				h := newHarness(t, tt.rule)
				var evs []*event.Event
				for _, o := range tt.orders {
					at := testNow.Add(-2*time.Minute + time.Duration(o.at)*time.Second)
					evs = append(evs, ev(t, event.Order, "order_id", o.id, "amount", o.amount, "card_fingerprint", o.card,
						"occurred_at", at.Format(time.RFC3339Nano)))
				}
				if oneBatch {
					h.handle(evs...)
				} else {
					for _, e := range evs {
						h.handle(e)
					}
				}
				alerts := h.sink.got()
				if tt.want == nil {
					if len(alerts) != 0 {
						t.Fatalf("%d alerts, want none", len(alerts))
					}
				} else {
					if len(alerts) != 1 {
						t.Fatalf("%d alerts, want 1", len(alerts))
					}
					var ids, values []string
					for _, e := range alerts[0].Evidence {
						ids = append(ids, e.OrderID)
						if e.Value != "" {
							values = append(values, e.Value)
						}
						if e.EventID != "evt-"+e.OrderID || e.At.IsZero() {
							t.Errorf("entry %+v: want its event id and time", e)
						}
					}
					if !slices.Equal(ids, tt.want) && !(len(ids) == 0 && len(tt.want) == 0) {
						t.Errorf("evidence %q, want %q", ids, tt.want)
					}
					if !slices.Equal(values, tt.values) {
						t.Errorf("values %q, want %q", values, tt.values)
					}
					if e := alerts[0].Evidence; len(e) > 0 && tt.rule.Metric == alert.Amount && e[0].Amount != tt.orders[0].amount {
						t.Errorf("amount %d, want %d", e[0].Amount, tt.orders[0].amount)
					}
				}
				h.wantStoredEvidence(tt.rule, "cust-1", tt.keeps, tt.stored)
			})
		}
	}
}

// A sliding window lives on after each change, and so does its evidence:
// an order written to it gives it the window's remaining life again, so
// that the list does not end while the window still counts its orders.
func TestSlidingEvidenceLivesWithItsWindow(t *testing.T) {
	r := rule("sliding", alert.Count, 3, "customer_id")
	r.WindowType, r.Lateness, r.Evidence = alert.Sliding, time.Minute, 10
	h := newHarness(t, r)
	at := func(s int) string { return testNow.Add(time.Duration(s-60) * time.Second).Format(time.RFC3339Nano) }
	h.handle(ev(t, event.Order, "order_id", "o1", "occurred_at", at(0)))
	g := h.keys.Group([]string{"cust-1"})
	key, window := h.keys.Evidence(g, r.State()), h.keys.Window(g, r.State())
	// As if the list were about to end, its window's first order long
	// gone; the window itself lives on with its next order.
	h.rdb.PExpire(t.Context(), key, time.Second)
	h.handle(ev(t, event.Order, "order_id", "o2", "occurred_at", at(50)))
	// Their ends, not two PTTLs: a millisecond may pass between two reads.
	left := h.rdb.PTTL(t.Context(), key).Val()
	ends, windowEnds := h.rdb.PExpireTime(t.Context(), key).Val(), h.rdb.PExpireTime(t.Context(), window).Val()
	if left <= time.Minute || ends != windowEnds {
		t.Errorf("evidence lives %v and ends at %s, its window at %s: want the window's life", left,
			time.UnixMilli(ends.Milliseconds()).Format(time.StampMilli), time.UnixMilli(windowEnds.Milliseconds()).Format(time.StampMilli))
	}
}

// A crossing delivered again lists the orders up to it, as the first time.
func TestRedeliveredCrossingListsTheSameEvidence(t *testing.T) {
	r := rule("orders", alert.Count, 3, "customer_id")
	r.Evidence = 5
	h := newHarness(t, r)
	var evs []*event.Event
	for i := 1; i <= 5; i++ {
		evs = append(evs, ev(t, event.Order, "order_id", fmt.Sprint("o", i)))
	}
	h.handle(evs...)
	h.handle(evs...) // redelivered at the same offsets: counted once
	alerts := h.sink.got()
	if len(alerts) != 2 {
		t.Fatalf("%d alerts handed off, want the crossing twice", len(alerts))
	}
	for _, a := range alerts {
		var ids []string
		for _, e := range a.Evidence {
			ids = append(ids, e.OrderID)
		}
		if want := []string{"o3", "o2", "o1"}; !slices.Equal(ids, want) {
			t.Errorf("evidence %q, want %q", ids, want)
		}
	}
}

// racing runs another replica's batch between a batch's counting calls and
// its evidence calls, once.
type racing struct {
	*lua.Scripts
	other func()
}

func (r *racing) AddEvidence(ctx context.Context, calls []*lua.Evidence) error {
	if r.other != nil {
		r.other()
		r.other = nil
	}
	return r.Scripts.AddEvidence(ctx, calls)
}

// An order another replica counts after the crossing, and writes into the
// evidence before the crossing's own entry, is not listed.
func TestEvidenceLeavesOutOrdersCountedAfterTheCrossing(t *testing.T) {
	r := rule("orders", alert.Count, 3, "customer_id")
	r.Evidence = 10
	h := newHarness(t, r)
	h.handle(ev(t, event.Order, "order_id", "o1"), ev(t, event.Order, "order_id", "o2"))

	scripts, err := lua.New(lua.Config{}, h.rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: h.prefix}, []rules.Rule{r}, scripts, &fakeSink{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	race := &racing{Scripts: scripts, other: func() {
		o4 := ev(t, event.Order, "order_id", "o4")
		o4.Source = event.Source{Topic: "orders", Partition: 1, Offset: 0}
		if _, err := other.Handle(t.Context(), []*event.Event{o4}); err != nil {
			t.Fatal(err)
		}
	}}
	replica, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: h.prefix}, []rules.Rule{r}, race, sink, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o3 := ev(t, event.Order, "order_id", "o3")
	o3.Source = event.Source{Topic: "orders", Partition: 0, Offset: 2}
	if _, err := replica.Handle(t.Context(), []*event.Event{o3}); err != nil {
		t.Fatal(err)
	}
	alerts := sink.got()
	if len(alerts) != 1 {
		t.Fatalf("%d alerts, want 1", len(alerts))
	}
	var ids []string
	for _, e := range alerts[0].Evidence {
		ids = append(ids, e.OrderID)
	}
	if want := []string{"o3", "o2", "o1"}; !slices.Equal(ids, want) {
		t.Errorf("evidence %q, want %q", ids, want)
	}
}

// refusingEvidence is the real scripts, but for evidence_add, which
// refuses its arguments.
type refusingEvidence struct{ *lua.Scripts }

func (refusingEvidence) AddEvidence(context.Context, []*lua.Evidence) error {
	return fmt.Errorf("evidence_add: %w", lua.ErrInvalidArguments)
}

// A refused evidence call costs the batch's alerts their evidence, never
// their delivery. A sliding window's: a fixed window's evidence is written
// by its counting call.
func TestRefusedEvidenceCostsOnlyTheEvidence(t *testing.T) {
	r := rule("orders", alert.Count, 3, "customer_id")
	r.Evidence, r.WindowType = 10, alert.Sliding
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	eng, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: redistest.Prefix(t), Now: func() time.Time { return testNow }},
		[]rules.Rule{r}, refusingEvidence{scripts}, sink, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*event.Event
	for i := range 3 {
		o := ev(t, event.Order, "order_id", fmt.Sprint("o", i), "occurred_at", testNow.Add(time.Duration(i-10)*time.Second).Format(time.RFC3339Nano))
		o.Source = event.Source{Topic: "orders", Offset: int64(i)}
		evs = append(evs, o)
	}
	if unprocessable, err := eng.Handle(t.Context(), evs); err != nil || len(unprocessable) > 0 {
		t.Fatalf("Handle = %v, %v; want the batch done", unprocessable, err)
	}
	if got := sink.got(); len(got) != 1 || len(got[0].Evidence) != 0 {
		t.Fatalf("alerts %+v, want one, without evidence", got)
	}
}

// A fixed window that holds its evidence is counted without a refused
// command inside Redis: Redis counts a refusal (INFO commandstats'
// failed_calls, errorstats) even when the script handles it, where an
// operator's dashboards read it as a failing client. Its count is a field
// of its hash (HINCRBY), never refused for the entries beside it. When its
// rule no longer keeps evidence, INCRBY (a string's count) is tried first
// and refused, once a change until the window ends; HINCRBY still never
// is. On a private Redis, whose statistics only this test moves.
func TestEvidenceInACounterIsNoErrorToRedis(t *testing.T) {
	for _, tc := range []struct {
		name     string
		evidence int
		incrby   string // INCRBY's failed calls; "": never called
	}{
		{"the rule keeps evidence", 10, ""},
		// INCRBY first, refused by the hash, then HINCRBY: a change's
		// cost until the window ends (incr_and_check.lua).
		{"the rule's evidence turned off since", 0, "failed_calls=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Connect(t, redistest.Start(t).Addr)
			r := rule("orders", alert.Count, 9, "customer_id")
			r.Evidence = tc.evidence
			h := newHarnessOn(t, rdb, nil, r)
			key := h.windowKey("orders", "c")
			// An entry as long as the shortest an order makes.
			held := "mf2k3l0g\x1f1\x1f0\x1fo0\x1f"
			if err := rdb.HSet(t.Context(), key, "c", 2, "2", held).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.Expire(t.Context(), key, time.Minute)
			for i := range 3 {
				h.handle(ev(t, event.Order, "order_id", fmt.Sprint("o", i), "customer_id", "c"))
			}
			h.wantCounter("orders", alert.Count, 5, "c")
			if v := rdb.HGet(t.Context(), key, "2").Val(); v != held {
				t.Fatalf("the window holds %q: its evidence is gone", v)
			}
			stats := rdb.Info(t.Context(), "commandstats").Val()
			stat := func(cmd string) (string, bool) {
				_, line, ok := strings.Cut(stats, "cmdstat_"+cmd+":")
				line, _, _ = strings.Cut(line, "\r\n")
				return line, ok
			}
			hincrby, called := stat("hincrby")
			incrby, tried := stat("incrby")
			if !called || !strings.Contains(hincrby, "failed_calls=0") || tried != (tc.incrby != "") || !strings.Contains(incrby, tc.incrby) {
				t.Fatalf("want HINCRBY called, never failed, and INCRBY %q:\n%s", tc.incrby, stats)
			}
		})
	}
}

package rules_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
	"github.com/fraudwatch/fraudwatch/rules"
)

func TestEngineCountRuleCrossesOnce(t *testing.T) {
	h := newHarness(t, rule("orders-3", alert.Count, 3, "customer_id"))
	for i, cust := range []string{"c1", "c2", "c1", "c1", "c2", "c1", "c1"} {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i)), "customer_id", cust))
	}
	// c1's third order is o3; c2 ordered twice and never crossed.
	if got := h.crossedBy("orders-3"); !reflect.DeepEqual(got, []string{"evt-o3"}) {
		t.Errorf("crossings by %v, want only evt-o3", got)
	}
	if a := h.sink.got(); len(a) == 1 && (a[0].Current != 3 || !reflect.DeepEqual(a[0].GroupValues, []string{"c1"})) {
		t.Errorf("alert current %d group %q, want 3 [c1]", a[0].Current, a[0].GroupValues)
	}
	h.wantCounter("orders-3", alert.Count, 5, "c1")
	h.wantCounter("orders-3", alert.Count, 2, "c2")
	ttl, err := h.rdb.TTL(t.Context(), h.windowKey("orders-3", "c1")).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("counter TTL = %v, %v; want the 1m window", ttl, err)
	}
}

func TestEngineAmountRuleSums(t *testing.T) {
	h := newHarness(t, rule("amount-1000", alert.Amount, 1000, "card_fingerprint"))
	steps := []struct {
		amount int64
		card   string
	}{{400, "k1"}, {500, "k1"}, {900, "k2"}, {200, "k1"}, {50, "k1"}}
	for i, s := range steps {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i)), "card_fingerprint", s.card,
			"amount", s.amount, "currency", "krw"))
	}
	got := h.sink.got()
	if len(got) != 1 || got[0].EventID != "evt-o3" || got[0].Current != 1100 || got[0].Currency != "KRW" || got[0].Metric != "amount" {
		t.Fatalf("alerts %+v, want one on evt-o3 at 1100 KRW", got)
	}
	h.wantCounter("amount-1000", alert.Amount, 1150, "k1")
	h.wantCounter("amount-1000", alert.Amount, 900, "k2")
}

func TestEngineCompositeGroupBy(t *testing.T) {
	h := newHarness(t, rule("cust-card", alert.Count, 2, "customer_id", "card_fingerprint"))
	for i, p := range [][2]string{{"c1", "k1"}, {"c1", "k2"}, {"c2", "k1"}, {"c1", "k1"}} {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i)), "customer_id", p[0], "card_fingerprint", p[1]))
	}
	got := h.sink.got()
	if len(got) != 1 || got[0].EventID != "evt-o3" {
		t.Fatalf("alerts %+v, want one on evt-o3", got)
	}
	if !reflect.DeepEqual(got[0].GroupBy, []string{"customer_id", "card_fingerprint"}) ||
		!reflect.DeepEqual(got[0].GroupValues, []string{"c1", "k1"}) {
		t.Errorf("group %q = %q", got[0].GroupBy, got[0].GroupValues)
	}
	h.wantCounter("cust-card", alert.Count, 1, "c1", "k2")
	h.wantCounter("cust-card", alert.Count, 1, "c2", "k1")
}

func TestEngineSkipsEventsLackingGroupBy(t *testing.T) {
	h := newHarness(t,
		rule("by-email", alert.Count, 1, "email"),
		rule("by-merchant", alert.Count, 1, "merchant_id"),
		rule("by-email-ip", alert.Amount, 1, "email", "ip"),
	)
	h.handle(ev(t, event.Order, "order_id", "o1"))
	h.handle(ev(t, event.Order, "order_id", "o2", "email", "", "merchant_id", nil, "ip", "203.0.113.9"))
	h.handle(ev(t, event.Order, "order_id", "o3", "merchant_id", map[string]any{"id": 7}))
	h.handle(ev(t, event.Refund, "order_id", "o4", "ip", "203.0.113.9"))
	if got := h.sink.got(); len(got) != 0 {
		t.Fatalf("events lacking the group_by fields raised %+v", got)
	}
	if keys := h.storedKeys(); len(keys) != 0 {
		t.Fatalf("events lacking the group_by fields wrote %q", keys)
	}

	// An extra field the event does carry groups like any other.
	h.handle(ev(t, event.Order, "order_id", "o5", "merchant_id", 7))
	got := h.sink.got()
	if len(got) != 1 || got[0].Rule != "by-merchant" || !reflect.DeepEqual(got[0].GroupValues, []string{"7"}) {
		t.Fatalf("alerts %+v, want by-merchant for merchant 7", got)
	}
}

func TestEngineDisabledRulesNeverRun(t *testing.T) {
	off := rule("off", alert.Count, 1, "customer_id")
	off.Enabled = false
	offAmount := rule("off-amount", alert.Amount, 1, "customer_id")
	offAmount.Enabled = false
	h := newHarness(t, off, offAmount)
	h.handle(ev(t, event.Order, "order_id", "o1"))
	h.handle(ev(t, event.Refund, "order_id", "o1"))
	if got := h.sink.got(); len(got) != 0 {
		t.Errorf("disabled rules raised %+v", got)
	}
	if keys := h.storedKeys(); len(keys) != 0 {
		t.Errorf("disabled rules wrote %q", keys)
	}
}

func TestEngineRefundsLowerAmountRulesOnly(t *testing.T) {
	h := newHarness(t,
		rule("amt", alert.Amount, 1_000_000, "customer_id"),
		rule("cnt", alert.Count, 100, "customer_id"),
		rule("amt-email", alert.Amount, 1_000_000, "email"),
	)
	h.handle(ev(t, event.Order, "order_id", "o1", "amount", 300))
	h.handle(ev(t, event.Order, "order_id", "o2", "amount", 300))
	h.handle(ev(t, event.Refund, "order_id", "o1", "event_id", "r1", "amount", 200, "email", "a@example.com"))

	h.wantCounter("amt", alert.Amount, 400, "cust-1")
	h.wantCounter("cnt", alert.Count, 2, "cust-1")
	// No order ever counted this email: a refund must not create a counter.
	if n, ok := h.counter("amt-email", alert.Amount, "a@example.com"); ok {
		t.Errorf("refund created a counter of %d", n)
	}
	ttl, err := h.rdb.TTL(t.Context(), h.windowKey("amt", "cust-1")).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("refunded counter TTL = %v, %v; want the window kept", ttl, err)
	}
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "amt"); got != 0 {
		t.Errorf("refunds_clamped_total{amt} = %v after a refund that fit", got)
	}
	if got := h.sink.got(); len(got) != 0 {
		t.Errorf("alerts %+v", got)
	}
}

func TestEngineRefundClamps(t *testing.T) {
	h := newHarness(t, rule("amt", alert.Amount, 1_000_000, "customer_id"), rule("other", alert.Amount, 1_000_000, "customer_id"))
	h.handle(ev(t, event.Order, "order_id", "o1", "amount", 500))
	h.handle(ev(t, event.Refund, "order_id", "o1", "event_id", "r1", "amount", 800))
	h.wantCounter("amt", alert.Amount, 0, "cust-1")
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "amt"); got != 1 {
		t.Errorf("refunds_clamped_total{amt} = %v, want 1", got)
	}
	// A refund against a counter already at 0 is nothing to clamp.
	h.handle(ev(t, event.Refund, "order_id", "o1", "event_id", "r2", "amount", 800))
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "amt"); got != 1 {
		t.Errorf("refunds_clamped_total{amt} = %v after a refund on 0, want 1", got)
	}
	if got := h.metric("fraudwatch_refunds_clamped_total", "rule", "other"); got != 1 {
		t.Errorf("refunds_clamped_total{other} = %v, want 1 (each rule counts its own)", got)
	}
}

func TestEngineCrossingsMetric(t *testing.T) {
	shadow := rule("r-shadow", alert.Count, 1, "customer_id")
	shadow.Mode = alert.ModeShadow
	h := newHarness(t,
		rule("r-one", alert.Count, 1, "customer_id"),
		rule("r-two", alert.Count, 2, "customer_id"),
		rule("r-never", alert.Amount, 1_000_000, "customer_id"),
		shadow,
	)
	for _, name := range []string{"r-one", "r-two", "r-never", "r-shadow"} {
		if got := h.metric("fraudwatch_threshold_crossings_total", "rule", name); got != 0 {
			t.Errorf("crossings{%s} = %v before any event, want an exported 0", name, got)
		}
	}
	for i := range 3 {
		h.handle(ev(t, event.Order, "order_id", "o"+string(rune('0'+i))))
	}
	h.handle(ev(t, event.Order, "order_id", "o9", "customer_id", "cust-2"))
	for name, want := range map[string]float64{"r-one": 2, "r-two": 1, "r-never": 0, "r-shadow": 2} {
		if got := h.metric("fraudwatch_threshold_crossings_total", "rule", name); got != want {
			t.Errorf("crossings{%s} = %v, want %v", name, got, want)
		}
	}
}

func TestEngineScriptErrors(t *testing.T) {
	t.Run("incr_and_check rejects its arguments", func(t *testing.T) {
		bad := rule("zero-threshold", alert.Count, 1, "customer_id")
		bad.Threshold = 0 // Parse would refuse it; the script must too
		h := newHarness(t, bad, rule("fine", alert.Count, 1, "customer_id"))
		e := ev(t, event.Order, "order_id", "o1")
		h.place(e)
		unprocessable, err := h.engine.Handle(t.Context(), []*event.Event{e})
		if err != nil {
			t.Fatalf("Handle = %v, want the batch done", err)
		}
		err = unprocessable[0]
		if !errors.Is(err, lua.ErrInvalidArguments) || !errors.Is(err, event.ErrUnprocessable) {
			t.Fatalf("unprocessable = %v, want lua.ErrInvalidArguments marked event.ErrUnprocessable", unprocessable)
		}
		for _, s := range []string{"zero-threshold", lua.IncrAndCheckName} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not name %q", err, s)
			}
		}
		if got := h.metric("fraudwatch_script_errors_total", "script", lua.IncrAndCheckName); got != 1 {
			t.Errorf("script_errors_total = %v, want 1", got)
		}
		// The script refused the one rule's change; the other rule counted.
		if got := h.crossedBy("zero-threshold"); len(got) != 0 {
			t.Error("a refused change raised an alert")
		}
		h.wantCounter("fine", alert.Count, 1, "cust-1")
	})
	t.Run("sales_decr meets a full Redis", func(t *testing.T) {
		// A private Redis out of memory (maxmemory 1 byte, no eviction):
		// it refuses the script's first write with OOM.
		rdb := redistest.Connect(t, redistest.Start(t).Addr)
		h := newHarnessOn(t, rdb, nil, rule("amt", alert.Amount, 1000, "customer_id"))
		for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
			if err := rdb.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		e := ev(t, event.Refund, "order_id", "o1")
		h.place(e)
		_, err := h.engine.Handle(t.Context(), []*event.Event{e})
		var rerr redis.Error
		if !errors.As(err, &rerr) || !strings.Contains(rerr.Error(), "OOM") {
			t.Fatalf("Handle = %v, want the Redis OOM error", err)
		}
		if errors.Is(err, event.ErrUnprocessable) {
			t.Fatal("a Redis error was marked unprocessable: it is worth retrying")
		}
		if !strings.Contains(err.Error(), lua.SalesDecrName) {
			t.Errorf("error %q does not name the script", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		h := newHarness(t, rule("cnt", alert.Count, 1, "customer_id"))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		e := ev(t, event.Order, "order_id", "o1")
		h.place(e)
		_, err := h.engine.Handle(ctx, []*event.Event{e})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Handle = %v, want context.Canceled", err)
		}
	})
}

func TestNewEngineValidates(t *testing.T) {
	scripts, err := lua.New(lua.Config{}, redistest.Client(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	if _, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: "fw{x}"}, nil, scripts, sink, nil, nil); err == nil {
		t.Error("NewEngine accepted a prefix with braces")
	}
	// The prefix is redis.key_prefix's: package config defaults it, not the
	// engine.
	if _, err := rules.NewEngine(rules.EngineConfig{}, nil, scripts, sink, nil, nil); err == nil {
		t.Error("NewEngine accepted no key prefix")
	}
	cfg := rules.EngineConfig{KeyPrefix: redistest.Prefix(t)}
	if _, err := rules.NewEngine(cfg, nil, nil, sink, nil, nil); err == nil {
		t.Error("NewEngine accepted nil counters")
	}
	if _, err := rules.NewEngine(cfg, nil, scripts, nil, nil, nil); err == nil {
		t.Error("NewEngine accepted a nil sink")
	}
	reg := prometheus.NewRegistry()
	if _, err := rules.NewEngine(cfg, nil, scripts, sink, nil, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.NewEngine(cfg, nil, scripts, sink, nil, reg); err == nil {
		t.Error("a second engine registered the same metrics on one registry")
	}
	// With no rules, an event is a no-op, not a panic.
	e, err := rules.NewEngine(cfg, nil, scripts, sink, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Handle(t.Context(), []*event.Event{ev(t, event.Order)}); err != nil {
		t.Error(err)
	}
}

// Logs name the rule and where the event came from, never its values.
func TestEngineLogsNoPersonalData(t *testing.T) {
	rdb := redistest.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := rules.NewEngine(rules.EngineConfig{KeyPrefix: redistest.Prefix(t)},
		[]rules.Rule{rule("amt", alert.Amount, 100, "email")}, scripts, &fakeSink{}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	order := ev(t, event.Order, "order_id", "SECRET-order", "event_id", "SECRET-event", "email", "secret@example.com", "amount", 500)
	order.Source = event.Source{Topic: "orders", Partition: 3, Offset: 42}
	refund := ev(t, event.Refund, "order_id", "SECRET-order", "event_id", "SECRET-refund", "email", "secret@example.com", "amount", 900)
	refund.Source = event.Source{Topic: "refunds", Partition: 3, Offset: 43}
	for _, x := range []*event.Event{order, refund} {
		if _, err := e.Handle(t.Context(), []*event.Event{x}); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if !strings.Contains(out, `"rule":"amt"`) || !strings.Contains(out, `"offset":42`) || !strings.Contains(out, "clamped") {
		t.Errorf("logs do not name the rule and the source of the crossing and the clamp:\n%s", out)
	}
	for _, secret := range []string{"SECRET", "secret@example.com", "cust-1"} {
		if strings.Contains(out, secret) {
			t.Errorf("logs contain %q:\n%s", secret, out)
		}
	}
}

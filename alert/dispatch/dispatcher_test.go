package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

func TestDispatcherDelivery(t *testing.T) {
	always := func(r reply) func(int) reply { return func(int) reply { return r } }
	seq := func(rs ...reply) func(int) reply {
		return func(n int) reply { return rs[min(n, len(rs)-1)] }
	}
	tests := []struct {
		name         string
		token        bool
		script       func(int) reply
		wantErr      bool // ErrNotDelivered: kept for a later attempt
		wantRequests int
		wantSent     float64
		wantFailures float64
		wantCooldown bool // the cooldown is still held afterwards
		// wantErrors counts the failed attempts that are retried, each
		// (fraudwatch_alert_delivery_errors_total).
		wantErrors float64
	}{
		{"delivered first time", false, always(reply{}), false, 1, 1, 0, true, 0},
		{"5xx twice then 200", false, seq(reply{status: 503}, reply{status: 500}, reply{}), false, 3, 1, 0, true, 2},
		{"429 without Retry-After then 200", false, seq(reply{status: 429}, reply{}), false, 2, 1, 0, true, 1},
		{"5xx forever is kept for later", false, always(reply{status: 502}), true, 4, 0, 0, true, 4},
		{"400 invalid_payload is refused for good", false, always(reply{status: 400, body: "invalid_payload"}), false, 1, 0, 1, false, 0},
		{"404 no_service is kept until fixed", false, always(reply{status: 404, body: "no_service"}), true, 4, 0, 0, true, 4},
		{"403 action_prohibited is kept until fixed", false, always(reply{status: 403, body: "action_prohibited"}), true, 4, 0, 0, true, 4},
		{"token ok", true, always(reply{body: okJSON}), false, 1, 1, 0, true, 0},
		// Only its own channel is wrong: parked, so that the partition
		// goes on (TestChannelRefusalParksOnlyItsAlerts).
		{"token ok:false channel_not_found is parked", true, always(reply{body: `{"ok":false,"error":"channel_not_found"}`}), false, 1, 0, 0, true, 0},
		{"token ok:false invalid_auth is kept until fixed", true, always(reply{body: `{"ok":false,"error":"invalid_auth"}`}), true, 4, 0, 0, true, 4},
		{"token ok:false invalid_blocks is refused for good", true, always(reply{body: `{"ok":false,"error":"invalid_blocks"}`}), false, 1, 0, 1, false, 0},
		{"token ok:false internal_error then ok", true, seq(reply{body: `{"ok":false,"error":"internal_error"}`}, reply{body: okJSON}), false, 2, 1, 0, true, 1},
		{"token ok:false ratelimited forever is kept for later", true, always(reply{body: `{"ok":false,"error":"ratelimited"}`}), true, 4, 0, 0, true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, tt.script)
			n := f.webhook(t)
			if tt.token {
				n = f.token(t)
			}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{MaxAttempts: 4})
			a := env.alert("g1", "evt-1")
			err := env.deliver(t, a)
			if tt.wantErr != errors.Is(err, dispatch.ErrNotDelivered) || (!tt.wantErr && err != nil) {
				t.Fatalf("HandleMessages = %v, want ErrNotDelivered: %v", err, tt.wantErr)
			}
			if got := f.requests(); got != tt.wantRequests {
				t.Errorf("Slack got %d requests, want %d", got, tt.wantRequests)
			}
			if got := f.deliveredCount(); float64(got) != tt.wantSent {
				t.Errorf("Slack accepted %d messages, want %v", got, tt.wantSent)
			}
			if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", a.Rule); got != tt.wantSent {
				t.Errorf("fraudwatch_alerts_sent_total = %v, want %v", got, tt.wantSent)
			}
			if got := env.metric(t, "fraudwatch_alert_failures_total", "rule", a.Rule); got != tt.wantFailures {
				t.Errorf("fraudwatch_alert_failures_total = %v, want %v", got, tt.wantFailures)
			}
			if got := env.total(t, "fraudwatch_alerts_suppressed_total"); got != 0 {
				t.Errorf("%v suppressed, want none", got)
			}
			if got := env.metric(t, "fraudwatch_alert_delivery_errors_total", "rule", a.Rule); got != tt.wantErrors {
				t.Errorf("fraudwatch_alert_delivery_errors_total = %v, want %v", got, tt.wantErrors)
			}
			held := env.rdb.Get(context.Background(), a.CooldownKey).Val() == a.ID
			if held != tt.wantCooldown {
				t.Errorf("cooldown held = %v, want %v", held, tt.wantCooldown)
			}
		})
	}
}

func TestDispatcherHonoursRetryAfter(t *testing.T) {
	f := newFakeSlack(t, func(n int) reply {
		if n == 0 {
			return reply{status: http.StatusTooManyRequests, retryAfter: "1"}
		}
		return reply{}
	})
	// The backoff is far below Retry-After: only Retry-After can explain
	// a wait of a second.
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err := env.deliver(t, env.alert("g1", "evt-1")); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.arrivals) != 2 {
		t.Fatalf("Slack got %d requests, want 2", len(f.arrivals))
	}
	if gap := f.arrivals[1].Sub(f.answered[0]); gap < time.Second {
		t.Errorf("retried %v after the 429, want at least the 1s of Retry-After", gap)
	}
	if f.delivered != 1 {
		t.Errorf("Slack accepted %d messages, want 1", f.delivered)
	}
}

// A Retry-After beyond MaxRetryAfter waits MaxRetryAfter: Slack asking
// for an hour must not hold a partition for an hour. The failed attempt
// counts as a delivery error.
func TestDispatcherCapsRetryAfter(t *testing.T) {
	f := newFakeSlack(t, func(n int) reply {
		if n == 0 {
			return reply{status: http.StatusTooManyRequests, retryAfter: "3600"}
		}
		return reply{}
	})
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MaxRetryAfter: 50 * time.Millisecond})
	if err := env.deliver(t, env.alert("g1", "evt-1")); err != nil {
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 1 {
		t.Errorf("Slack accepted %d messages, want 1", got)
	}
	if got := env.total(t, "fraudwatch_alert_delivery_errors_total"); got != 1 {
		t.Errorf("delivery errors = %v, want 1", got)
	}
}

func TestDispatcherShadow(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	a := env.alert("g1", "evt-1")
	a.Mode = alert.ModeShadow
	if err := env.deliver(t, a); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(); got != 0 {
		t.Errorf("Slack got %d requests for a shadow alert", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", a.Rule, "reason", "shadow"); got != 1 {
		t.Errorf("suppressed{reason=shadow} = %v, want 1", got)
	}
	if got := env.total(t, "fraudwatch_alerts_suppressed_total"); got != 1 {
		t.Errorf("%v suppressed, want only the shadow one", got)
	}
	if n := env.rdb.Exists(context.Background(), a.CooldownKey, a.RecordKey, env.recordKey(t, a, "slack")).Val(); n != 0 {
		t.Error("a shadow alert took the cooldown or wrote a record")
	}
}

func TestHandleMessagesHonoursContext(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{hang: true} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	env.knowRule()
	msg := env.message(t, env.alert("g1", "evt-1"), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := handleOne(ctx, env.d, msg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("HandleMessages = %v, want the context's deadline", err)
	}
}

// A rule in force has its series at 0 before its first alert.
func TestSetRulesExportsZeroSeries(t *testing.T) {
	env := testDispatcher(t, alert.NotifierFunc(func(context.Context, alert.Alert) error { return nil }), dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{"quiet-rule": {Mode: alert.ModeAlert}})
	for _, name := range []string{"fraudwatch_alerts_sent_total", "fraudwatch_alert_failures_total",
		"fraudwatch_alerts_suppressed_total", "fraudwatch_alert_delivery_errors_total"} {
		if n := env.series(t, name); n == 0 {
			t.Errorf("%s: no series, want the rule's zero series", name)
		}
	}
}

// Failed attempts wait longer each time, doubling from MinBackoff up to
// MaxBackoff (docs/alerts.md: 0.5 s doubling to 30 s by default).
func TestDeliveryBackoffDoubles(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{status: 503} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MinBackoff: 40 * time.Millisecond, MaxBackoff: 160 * time.Millisecond, MaxAttempts: 5})
	if err := env.deliver(t, env.alert("g1", "evt-1")); !errors.Is(err, dispatch.ErrNotDelivered) {
		t.Fatalf("HandleMessages = %v, want ErrNotDelivered", err)
	}
	f.mu.Lock()
	arrivals := slices.Clone(f.arrivals)
	f.mu.Unlock()
	if len(arrivals) != 5 {
		t.Fatalf("%d attempts, want 5", len(arrivals))
	}
	// At least: a wait may run long on a busy machine, never short.
	for i, want := range []time.Duration{40, 80, 160, 160} {
		if gap := arrivals[i+1].Sub(arrivals[i]); gap < want*time.Millisecond {
			t.Errorf("wait %d was %v, want at least %v", i+1, gap, want*time.Millisecond)
		}
	}
}

// Recent lists what this dispatcher settled, newest first, at most 50,
// with the group's fields and never its values.
func TestRecent(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	sent := env.alert("g1", "e1")
	again := env.alert("g1", "e2") // the same group: its cooldown
	shadow := env.alert("g2", "e3")
	shadow.Mode = alert.ModeShadow
	for _, a := range []alert.Alert{sent, again, shadow, sent} { // sent again: settled before, not listed again
		if err := env.deliver(t, a); err != nil {
			t.Fatal(err)
		}
	}
	got := env.d.Recent()
	var outcomes []string
	for _, s := range got {
		outcomes = append(outcomes, s.ID+" "+s.Outcome)
		if strings.Join(s.GroupBy, ",") != "card_fingerprint" || s.At.IsZero() {
			t.Errorf("%+v: want its group's field and when", s)
		}
	}
	want := []string{sent.Rule + "/e3 shadow", sent.Rule + "/e2 cooldown", sent.Rule + "/e1 sent"}
	if !slices.Equal(outcomes, want) {
		t.Fatalf("Recent = %q, want %q", outcomes, want)
	}
	for i := range 60 {
		a := env.alert(fmt.Sprint("many-", i), fmt.Sprint("m", i))
		a.Mode = alert.ModeShadow
		if err := env.deliver(t, a); err != nil {
			t.Fatal(err)
		}
	}
	if got := env.d.Recent(); len(got) != 50 || got[0].ID != sent.Rule+"/m59" || got[49].ID != sent.Rule+"/m10" {
		t.Errorf("Recent holds %d, first %s, last %s; want the latest 50", len(got), got[0].ID, got[len(got)-1].ID)
	}
}

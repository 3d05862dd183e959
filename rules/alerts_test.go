package rules_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/event"
	"github.com/fraudwatch/fraudwatch/rules"
)

func TestEngineAlertCarriesEverything(t *testing.T) {
	r := rules.Rule{
		Name: "big-spender", Description: "{threshold} or more by one customer and card within {window}", Metric: alert.Amount,
		GroupBy: []string{"customer_id", "card_fingerprint"}, Window: 10 * time.Minute, Threshold: 1_000_000,
		Cooldown: time.Hour, Severity: alert.SeverityCritical, Mode: alert.ModeAlert, Channel: "#fraud-risk", Enabled: true,
	}
	h := newHarness(t, r)
	h.handle(ev(t, event.Order, "order_id", "o1", "card_fingerprint", "fp{1}", "amount", 600_000, "currency", "KRW"))
	h.handle(ev(t, event.Order, "order_id", "o2", "card_fingerprint", "fp{1}", "amount", 700_000, "currency", "KRW",
		"occurred_at", "2024-03-01T18:04:05+09:00"))
	h.handle(ev(t, event.Order, "order_id", "o3", "card_fingerprint", "fp{2}", "amount", 1_000_000))

	values := []string{"cust-1", "fp{1}"}
	g, g2 := h.keys.Group(values), h.keys.Group([]string{"cust-1", "fp{2}"})
	want := []alert.Alert{
		{
			ID: "big-spender/evt-o2", Rule: "big-spender", Description: "KRW 1,000,000 or more by one customer and card within 10m", Severity: "critical", Mode: "alert", Channel: "#fraud-risk",
			Metric: "amount", GroupBy: r.GroupBy, GroupValues: values, Group: g.Encoding(), Definition: r.Fingerprint(), Current: 1_300_000, Threshold: 1_000_000,
			Currency: "KRW", Window: 10 * time.Minute, Cooldown: time.Hour, CooldownKey: h.keys.Cooldown(g, r.Name),
			RecordKey:  h.keys.AlertRecord(g, r.Name, "evt-o2"),
			SilenceKey: h.keys.Silences(g, r.Name), RuleSilence: h.keys.RuleSilences(g, r.Name),
			OrderID: "o2", EventID: "evt-o2", At: time.Date(2024, 3, 1, 9, 4, 5, 0, time.UTC), PublishedAt: testNow,
		},
		{
			ID: "big-spender/evt-o3", Rule: "big-spender", Description: "1,000,000 minor units or more by one customer and card within 10m", Severity: "critical", Mode: "alert", Channel: "#fraud-risk",
			Metric: "amount", GroupBy: r.GroupBy, GroupValues: []string{"cust-1", "fp{2}"}, Group: g2.Encoding(), Definition: r.Fingerprint(), Current: 1_000_000,
			Threshold: 1_000_000, Window: 10 * time.Minute, Cooldown: time.Hour,
			CooldownKey: h.keys.Cooldown(g2, r.Name),
			RecordKey:   h.keys.AlertRecord(g2, r.Name, "evt-o3"),
			SilenceKey:  h.keys.Silences(g2, r.Name), RuleSilence: h.keys.RuleSilences(g2, r.Name),
			OrderID: "o3", EventID: "evt-o3", At: testNow, // no occurred_at: the engine's clock
			PublishedAt: testNow,
		},
	}
	got := h.sink.got()
	if len(got) != len(want) {
		t.Fatalf("got %d alerts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !got[i].At.Equal(want[i].At) {
			t.Errorf("alert %d At = %v, want %v", i, got[i].At, want[i].At)
		}
		got[i].At, want[i].At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("alert %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}

	// The cooldown key shares the counter's hash tag, so the dispatcher's
	// SET NX lands in the same slot, and the counter really is there.
	// (package lua's tests show that one tag means one slot.)
	counterKey := h.keys.Counter(g, r.State())
	tagC, tagD := hashTag(counterKey), hashTag(got[0].CooldownKey)
	if tagC == "" || tagC != tagD {
		t.Errorf("cooldown key %q and counter %q have tags %q and %q", got[0].CooldownKey, counterKey, tagD, tagC)
	}
	if tagR := hashTag(got[0].RecordKey); tagR != tagC {
		t.Errorf("record key %q has tag %q, want the counter's %q", got[0].RecordKey, tagR, tagC)
	}
	h.wantCounter(r.Name, alert.Amount, 1_300_000, values...)
}

func TestAlertsCarryBoundedGroupValues(t *testing.T) {
	h := newHarness(t, rule("addr", alert.Count, 1, "shipping_address"))
	long := strings.Repeat("서울시 강남구 테헤란로 ", 500) // ~16 KB, multi-byte runes
	h.handle(ev(t, event.Order, "order_id", "o1", "shipping_address", long))
	got := h.sink.got()
	if len(got) != 1 {
		t.Fatalf("alerts = %d, want 1", len(got))
	}
	v := got[0].GroupValues[0]
	if len(v) > 1024+len("…") || !utf8.ValidString(v) || !strings.HasSuffix(v, "…") || !strings.HasPrefix(long, strings.TrimSuffix(v, "…")) {
		t.Fatalf("group value of %d bytes (valid UTF-8: %v), want the start of the address cut to 1 KB", len(v), utf8.ValidString(v))
	}
	// The key is still derived from the whole value.
	if got[0].CooldownKey != h.keys.Cooldown(h.keys.Group([]string{long}), "addr") {
		t.Fatal("the cooldown key was derived from the cut value")
	}
}

// An alert is handed to another goroutine; changing it must not change the
// rules the engine evaluates.
func TestEngineAlertDoesNotShareRuleState(t *testing.T) {
	h := newHarness(t, rule("cnt", alert.Count, 1, "customer_id"))
	h.sink.mutate = func(a *alert.Alert) { a.GroupBy[0] = "email" }
	h.handle(ev(t, event.Order, "order_id", "o1"))
	h.handle(ev(t, event.Order, "order_id", "o2", "customer_id", "cust-2"))
	got := h.sink.got()
	if len(got) != 2 || !reflect.DeepEqual(got[1].GroupBy, []string{"customer_id"}) ||
		!reflect.DeepEqual(got[1].GroupValues, []string{"cust-2"}) {
		t.Fatalf("after a receiver changed an alert, the next one is %+v", got)
	}
}

// However long an event's values and a rule's texts are, an alert stays far
// below the alerts topic's message limit, even where JSON escapes every
// byte six-fold: every string field is cut on a rune boundary, marked "…".
func TestAlertsStayFarBelowTheTopicLimit(t *testing.T) {
	const huge = 200 << 10
	escapes := strings.Repeat("<", huge)            // "\u003c" in JSON
	runes := strings.Repeat("강", huge/3)            // 3 bytes a rune
	longID := strings.Repeat("e", event.MaxIDBytes) // as long as Decode lets it be
	many := func(n int, value string) (fields []string, kv []any) {
		for i := range n {
			f := fmt.Sprintf("%s_%d", strings.Repeat("f", 2000), i)
			fields = append(fields, f)
			kv = append(kv, f, value)
		}
		return fields, kv
	}
	// Not huge: every field is found by a scan of the event.
	manyFields, manyValues := many(rules.MaxGroupBy, escapes[:4096])
	tests := []struct {
		name string
		rule func(*rules.Rule)
		kv   []any
		// clipped names the fields that must be cut.
		clipped func(a alert.Alert) []string
	}{
		{
			name:    "a huge order id",
			kv:      []any{"order_id", escapes},
			clipped: func(a alert.Alert) []string { return []string{a.OrderID} },
		},
		{
			name:    "a multi-byte order id",
			kv:      []any{"order_id", runes},
			clipped: func(a alert.Alert) []string { return []string{a.OrderID} },
		},
		{
			name: "a huge description, channel and group value",
			rule: func(r *rules.Rule) {
				r.Description, r.Channel = escapes, "#"+escapes
			},
			kv:      []any{"customer_id", runes},
			clipped: func(a alert.Alert) []string { return []string{a.Description, a.Channel, a.GroupValues[0]} },
		},
		{
			name: "many long group_by fields with huge values",
			rule: func(r *rules.Rule) { r.GroupBy = manyFields },
			kv:   manyValues,
			clipped: func(a alert.Alert) []string {
				return append(slices.Clone(a.GroupBy), a.GroupValues...)
			},
		},
		{
			name: "a distinct rule's long field",
			rule: func(r *rules.Rule) {
				r.Metric, r.Field = alert.Distinct, strings.Repeat("x", huge)
			},
			kv:      []any{strings.Repeat("x", huge), "card"},
			clipped: func(a alert.Alert) []string { return []string{a.Field} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rule("long", alert.Count, 1, "customer_id")
			if tt.rule != nil {
				tt.rule(&r)
			}
			h := newHarness(t, r)
			h.handle(ev(t, event.Order, append([]any{"event_id", longID}, tt.kv...)...))
			got := h.sink.got()
			if len(got) != 1 {
				t.Fatalf("alerts = %d, want 1", len(got))
			}
			a := got[0]
			value, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			if len(value) > alert.MaxMessageBytes/4 {
				t.Errorf("alert of %d bytes, want at most a quarter of the topic's limit (%d)", len(value), alert.MaxMessageBytes/4)
			}
			for _, s := range tt.clipped(a) {
				if !strings.HasSuffix(s, "…") || !utf8.ValidString(s) {
					t.Errorf("field of %d bytes not cut on a rune boundary with …: %.40q", len(s), s)
				}
			}
			// What the dispatcher would drop as malformed, it would never post.
			if err := a.WithinBounds(); err != nil {
				t.Errorf("the dispatcher would drop it: %v", err)
			}
			if a.EventID != longID || a.ID != "long/"+longID {
				t.Errorf("event id %q, id %q: the crossing's names must stay whole", a.EventID, a.ID)
			}
		})
	}
}

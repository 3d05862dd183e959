package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
)

// The dispatcher is the alerts group's handler: it reads each message of
// the alerts topic, skips what it cannot or must not post, and delivers
// the rest.
func TestHandleMessage(t *testing.T) {
	fresh := time.UnixMilli(time.Now().UnixMilli())
	seal := func(change func(a *alert.Alert)) func(a *alert.Alert) []byte {
		return func(a *alert.Alert) []byte { change(a); return nil }
	}
	forge := func(change func(a *alert.Alert)) func(a *alert.Alert) []byte {
		return func(a *alert.Alert) []byte { b := *a; change(&b); return encode(b) }
	}
	tests := []struct {
		name string
		// value changes the alert before it is sealed and returns nil, or
		// returns the message's value, which no seal is written for.
		value     func(a *alert.Alert) []byte
		published time.Time // the alert's published_at
		wantPosts int
		dropped   string // the reason label it is dropped with, if it is
	}{
		{"a fresh alert is delivered", seal(func(*alert.Alert) {}), fresh, 1, ""},
		{"an alert within its records' lifetime is delivered", seal(func(*alert.Alert) {}), fresh.Add(-6 * 24 * time.Hour), 1, ""},
		// Its record may be gone: posting it could post it twice.
		{"an alert published before its records' lifetime is skipped", seal(func(*alert.Alert) {}), fresh.Add(-7*24*time.Hour - time.Minute), 0, dispatch.DroppedStale},
		{"an alert published ahead of every clock is dropped", seal(func(*alert.Alert) {}), fresh.Add(time.Hour), 0, dispatch.DroppedUnverified},
		{"an alert published by a clock a little ahead is delivered", seal(func(*alert.Alert) {}), fresh.Add(30 * time.Second), 1, ""},
		{"an unreadable message is skipped", func(*alert.Alert) []byte { return []byte(`{"id":`) }, fresh, 0, dispatch.DroppedUnreadable},
		// The message's keys, id, mode, cooldown and channel are not
		// trusted: the dispatcher builds them from the rule and group.
		{"a message's keys are not used", seal(func(a *alert.Alert) {
			a.CooldownKey, a.RecordKey, a.SilenceKey, a.RuleSilence, a.ID = "x", "x:y", "", "", "forged"
			a.Mode, a.Cooldown, a.Channel = alert.ModeShadow, 0, "#elsewhere"
		}), fresh, 1, ""},
		{"a group no encoding makes is dropped", forge(func(a *alert.Alert) { a.Group = "a}{b" }), fresh, 0, dispatch.DroppedMalformed},
		{"an event id too long is dropped", forge(func(a *alert.Alert) { a.EventID = strings.Repeat("e", 129) }), fresh, 0, dispatch.DroppedMalformed},
		{"group fields without values are dropped", forge(func(a *alert.Alert) { a.GroupValues = nil }), fresh, 0, dispatch.DroppedMalformed},
		{"evidence within bounds is delivered", seal(func(a *alert.Alert) {
			a.Evidence = slices.Repeat([]alert.Evidence{{OrderID: strings.Repeat("o", 128), EventID: "e", Value: strings.Repeat("v", 128)}}, 20)
		}), fresh, 1, ""},
		{"too much evidence is dropped", forge(func(a *alert.Alert) { a.Evidence = make([]alert.Evidence, 21) }), fresh, 0, dispatch.DroppedMalformed},
		{"an evidence value too long is dropped", forge(func(a *alert.Alert) {
			a.Evidence = []alert.Evidence{{OrderID: "o", EventID: "e", Value: strings.Repeat("v", 1000)}}
		}), fresh, 0, dispatch.DroppedMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, func(int) reply { return reply{} })
			env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
			env.knowRule()
			dead := &fakeDeadLetters{}
			env.d.SetDeadLetters(dead)
			a := env.alert("g1", "evt-1")
			a.PublishedAt = tt.published
			value := tt.value(&a)
			env.cross(t, a)
			if value == nil {
				value = encode(a)
			}
			// Its Kafka timestamp, which its producer chose, is now.
			msg := kafka.Message{Topic: "alerts", Partition: 1, Offset: 7, Time: time.Now(), Value: value}
			if err := handleOne(t.Context(), env.d, msg); err != nil {
				t.Fatalf("HandleMessage = %v, want nil: the message may be committed", err)
			}
			if got := f.deliveredCount(); got != tt.wantPosts {
				t.Errorf("Slack accepted %d posts, want %d", got, tt.wantPosts)
			}
			g, _ := env.keys.ParseGroup(a.Group)
			// Recorded sent for Slack, claimed by the message's place.
			rec := env.record(t, a, "slack")
			if recorded := rec.State == "sent" && rec.Claimant == "alerts/1/7"; recorded != (tt.wantPosts == 1) {
				t.Errorf("delivery record %+v, want it sent by alerts/1/7: %v", rec, tt.wantPosts == 1)
			}
			// The cooldown is the rule's (30m), whatever the message says.
			if ttl := env.rdb.TTL(t.Context(), env.keys.Cooldown(g, a.Rule)).Val(); tt.wantPosts == 1 && (ttl <= 29*time.Minute || ttl > 30*time.Minute) {
				t.Errorf("cooldown TTL %v, want the rule's 30m", ttl)
			}
			if n := env.rdb.Exists(t.Context(), "x", "x:y").Val(); n != 0 {
				t.Error("the message's own keys were written")
			}
			dropped := env.total(t, "fraudwatch_alerts_dropped_total")
			if (dropped == 1) != (tt.dropped != "") {
				t.Errorf("%v alerts dropped", dropped)
			}
			if tt.dropped != "" && env.metric(t, "fraudwatch_alerts_dropped_total", "reason", tt.dropped) != 1 {
				t.Errorf("not dropped as %s", tt.dropped)
			}
			// Every dropped message but one published too long ago is
			// dead-lettered, its reason in fraudwatch-error, never a value
			// from it.
			old := tt.published.Before(fresh.Add(-7 * 24 * time.Hour))
			if wantDead := tt.wantPosts == 0 && !old; (len(dead.whys) == 1) != wantDead || (wantDead && !strings.HasPrefix(dead.whys[0], "alert ")) {
				t.Errorf("dead letters %q, want one: %v", dead.whys, wantDead)
			}
			for _, why := range dead.whys {
				if strings.Contains(why, "a}{b") || strings.Contains(why, "eeeeeeee") {
					t.Errorf("a dead letter's reason carries a value: %q", why)
				}
			}
		})
	}
}

// A message that cannot be dead-lettered is not dropped either: it comes
// round again.
func TestHandleMessageKeepsWhatItCannotDeadLetter(t *testing.T) {
	env := testDispatcher(t, alert.NotifierFunc(func(context.Context, alert.Alert) error { return nil }), dispatch.DispatcherConfig{})
	env.knowRule()
	env.d.SetDeadLetters(&fakeDeadLetters{err: errors.New("kafka down")})
	msg := kafka.Message{Topic: "alerts", Time: time.Now(), Value: []byte(`{"id":`)}
	if err := handleOne(t.Context(), env.d, msg); err == nil {
		t.Fatal("an unreadable alert was acknowledged without its dead letter")
	}
	if got := env.total(t, "fraudwatch_alerts_dropped_total"); got != 0 {
		t.Errorf("%v counted as dropped", got)
	}
}

// An alert of a rule this replica does not know is retried for a while,
// since a rules file reloaded elsewhere may be reloaded here a moment
// later; the rule's settings then apply.
func TestHandleMessageWaitsForANewRule(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	env.knowRule()
	a := env.alert("g1", "evt-1")
	a.Rule = "new-rule"
	msg := env.message(t, a, 0)
	if err := handleOne(t.Context(), env.d, msg); err == nil {
		t.Fatal("an alert of an unknown rule was settled at once")
	}
	env.d.SetRules(map[string]dispatch.RuleSettings{"new-rule": {Mode: alert.ModeShadow}})
	if err := handleOne(t.Context(), env.d, msg); err != nil {
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 0 {
		t.Errorf("%d posts: the rule in force is a shadow rule", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_suppressed_total", "rule", "new-rule", "reason", "shadow"); got != 1 {
		t.Errorf("suppressed{shadow} = %v", got)
	}
}

// The channel is the rule's, or the configured one: never the message's,
// which anyone who can write to the alerts topic could set.
func TestMessagesChannelIsNotUsed(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{body: okJSON} })
	env := testDispatcher(t, f.token(t), dispatch.DispatcherConfig{})
	env.knowRule() // a rule without a channel of its own
	a := env.alert("g1", "evt-1")
	a.Channel = "#elsewhere"
	msg := env.message(t, a, 7)
	if err := handleOne(t.Context(), env.d, msg); err != nil {
		t.Fatal(err)
	}
	bodies := f.allBodies()
	if len(bodies) != 1 {
		t.Fatalf("%d posts, want 1", len(bodies))
	}
	form, err := url.ParseQuery(bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := form.Get("channel"); got != "#fraud-alerts" {
		t.Errorf("posted to %q, want the configured #fraud-alerts", got)
	}
}

// refusingClaims is the scripts, but alert_claim refuses every alert's
// arguments.
type refusingClaims struct{ *lua.Scripts }

func (refusingClaims) ClaimAlerts(context.Context, []lua.AlertClaim) ([]lua.Claim, error) {
	return nil, fmt.Errorf("lua: alert_claim: %w", lua.ErrInvalidArguments)
}

// An alert the claim script refuses would be refused on every retry: it is
// dropped as refused and dead-lettered, and the partition goes on. Dropped
// messages are logged with their topic, partition and offset, never their
// contents.
func TestRefusedClaimIsDropped(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	env.reg = prometheus.NewRegistry()
	var logs bytes.Buffer // written by HandleMessage, read after it returns
	d, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{KeyPrefix: env.pfx}, f.webhook(t), refusingClaims{env.scripts},
		slog.New(slog.NewJSONHandler(&logs, nil)), env.reg)
	if err != nil {
		t.Fatal(err)
	}
	env.d = d
	env.knowRule()
	dead := &fakeDeadLetters{}
	d.SetDeadLetters(dead)
	a := env.alert("g1", "evt-1")
	msg := env.message(t, a, 7)
	msg.Partition = 1
	if err := handleOne(t.Context(), d, msg); err != nil {
		t.Fatalf("HandleMessage = %v, want nil: retrying would hold the partition for ever", err)
	}
	if n := f.requests(); n != 0 {
		t.Errorf("%d posts, want none", n)
	}
	if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedRefused); got != 1 {
		t.Errorf("dropped as refused: %v, want 1", got)
	}
	if len(dead.whys) != 1 || !strings.HasPrefix(dead.whys[0], "alert refused: ") {
		t.Errorf("dead letters %q, want one saying the alert was refused", dead.whys)
	}
	// Where it was, and never what the message holds.
	line := logLine(t, logs.String(), "alert dropped")
	if line["topic"] != "alerts" || line["partition"] != 1.0 || line["offset"] != 7.0 || line["reason"] != dispatch.DroppedRefused {
		t.Errorf("the dropped alert's log line %v, want topic alerts, partition 1, offset 7, reason refused", line)
	}
	if strings.Contains(logs.String(), "g1") {
		t.Errorf("the log holds the alert's group:\n%s", logs.String())
	}
	// A message that is no alert at all is logged the same way.
	logs.Reset()
	if err := handleOne(t.Context(), d, kafka.Message{Topic: "alerts", Partition: 2, Offset: 9, Time: time.Now(), Value: []byte(`{"rule":`)}); err != nil {
		t.Fatal(err)
	}
	line = logLine(t, logs.String(), "alert dropped")
	if line["topic"] != "alerts" || line["partition"] != 2.0 || line["offset"] != 9.0 || line["reason"] != dispatch.DroppedUnreadable {
		t.Errorf("the unreadable message's log line %v, want topic alerts, partition 2, offset 9, reason unreadable", line)
	}
}

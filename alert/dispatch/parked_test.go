package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
)

// refusingSlack refuses the channel "#gone" while gone is set; otherwise it
// records each message (an alert, or a digest) it is given.
type refusingSlack struct {
	*slackLog
	mu   sync.Mutex
	gone bool
}

func (r *refusingSlack) refused(ch string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone && ch == "#gone" {
		return &alert.ChannelError{Channel: ch, Err: errors.New("slack: channel_not_found")}
	}
	return nil
}

func (r *refusingSlack) Notify(ctx context.Context, a alert.Alert) error {
	if err := r.refused(a.Channel); err != nil {
		return err
	}
	return r.slackLog.Notify(ctx, a)
}

func (r *refusingSlack) NotifyDigest(ctx context.Context, d alert.Digest) error {
	if err := r.refused(d.Channel); err != nil {
		return err
	}
	return r.slackLog.NotifyDigest(ctx, d)
}

func (r *refusingSlack) setGone(gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone = gone
}

// parkMany parks n alerts of rule, each in a group of its own, through
// HandleMessages, the channel refused.
func parkMany(t *testing.T, env *testEnv, rule string, n int) []alert.Alert {
	t.Helper()
	var msgs []kafka.Message
	var alerts []alert.Alert
	for i := range n {
		a := env.alert(fmt.Sprintf("%s-g%d", rule, i), fmt.Sprintf("%s-e%d", rule, i))
		a.Rule, a.ID = rule, rule+"/"+a.EventID
		alerts = append(alerts, a)
		msgs = append(msgs, env.message(t, a, int64(i)))
	}
	if done, err := env.d.HandleMessages(t.Context(), msgs); err != nil || done != n {
		t.Fatalf("HandleMessages = %d, %v; want all %d parked and acknowledged", done, err, n)
	}
	if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got < int64(n) {
		t.Fatalf("%d alerts parked, want at least %d", got, n)
	}
	return alerts
}

// Parked alerts whose channel is back go out as one message a rule, each
// taking from the alert budget: 200 of them are one digest, not 200 posts,
// and a rule whose turn finds the budget spent waits for the next pass.
func TestParkedRetriesKeepToTheBudget(t *testing.T) {
	slack := &refusingSlack{slackLog: newSlackLog(), gone: true}
	rules := map[string]dispatch.RuleSettings{
		"r-a": {Mode: alert.ModeAlert, Channel: "#gone"},
		"r-b": {Mode: alert.ModeAlert, Channel: "#gone"},
	}
	// One replica parks them, with a budget that refuses nothing...
	parker := testDispatcher(t, slack, dispatch.DispatcherConfig{
		ChannelBudget: lua.Budget{Rate: 1000, Burst: 1000},
		OverallBudget: lua.Budget{Rate: 1000, Burst: 1000},
	})
	parker.d.SetRules(rules)
	a := parkMany(t, parker, "r-a", 200)
	b := parkMany(t, parker, "r-b", 3)
	// ... another retries them with one message, then none for a long
	// while: time enough for the test, never a refill within it.
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{
		KeyPrefix:     parker.pfx,
		ChannelBudget: lua.Budget{Rate: 0.001, Burst: 1},
		OverallBudget: lua.Budget{Rate: 100, Burst: 100},
	})
	env.d.SetRules(rules)
	slack.setGone(false)
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	at, carried := slack.snapshot()
	if len(at) != 1 {
		t.Fatalf("%d messages, want one: the budget allows one", len(at))
	}
	for _, x := range a {
		if carried[x.ID] != 1 {
			t.Fatalf("%s carried %d times, want once, in r-a's digest", x.ID, carried[x.ID])
		}
	}
	if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != int64(len(b)) {
		t.Errorf("%d alerts still parked, want r-b's %d, waiting for the budget", got, len(b))
	}
	if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#gone"); got != float64(len(b)) {
		t.Errorf("parked{#gone} = %v, want %d", got, len(b))
	}
	if got := env.metric(t, "fraudwatch_alerts_digested_total", "rule", "r-a"); got != 200 {
		t.Errorf("digested{r-a} = %v, want 200", got)
	}
}

// The parked alerts are bounded: past MaxParked, an alert whose channel is
// refused is not parked but stays on its partition, as in a Slack outage,
// and nothing of it is lost.
func TestParkedAlertsAreCapped(t *testing.T) {
	slack := &refusingSlack{slackLog: newSlackLog(), gone: true}
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{MaxParked: 2,
		ChannelBudget: lua.Budget{Rate: 1000, Burst: 1000}, OverallBudget: lua.Budget{Rate: 1000, Burst: 1000}})
	env.d.SetRules(map[string]dispatch.RuleSettings{"r-a": {Mode: alert.ModeAlert, Channel: "#gone"}})
	parkMany(t, env, "r-a", 2)
	third := env.alert("g-third", "e-third")
	third.Rule = "r-a"
	msgs := []kafka.Message{env.message(t, third, 2)}
	done, err := env.d.HandleMessages(t.Context(), msgs)
	if done != 0 || !errors.Is(err, dispatch.ErrNotDelivered) {
		t.Fatalf("HandleMessages = %d, %v; want 0 and ErrNotDelivered: the third stays on its partition", done, err)
	}
	if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != 2 {
		t.Errorf("%d parked, want the cap of 2", got)
	}
	// The channel back, the parked ones go out, and the third with its
	// next delivery.
	slack.setGone(false)
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if done, err := env.d.HandleMessages(t.Context(), msgs); done != 1 || err != nil {
		t.Fatalf("HandleMessages = %d, %v once the channel is back", done, err)
	}
	if _, carried := slack.snapshot(); len(carried) != 3 {
		t.Errorf("%d alerts posted, want 3", len(carried))
	}
}

// A parked alert lives no longer than its delivery record: past that,
// posting it might post it twice, and it is dropped as stale.
func TestParkedAlertsExpire(t *testing.T) {
	slack := &refusingSlack{slackLog: newSlackLog()}
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{"r-a": {Mode: alert.ModeAlert, Channel: "#gone"}})
	old, recent := env.alert("g-old", "e-old"), env.alert("g-new", "e-new")
	for _, p := range []struct {
		a  alert.Alert
		at time.Time
	}{{old, time.Now().Add(-7*24*time.Hour - time.Hour)}, {recent, time.Now().Add(-time.Hour)}} {
		p.a.Rule, p.a.ID, p.a.Channel = "r-a", "r-a/"+p.a.EventID, "#gone"
		data, err := json.Marshal(struct {
			alert.Alert
			ParkedAt time.Time `json:"parked_at"`
		}{p.a, p.at})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.scripts.Park(t.Context(), env.keys.Parked(), p.a.ID, data, 10, time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := env.scripts.ClaimAlert(t.Context(), p.a.CooldownKey, p.a.RecordKey, p.a.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, carried := slack.snapshot()
	if len(carried) != 1 || carried["r-a/e-new"] != 1 {
		t.Errorf("posted %v, want only the alert parked an hour ago", carried)
	}
	if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != 0 {
		t.Errorf("%d still parked, want none", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedStale); got != 1 {
		t.Errorf("dropped{stale} = %v, want 1", got)
	}
}

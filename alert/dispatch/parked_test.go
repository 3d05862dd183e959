package dispatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
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

func (r *refusingSlack) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	if err := r.refused(a.Channel); err != nil {
		return alert.Receipt{}, err
	}
	return r.slackLog.Notify(ctx, a)
}

func (r *refusingSlack) NotifyDigest(ctx context.Context, d alert.Digest) (alert.Receipt, error) {
	if err := r.refused(d.Channel); err != nil {
		return alert.Receipt{}, err
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
		if c := env.claim(t, p.a, "slack", lua.ParkedClaimant); c != lua.ClaimSend {
			t.Fatalf("claim = %v", c)
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

// channelNotifier refuses the channel "#gone" while gone is set, and
// records what it posts.
type channelNotifier struct {
	mu    sync.Mutex
	gone  bool
	posts []string
	// second, when set, is closed by a second post to "#gone": the first
	// waits for it a while, so that two replicas posting one parked alert
	// at once would both post.
	second chan struct{}
	calls  int
}

func (n *channelNotifier) Name() string { return "slack" }

func (n *channelNotifier) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	n.mu.Lock()
	if n.gone && a.Channel == "#gone" {
		n.mu.Unlock()
		return alert.Receipt{}, &alert.ChannelError{Channel: a.Channel, Err: errors.New("slack: channel_not_found")}
	}
	if n.second != nil && a.Channel == "#gone" {
		n.calls++
		if n.calls == 2 {
			close(n.second)
		} else {
			n.mu.Unlock()
			select {
			case <-n.second:
			case <-time.After(300 * time.Millisecond):
			}
			n.mu.Lock()
		}
	}
	defer n.mu.Unlock()
	n.posts = append(n.posts, a.Rule+" "+a.EventID)
	return alert.Receipt{}, nil
}

func (n *channelNotifier) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.posts...)
}

// A rule whose channel Slack refuses parks its own alerts; the alerts of
// other rules behind it on the same partition go on. Retried once the
// channel is back, a parked alert is posted once, whichever replica
// retries it.
func TestChannelRefusalParksOnlyItsAlerts(t *testing.T) {
	n := &channelNotifier{gone: true}
	var logs bytes.Buffer // read while no retry runs
	env := testDispatcherLogging(t, n, dispatch.DispatcherConfig{}, slog.New(slog.NewJSONHandler(&logs, nil)))
	env.d.SetRules(map[string]dispatch.RuleSettings{
		"r-gone": {Mode: alert.ModeAlert, Channel: "#gone"},
		"r-ok":   {Mode: alert.ModeAlert, Channel: "#ok"},
	})
	gone, ok := env.alert("g1", "e1"), env.alert("g2", "e2")
	gone.Rule, ok.Rule = "r-gone", "r-ok"
	msgs := []kafka.Message{env.message(t, gone, 0), env.message(t, ok, 1)}
	done, err := env.d.HandleMessages(t.Context(), msgs)
	if err != nil || done != 2 {
		t.Fatalf("HandleMessages = %d, %v; want both acknowledged", done, err)
	}
	if got := n.snapshot(); len(got) != 1 || got[0] != "r-ok e2" {
		t.Fatalf("posts %v, want the other channel's alert", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#gone"); got != 1 {
		t.Errorf("parked{#gone} = %v, want 1", got)
	}
	if line := logLine(t, logs.String(), "alert parked: slack refuses its channel; other channels' alerts go on, and it is retried"); line["channel"] != "#gone" {
		t.Errorf("the parked alert's log line %v, want it to name #gone", line)
	}
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := n.snapshot(); len(got) != 1 {
		t.Fatalf("posts %v while the channel is still refused", got)
	}

	// The channel is back; two replicas retry at once.
	n.mu.Lock()
	n.gone, n.second = false, make(chan struct{})
	n.mu.Unlock()
	other := testDispatcher(t, n, dispatch.DispatcherConfig{KeyPrefix: env.pfx})
	var wg sync.WaitGroup
	for _, d := range []*dispatch.Dispatcher{env.d, other.d} {
		wg.Go(func() {
			if err := d.RetryParked(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := n.snapshot(); len(got) != 2 || got[1] != "r-gone e1" {
		t.Fatalf("posts %v, want the parked alert once", got)
	}
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#gone"); got != 0 {
		t.Errorf("parked{#gone} = %v after delivery", got)
	}
	if left := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); left != 0 {
		t.Errorf("%d alerts still parked", left)
	}
}

// RetryParkedEvery tries the parked alerts every ParkedRetry: once the
// channel is back, the parked alert is posted without anyone asking, once.
func TestParkedAlertsAreRetriedEveryParkedRetry(t *testing.T) {
	n := &channelNotifier{gone: true}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{ParkedRetry: 20 * time.Millisecond})
	gone := dispatch.RuleSettings{Mode: alert.ModeAlert, Channel: "#gone"}
	env.d.SetRules(map[string]dispatch.RuleSettings{"r-gone": gone, "r-later": gone})
	park := func(rule, event string, offset int64) {
		t.Helper()
		a := env.alert("g1", event)
		a.Rule = rule
		if done, err := env.d.HandleMessages(t.Context(), []kafka.Message{env.message(t, a, offset)}); err != nil || done != 1 {
			t.Fatalf("HandleMessages = %d, %v", done, err)
		}
	}
	setGone := func(v bool) {
		n.mu.Lock()
		n.gone = v
		n.mu.Unlock()
	}
	park("r-gone", "e1", 0)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { env.d.RetryParkedEvery(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	setGone(false)
	testkit.WaitFor(t, 10*time.Second, "the parked alert posted", func() bool { return len(n.snapshot()) > 0 })
	// Posted, it is not tried again. A second alert parked now is posted by
	// a later pass, which tries r-gone's alerts first (passes go by rule):
	// a retry of e1 would be posted before it.
	setGone(true)
	park("r-later", "e2", 1)
	setGone(false)
	testkit.WaitFor(t, 10*time.Second, "the second parked alert posted", func() bool { return len(n.snapshot()) > 1 })
	if got := n.snapshot(); !slices.Equal(got, []string{"r-gone e1", "r-later e2"}) {
		t.Fatalf("posts %v, want each parked alert once", got)
	}
	testkit.WaitFor(t, 10*time.Second, "the posted alerts unparked", func() bool {
		return env.rdb.HLen(t.Context(), env.keys.Parked()).Val() == 0
	})
}

// An alert of a rule without a channel of its own goes to slack.channel;
// parked, it counts under "(default)" from the start, as RetryParked and
// the zero series count it, whatever channel Slack's refusal names.
func TestParkedDefaultChannel(t *testing.T) {
	refuse := alert.NotifierFunc(func(context.Context, alert.Alert) error {
		return &alert.ChannelError{Channel: "#fraud", Err: errors.New("slack: not_in_channel")}
	})
	env := testDispatcher(t, refuse, dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert}})
	a := env.alert("g1", "e1")
	a.Rule = "r"
	if done, err := env.d.HandleMessages(t.Context(), []kafka.Message{env.message(t, a, 0)}); err != nil || done != 1 {
		t.Fatalf("HandleMessages = %d, %v; want it parked and acknowledged", done, err)
	}
	for _, when := range []string{"parked", "retried"} {
		if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "(default)"); got != 1 {
			t.Errorf("%s: parked{(default)} = %v, want 1", when, got)
		}
		if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#fraud"); got != 0 {
			t.Errorf("%s: parked{#fraud} = %v, want no such series", when, got)
		}
		if err := env.d.RetryParked(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

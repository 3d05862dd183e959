package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
)

// A flood of one destination holds no other's alerts (docs/alerts.md,
// Floods): five rules on #fraud (spelt as rules spell it: none, "#fraud",
// "fraud", "#Fraud") cross 150 times a second, over four partitions of the
// alerts topic, with the default budget; meanwhile a critical rule on
// #risk crosses once a second on the same partitions. Each #risk alert is
// posted within 2 s of its order; every alert is carried by exactly one
// message; fraudwatch_alerts_waiting shows the flood while it lasts, and
// nothing once it is sent. The run lasted a minute; this one lasts
// 20 s at the same rate, past the time each rule takes to have its turn at
// #fraud's budget.
func TestAFloodOfOneDestinationHoldsNoOther(t *testing.T) {
	const (
		rate       = 150 // crossings a second on #fraud
		duration   = 20 * time.Second
		partitions = 4
		within     = 2 * time.Second
	)
	slack := newChannelSlack("#fraud")
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{
		ChannelBudget: lua.Budget{Rate: 1, Burst: 3}, OverallBudget: lua.Budget{Rate: 5, Burst: 15}})
	flood := []string{"f-none", "f-hash", "f-bare", "f-upper", "f-again"}
	rules := map[string]dispatch.RuleSettings{"r-risk": {Mode: alert.ModeAlert, Channel: "#risk", Severity: alert.SeverityCritical}}
	for i, ch := range []string{"", "#fraud", "fraud", "#Fraud", "#fraud"} {
		rules[flood[i]] = dispatch.RuleSettings{Mode: alert.ModeAlert, Channel: ch}
	}
	env.d.SetRules(rules)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { env.d.DrainWaitingEvery(ctx) })
	loops := make([]*partitionLoop, partitions)
	for i := range loops {
		loops[i] = &partitionLoop{notify: make(chan struct{}, 1)}
		wg.Go(func() { loops[i].run(ctx, t, env.d) })
	}
	waiting := func() float64 {
		return env.metric(t, "fraudwatch_alerts_waiting", "receiver", "slack", "channel", "#fraud")
	}
	var most float64 // the most the gauge showed during the flood
	wg.Go(func() {
		for ctx.Err() == nil {
			most = max(most, waiting())
			time.Sleep(50 * time.Millisecond)
		}
	})

	ordered := map[string]time.Time{} // #risk alerts: when each was ordered
	var ids []string
	tick := time.NewTicker(time.Second / rate)
	start := time.Now()
	for i := 0; time.Since(start) < duration; i++ {
		<-tick.C
		a := env.alert(fmt.Sprintf("g-%d", i), fmt.Sprintf("e-%d", i))
		a.Rule = flood[i%len(flood)]
		if i%rate == rate/2 {
			a.Rule = "r-risk"
			ordered[a.Rule+"/"+a.EventID] = time.Now()
		}
		a.ID = a.Rule + "/" + a.EventID
		ids = append(ids, a.ID)
		loops[i%partitions].add(env.message(t, a, int64(i/partitions)))
	}
	tick.Stop()
	testkit.WaitFor(t, time.Minute, "every alert posted", func() bool { return len(slack.carried()) == len(ids) })
	testkit.WaitFor(t, 10*time.Second, "nothing waiting", func() bool { return waiting() == 0 })
	cancel()
	wg.Wait()

	carried := slack.carried()
	for _, id := range ids {
		if carried[id] != 1 {
			t.Errorf("alert %s carried by %d messages, want 1", id, carried[id])
		}
	}
	var slowest time.Duration
	var fraud []time.Time
	for _, p := range slack.snapshot() {
		if p.rule != "r-risk" {
			if p.channel != "" && p.channel != "#fraud" && p.channel != "fraud" && p.channel != "#Fraud" {
				t.Errorf("a message of %s to %q", p.rule, p.channel)
			}
			fraud = append(fraud, p.at)
			continue
		}
		if p.channel != "#risk" || len(p.ids) != 1 {
			t.Errorf("a message of r-risk to %q carrying %d alerts, want each alone to #risk", p.channel, len(p.ids))
			continue
		}
		late := p.at.Sub(ordered[p.ids[0]])
		slowest = max(slowest, late)
		if late > within {
			t.Errorf("%s posted %v after its order, past %v", p.ids[0], late.Round(time.Millisecond), within)
		}
	}
	// #fraud's one budget, however its rules spell it: in any stretch, at
	// most its burst and what its rate refilled, and one more message for
	// each loop that takes from the budget and then posts (the partitions,
	// and the drain).
	for i := range fraud {
		for j := i; j < len(fraud); j++ {
			if n, allowed := j-i+1, 3+fraud[j].Sub(fraud[i]).Seconds()+partitions+1; float64(n) > allowed {
				t.Fatalf("%d messages to #fraud within %v, past its budget's %.1f", n, fraud[j].Sub(fraud[i]), allowed)
			}
		}
	}
	if most < rate {
		t.Errorf("fraudwatch_alerts_waiting{channel=#fraud} showed at most %v during the flood, want it to show the flood (a second of it at least)", most)
	}
	t.Logf("%d alerts: %d #risk ones, the slowest posted %v after its order; %d messages to #fraud; at most %v waiting",
		len(ids), len(ordered), slowest.Round(time.Millisecond), len(fraud), most)
}

// floodEnv is a dispatcher whose budget allows one message and then none
// for a long while (a refill an hour), with rule r on #fraud, and alerts
// to give it.
type floodEnv struct {
	*testEnv
	slack *channelSlack
}

func newFloodEnv(t *testing.T, cfg dispatch.DispatcherConfig, logs *testkit.Buffer) *floodEnv {
	t.Helper()
	slack := newChannelSlack("#fraud")
	if cfg.ChannelBudget == (lua.Budget{}) {
		cfg.ChannelBudget = lua.Budget{Rate: 1.0 / 3600, Burst: 1}
		cfg.OverallBudget = lua.Budget{Rate: 100, Burst: 100}
	}
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewJSONHandler(logs, nil))
	}
	env := testDispatcherLogging(t, slack, cfg, log)
	env.d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert, Channel: "#fraud", Description: "a flood"}})
	return &floodEnv{testEnv: env, slack: slack}
}

// alerts are n alerts of r, each of a group of its own, with evidence.
func (f *floodEnv) alerts(from, n int) []alert.Alert {
	var out []alert.Alert
	for i := from; i < from+n; i++ {
		a := f.alert(fmt.Sprintf("g-%d", i), fmt.Sprintf("e-%d", i))
		a.Rule, a.ID = "r", "r/"+a.EventID
		a.Evidence = []alert.Evidence{{OrderID: fmt.Sprintf("ord-%d", i), EventID: a.EventID, Amount: 10}}
		out = append(out, a)
	}
	return out
}

func (f *floodEnv) handle(t *testing.T, alerts ...alert.Alert) (int, error) {
	t.Helper()
	var msgs []kafka.Message
	for i, a := range alerts {
		msgs = append(msgs, f.message(t, a, int64(i)))
	}
	return f.d.HandleMessages(t.Context(), msgs)
}

// Past the budget, alerts wait in Redis and their messages are done; a
// drain sends a rule's as one digest, listing them in the order they came
// (the first whole, the others without their evidence, which a digest does
// not show), or a rule's only one as itself, evidence and all. A copy of a
// waiting alert does not wait twice.
func TestWaitingAlertsGoOutAsOneMessageARule(t *testing.T) {
	f := newFloodEnv(t, dispatch.DispatcherConfig{}, nil)
	alerts := f.alerts(0, 4)
	// The first takes the budget's one message; the rest wait, one twice.
	if n, err := f.handle(t, append(alerts, alerts[2])...); n != 5 || err != nil {
		t.Fatalf("HandleMessages = %d, %v; want all 5 done", n, err)
	}
	if got := len(f.slack.snapshot()); got != 1 {
		t.Fatalf("%d messages before a drain, want the first alert's", got)
	}
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.metric(t, "fraudwatch_alerts_waiting", "receiver", "slack", "channel", "#fraud"); got != 3 {
		t.Errorf("fraudwatch_alerts_waiting = %v, want the 3 waiting", got)
	}
	if got := len(f.slack.snapshot()); got != 1 {
		t.Fatalf("%d messages with the budget spent, want still 1", got)
	}
	// The budget refilled: one digest of the three, in order.
	f.rdb.Del(t.Context(), budgetKey(f.testEnv, "#fraud"))
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.snapshot()
	if len(posts) != 2 || !slices.Equal(posts[1].ids, []string{"r/e-1", "r/e-2", "r/e-3"}) {
		t.Fatalf("messages %v, want the first alert, then one digest of e-1, e-2 and e-3 in order", posts)
	}
	if ev := posts[1].alerts; len(ev[0].Evidence) != 1 || len(ev[1].Evidence) != 0 || ev[0].Description == "" {
		t.Errorf("the digest's first alert kept whole, the others compact: %+v", ev)
	}
	if got := f.metric(t, "fraudwatch_alerts_digested_total", "rule", "r"); got != 3 {
		t.Errorf("digested_total = %v, want 3", got)
	}
	// A rule's one alert waiting goes as itself, with its evidence.
	f.rdb.Del(t.Context(), budgetKey(f.testEnv, "#fraud"))
	one := f.alerts(10, 1)
	if n, err := f.handle(t, one...); n != 1 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n, err)
	}
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	posts = f.slack.snapshot()
	if last := posts[len(posts)-1]; len(posts) != 3 || len(last.alerts) != 1 || len(last.alerts[0].Evidence) != 1 {
		t.Errorf("messages %v, want the one alert that waited posted with its evidence", posts)
	}
	if got := f.slack.carried(); len(got) != 5 {
		t.Errorf("carried %v, want 5 alerts, each once", got)
	}
}

// budgetKey is the key of dest's budget.
func budgetKey(e *testEnv, dest string) string {
	k, _ := e.keys.Budget(dest)
	return k
}

// The waiting alerts are bounded: past MaxWaiting, an alert past its budget
// is not kept but stays on its partition, with an ERROR, and nothing is
// lost: once the waiting ones are sent, it waits in its turn.
func TestWaitingAlertsAreCapped(t *testing.T) {
	var logs testkit.Buffer
	f := newFloodEnv(t, dispatch.DispatcherConfig{MaxWaiting: 2}, &logs)
	alerts := f.alerts(0, 4)
	n, err := f.handle(t, alerts...)
	if n != 3 || !errors.Is(err, dispatch.ErrNotDelivered) {
		t.Fatalf("HandleMessages = %d, %v; want 3 done (one sent, two waiting) and ErrNotDelivered", n, err)
	}
	line := logLine(t, logs.String(), "alert past its budget not kept: as many alerts as max waiting wait already; it stays on its partition")
	if line["level"] != "ERROR" || line["alert_id"] != "r/e-3" || line["channel"] != "#fraud" {
		t.Errorf("log line %v", line)
	}
	f.rdb.Del(t.Context(), budgetKey(f.testEnv, "#fraud"))
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The partition comes round to the same messages (at the same offsets,
	// so the fourth's claim is its own again).
	if n, err := f.handle(t, alerts...); n != 4 || err != nil {
		t.Fatalf("again: HandleMessages = %d, %v; want the first three settled and the fourth waiting", n, err)
	}
	f.rdb.Del(t.Context(), budgetKey(f.testEnv, "#fraud"))
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.slack.carried(); len(got) != 4 {
		t.Errorf("carried %v, want all 4, each once", got)
	}
}

// Two replicas draining at once send each waiting alert once: one rule's
// waiting alerts are sent by one replica at a time (a lease), and a
// replica that died with alerts sealed leaves them to the next drain.
func TestWaitingAlertsAreSentOnceByOneReplica(t *testing.T) {
	f := newFloodEnv(t, dispatch.DispatcherConfig{ChannelBudget: lua.Budget{Rate: 1000, Burst: 1000},
		OverallBudget: lua.Budget{Rate: 1000, Burst: 1000}}, nil)
	alerts := f.alerts(0, 50)
	for _, a := range alerts {
		f.cross(t, a)
	}
	// As a replica that died while it sent them: claimed, kept (the claim
	// handed to the kept alerts), taken to send.
	for _, a := range alerts {
		g, err := f.keys.ParseGroup(a.Group)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.scripts.ClaimAlert(t.Context(), lua.AlertClaim{CooldownKey: a.CooldownKey,
			RecordKey: f.keys.Record(g, a.Rule, a.EventID, "slack"), LegacyKey: f.keys.AlertRecord(g, a.Rule, a.EventID),
			AlertKey: f.keys.Alert(g, a.Rule, a.EventID), ID: a.ID, Claimant: lua.ParkedClaimant, Cooldown: a.Cooldown}); err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(map[string]any{"id": a.ID, "rule": a.Rule, "group": a.Group, "event_id": a.EventID,
			"group_by": a.GroupBy, "group_values": a.GroupValues, "metric": a.Metric, "parked_at": time.Now(), "whole": true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.scripts.Wait(t.Context(), f.keys.Waiting("r"), "r", a.ID, data, data, "#fraud", 100, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := f.scripts.TakeWaiting(t.Context(), f.keys.Waiting("r"), "r"); n != 50 || err != nil {
		t.Fatalf("seal = %d, %v", n, err)
	}
	other := testDispatcher(t, f.slack, dispatch.DispatcherConfig{KeyPrefix: f.pfx})
	other.d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert, Channel: "#fraud"}})
	var wg sync.WaitGroup
	for range 3 {
		for _, d := range []*dispatch.Dispatcher{f.d, other.d} {
			wg.Go(func() {
				if err := d.DrainWaiting(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	testkit.WaitFor(t, 10*time.Second, "every alert sent", func() bool {
		if err := f.d.DrainWaiting(t.Context()); err != nil {
			t.Fatal(err)
		}
		return len(f.slack.carried()) == len(alerts)
	})
	for id, n := range f.slack.carried() {
		if n != 1 {
			t.Errorf("%s carried by %d messages, want 1", id, n)
		}
	}
	if n := f.rdb.Exists(t.Context(), f.keys.Waiting("r").New, f.keys.Waiting("r").Sealed).Val(); n != 0 {
		t.Errorf("%d of the waiting hashes left", n)
	}
}

// A waiting alert is claimed again before it is sent, and goes where its
// rule in force sends it then: a silence that began meanwhile silences it,
// and a channel fixed meanwhile is the one its digest goes to.
func TestWaitingAlertsFollowTheirRule(t *testing.T) {
	f := newFloodEnv(t, dispatch.DispatcherConfig{}, nil)
	f.d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert, Channel: "#nope"}})
	alerts := f.alerts(0, 4)
	if n, err := f.handle(t, alerts...); n != 4 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n, err)
	}
	f.silence(t, alerts[3])
	f.d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert, Channel: "#fraud"}})
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.snapshot()
	if len(posts) != 2 || posts[1].channel != "#fraud" || !slices.Equal(posts[1].ids, []string{"r/e-1", "r/e-2"}) {
		t.Fatalf("messages %v; want the first alert, then e-1 and e-2 to #fraud, e-3 silenced", posts)
	}
	if got := f.metric(t, "fraudwatch_alerts_suppressed_total", "rule", "r", "reason", "silenced"); got != 1 {
		t.Errorf("suppressed{silenced} = %v, want 1", got)
	}
}

// countingClaims is the scripts, counting the claims asked.
type countingClaims struct {
	*lua.Scripts
	mu     sync.Mutex
	claims int
}

func (c *countingClaims) ClaimAlerts(ctx context.Context, claims []lua.AlertClaim) ([]lua.Claim, error) {
	c.mu.Lock()
	c.claims += len(claims)
	c.mu.Unlock()
	return c.Scripts.ClaimAlerts(ctx, claims)
}

// A rule whose waiting alerts find the budget spent costs a drain pass no
// claim: the budget is taken before they are read, however many wait.
func TestWaitingForTheBudgetClaimsNothing(t *testing.T) {
	f := newFloodEnv(t, dispatch.DispatcherConfig{}, nil)
	cc := &countingClaims{Scripts: f.scripts}
	d, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{KeyPrefix: f.pfx,
		ChannelBudget: lua.Budget{Rate: 1.0 / 3600, Burst: 1}, OverallBudget: lua.Budget{Rate: 100, Burst: 100}},
		f.slack, cc, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert, Channel: "#fraud"}})
	f.d = d
	if n, err := f.handle(t, f.alerts(0, 20)...); n != 20 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n, err)
	}
	before := cc.claims
	for range 3 {
		if err := f.d.DrainWaiting(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if cc.claims != before {
		t.Errorf("%d claims by three drain passes with the budget spent, want none", cc.claims-before)
	}
	f.rdb.Del(t.Context(), budgetKey(f.testEnv, "#fraud"))
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(f.slack.carried()); got != 20 {
		t.Errorf("%d alerts carried once the budget allowed, want 20", got)
	}
}

// A digest's alerts but its first are kept without their evidence: should
// one of them be left alone to send (the others settled meanwhile), it goes
// as a digest of one, never as an alert without the orders behind it.
func TestALoneCompactAlertGoesAsADigest(t *testing.T) {
	f := newFloodEnv(t, dispatch.DispatcherConfig{}, nil)
	alerts := f.alerts(0, 4)
	if n, err := f.handle(t, alerts...); n != 4 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", n, err)
	}
	f.silence(t, alerts[1]) // the whole one
	f.silence(t, alerts[2])
	f.rdb.Del(t.Context(), budgetKey(f.testEnv, "#fraud"))
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.snapshot()
	if len(posts) != 2 || !slices.Equal(posts[1].ids, []string{"r/e-3"}) || !posts[1].digest {
		t.Fatalf("messages %+v; want e-3 alone, as a digest", posts)
	}
	if d := posts[1].alerts[0].Description; d != "a flood" {
		t.Errorf("the digest's alert described %q, want its rule's description, rendered again", d)
	}
}

package dispatch_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/slack"
	"github.com/fraudwatch/fraudwatch/lua"
)

// renamed is a digestNotifier under another receiver's name.
type renamed struct {
	*digestNotifier
	name string
}

func (r renamed) Name() string { return r.name }

// Each receiver has its own budgets and its own waiting alerts (docs/alerts.md,
// Floods): a channel's budget spent by one receiver holds none of another's
// alerts to the same channel name, and one receiver's drainer never sends
// another's waiting alerts.
func TestEachReceiverHasItsOwnBudgetAndWaiting(t *testing.T) {
	spentAfterOne := dispatch.DispatcherConfig{
		ChannelBudget: lua.Budget{Rate: 1.0 / 3600, Burst: 1}, OverallBudget: lua.Budget{Rate: 1.0 / 3600, Burst: 1}}
	slackN := &digestNotifier{}
	first := testDispatcher(t, slackN, spentAfterOne)
	first.knowRule()
	hookN := renamed{&digestNotifier{}, "case-hook"}
	cfg := spentAfterOne
	cfg.KeyPrefix = first.pfx // the same Redis state
	second := testDispatcher(t, hookN, cfg)
	second.knowRule()

	a1, a2 := first.alert("g1", "evt-1"), first.alert("g2", "evt-2")
	if n, err := first.d.HandleMessages(t.Context(), []kafka.Message{first.message(t, a1, 1), first.message(t, a2, 2)}); n != 2 || err != nil {
		t.Fatalf("slack: HandleMessages = %d, %v", n, err)
	}
	if slackN.singles != 1 {
		t.Fatalf("slack posted %d alerts, want the first (the second waits for the budget)", slackN.singles)
	}
	a3 := second.alert("g3", "evt-3")
	if err := handleOne(t.Context(), second.d, second.message(t, a3, 1)); err != nil {
		t.Fatal(err)
	}
	if hookN.singles != 1 {
		t.Errorf("case-hook posted %d alerts, want its first at once: slack's spent budget is not its own", hookN.singles)
	}
	if err := second.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	if hookN.singles != 1 || hookN.digests != 0 {
		t.Errorf("case-hook's drain sent %d alerts and %d digests, want none: what waits is slack's", hookN.singles-1, hookN.digests)
	}
	// Slack's own drain finds its alert, still past slack's budget.
	if err := first.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := first.metric(t, "fraudwatch_alerts_waiting", "receiver", "slack", "channel", "(default)"); got != 1 || slackN.singles+slackN.digests != 1 {
		t.Errorf("slack's waiting gauge %v after %d posts, want its one alert waiting after one post", got, slackN.singles+slackN.digests)
	}
}

// The Slack receiver's stores keep the names they had before receivers,
// so that replicas of both versions share budgets and parked alerts; any
// other receiver's are its own. Counters, cooldowns and records are the
// same keys for every receiver.
func TestSlackStoresKeepTheirNames(t *testing.T) {
	if slack.ReceiverName != lua.ReceiverSlack {
		t.Fatalf("slack.ReceiverName %q, lua.ReceiverSlack %q: one receiver, two names", slack.ReceiverName, lua.ReceiverSlack)
	}
	keys, err := lua.NewKeys("fw")
	if err != nil {
		t.Fatal(err)
	}
	s, other := keys.ForReceiver(slack.ReceiverName), keys.ForReceiver("pager")
	g := keys.Group([]string{"cust-1"})
	ch, all := keys.Budget("#fraud")
	sch, sall := s.Budget("#fraud")
	och, oall := other.Budget("#fraud")
	if sch != ch || sall != all || s.Parked() != keys.Parked() || s.WaitingIndex() != keys.WaitingIndex() {
		t.Errorf("slack's stores moved: %s %s %s %s", sch, sall, s.Parked(), s.WaitingIndex())
	}
	if och == ch || oall == all || other.Parked() == keys.Parked() || other.WaitingIndex() == keys.WaitingIndex() ||
		other.Waiting("r").New == keys.Waiting("r").New || other.WaitingLease("r") == keys.WaitingLease("r") ||
		other.ParkedLease("r/e") == keys.ParkedLease("r/e") {
		t.Errorf("pager's stores are slack's")
	}
	if other.Cooldown(g, "r") != keys.Cooldown(g, "r") || other.Record(g, "r", "e", "pager") != keys.Record(g, "r", "e", "pager") {
		t.Errorf("a receiver's keys moved a cooldown or record")
	}
}

// A process runs one dispatcher per receiver on one registry: each exports
// its series under its receiver's name (docs/operations.md), none refuses
// to start because another registered first.
func TestDispatchersOfSeveralReceiversShareOneRegistry(t *testing.T) {
	env := testDispatcher(t, &digestNotifier{}, dispatch.DispatcherConfig{})
	reg := prometheus.NewRegistry()
	for _, n := range []alert.Notifier{&digestNotifier{}, renamed{&digestNotifier{}, "case-hook"}} {
		d, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{KeyPrefix: env.pfx}, n, env.scripts, nil, reg)
		if err != nil {
			t.Fatalf("the dispatcher of %s: %v", n.Name(), err)
		}
		d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert}})
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	receivers := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "fraudwatch_alerts_sent_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "receiver" {
					receivers[l.GetValue()] = true
				}
			}
		}
	}
	if !receivers["slack"] || !receivers["case-hook"] || len(receivers) != 2 {
		t.Errorf("fraudwatch_alerts_sent_total's receivers = %v, want slack and case-hook", receivers)
	}
}

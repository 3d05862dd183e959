package dispatch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
)

// channelPost is one message channelSlack took.
type channelPost struct {
	at      time.Time
	channel string // as sent: "" is the default channel
	rule    string
	ids     []string
	alerts  []alert.Alert
	digest  bool
}

// channelSlack is a Digester with a default channel, as alert/slack's
// token mode is: it records each message with the channel it was sent to,
// and refuses the channels in refuse (by the name sent, or "" for the
// default).
type channelSlack struct {
	def    string
	mu     sync.Mutex
	refuse map[string]bool
	posts  []channelPost
}

func newChannelSlack(def string, refuse ...string) *channelSlack {
	s := &channelSlack{def: def, refuse: map[string]bool{}}
	for _, ch := range refuse {
		s.refuse[ch] = true
	}
	return s
}

func (s *channelSlack) DefaultDestination() string { return s.def }

func (s *channelSlack) post(ch, rule string, digest bool, alerts ...alert.Alert) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse[ch] {
		return &alert.ChannelError{Channel: ch, Err: errors.New("slack: channel_not_found")}
	}
	p := channelPost{at: time.Now(), channel: ch, rule: rule, digest: digest}
	for _, a := range alerts {
		p.ids = append(p.ids, a.ID)
	}
	p.alerts = slices.Clone(alerts)
	s.posts = append(s.posts, p)
	return nil
}

func (s *channelSlack) Name() string { return "slack" }

func (s *channelSlack) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	return alert.Receipt{}, s.post(a.Channel, a.Rule, false, a)
}

func (s *channelSlack) NotifyDigest(_ context.Context, d alert.Digest) (alert.Receipt, error) {
	return alert.Receipt{}, s.post(d.Channel, d.Rule, true, d.Alerts...)
}

func (s *channelSlack) setRefused(ch string, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse[ch] = refused
}

func (s *channelSlack) snapshot() []channelPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// carried counts the messages that carried each alert.
func (s *channelSlack) carried() map[string]int {
	out := map[string]int{}
	for _, p := range s.snapshot() {
		for _, id := range p.ids {
			out[id]++
		}
	}
	return out
}

// keyedBudget is the scripts, with an alert budget that allows every
// message and records the channel key each took from.
type keyedBudget struct {
	*lua.Scripts
	mu   sync.Mutex
	keys []string
}

func (k *keyedBudget) TakeBudget(_ context.Context, channelKey, _ string, _, _ lua.Budget) (bool, time.Duration, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, channelKey)
	return true, 0, nil
}

// A destination has one name, whichever way a rule spells it: a rule
// without a channel goes to the notifier's default channel, and a Slack
// channel's name is case-insensitive with an optional #. Rules that spell
// one channel differently share its budget; an id stays its own
// (docs/alerts.md, Floods).
func TestOneBudgetADestinationHoweverSpelt(t *testing.T) {
	env := testDispatcher(t, newChannelSlack("#fraud"), dispatch.DispatcherConfig{})
	kb := &keyedBudget{Scripts: env.scripts}
	d, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{KeyPrefix: env.pfx}, newChannelSlack("#fraud"), kb, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	channels := []struct{ rule, channel, dest string }{
		{"r-none", "", "#fraud"},
		{"r-hash", "#fraud", "#fraud"},
		{"r-bare", "fraud", "#fraud"},
		{"r-upper", "#Fraud", "#fraud"},
		{"r-spaced", " FRAUD ", "#fraud"},
		{"r-id", "C0123ABCD9", "C0123ABCD9"},
		{"r-risk", "#risk", "#risk"},
	}
	rules := map[string]dispatch.RuleSettings{}
	for _, c := range channels {
		rules[c.rule] = dispatch.RuleSettings{Mode: alert.ModeAlert, Channel: c.channel}
	}
	d.SetRules(rules)
	var msgs []kafka.Message
	for i, c := range channels {
		a := env.alert("g-"+c.rule, "e-"+c.rule)
		a.Rule, a.ID = c.rule, c.rule+"/"+a.EventID
		msgs = append(msgs, env.message(t, a, int64(i)))
	}
	if n, err := d.HandleMessages(t.Context(), msgs); err != nil || n != len(msgs) {
		t.Fatalf("HandleMessages = %d, %v", n, err)
	}
	if len(kb.keys) != len(channels) {
		t.Fatalf("%d budgets taken, want one an alert", len(kb.keys))
	}
	for i, c := range channels {
		want, _ := env.keys.Budget(c.dest)
		if kb.keys[i] != want {
			t.Errorf("rule %s (channel %q) took from another budget than %s's", c.rule, c.channel, c.dest)
		}
	}
}

// The parked gauge names a destination as the budget does: alerts of a
// rule without a channel and of one that spells the default channel
// otherwise count under one series, the channel's own name.
func TestParkedGaugeNamesTheDestination(t *testing.T) {
	slack := newChannelSlack("#fraud", "", "#Fraud")
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{
		"r-none":  {Mode: alert.ModeAlert},
		"r-upper": {Mode: alert.ModeAlert, Channel: "#Fraud"},
	})
	var msgs []kafka.Message
	for i, rule := range []string{"r-none", "r-upper"} {
		a := env.alert("g-"+rule, "e-"+rule)
		a.Rule, a.ID = rule, rule+"/"+a.EventID
		msgs = append(msgs, env.message(t, a, int64(i)))
	}
	if n, err := env.d.HandleMessages(t.Context(), msgs); err != nil || n != len(msgs) {
		t.Fatalf("HandleMessages = %d, %v; want both parked", n, err)
	}
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := env.metric(t, "fraudwatch_alerts_parked", "channel", "#fraud"); got != 2 {
		t.Errorf("parked{#fraud} = %v, want 2", got)
	}
	if n := env.series(t, "fraudwatch_alerts_parked"); n != 1 {
		t.Errorf("%d series of fraudwatch_alerts_parked, want #fraud's alone", n)
	}
}

// A parked alert goes where its rule in force sends it when it is retried:
// fixing a mistyped channel in the rules file releases the alerts parked
// on it. An alert of a rule no longer in force keeps the channel it was
// parked with.
func TestParkedAlertsFollowAFixedChannel(t *testing.T) {
	slack := newChannelSlack("#fraud", "#nope", "#old")
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{UnknownRuleGrace: time.Nanosecond})
	env.d.SetRules(map[string]dispatch.RuleSettings{
		"r-fixed": {Mode: alert.ModeAlert, Channel: "#nope"},
		"r-gone":  {Mode: alert.ModeAlert, Channel: "#old"},
	})
	fixed, gone := env.alert("g-1", "e-1"), env.alert("g-2", "e-2")
	fixed.Rule, fixed.ID = "r-fixed", "r-fixed/e-1"
	gone.Rule, gone.ID = "r-gone", "r-gone/e-2"
	msgs := []kafka.Message{env.message(t, fixed, 0), env.message(t, gone, 1)}
	if n, err := env.d.HandleMessages(t.Context(), msgs); err != nil || n != 2 {
		t.Fatalf("HandleMessages = %d, %v; want both parked", n, err)
	}
	// The rules file fixed: r-fixed's channel is #fraud, r-gone removed.
	env.d.SetRules(map[string]dispatch.RuleSettings{"r-fixed": {Mode: alert.ModeAlert, Channel: "#fraud"}})
	slack.setRefused("#old", false)
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range slack.snapshot() {
		for _, id := range p.ids {
			got[id] = p.channel
		}
	}
	if got[fixed.ID] != "#fraud" || got[gone.ID] != "#old" || len(got) != 2 {
		t.Errorf("posted %v; want %s to #fraud, its rule's channel now, and %s to #old, the channel it was parked with", got, fixed.ID, gone.ID)
	}
	if left := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); left != 0 {
		t.Errorf("%d alerts still parked", left)
	}
}

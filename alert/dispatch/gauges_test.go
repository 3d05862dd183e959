package dispatch_test

import (
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

// fraudwatch_alerts_parked is what Redis holds: an alert parked again (its
// message delivered again after a crash, before its commit) is not counted
// twice, and each pass sets the gauge from Redis, so that alerts parked or
// posted by another replica count too.
func TestParkedGaugeIsWhatRedisHolds(t *testing.T) {
	slack := newChannelSlack("#fraud", "#gone")
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	rules := map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert, Channel: "#gone"}}
	env.d.SetRules(rules)
	other := testDispatcher(t, slack, dispatch.DispatcherConfig{KeyPrefix: env.pfx})
	other.d.SetRules(rules)
	msg := func(e *testEnv, event string, offset int64) kafka.Message {
		a := env.alert("g-"+event, event)
		a.Rule, a.ID = "r", "r/"+event
		return e.message(t, a, offset)
	}
	handle := func(e *testEnv, m kafka.Message) {
		t.Helper()
		if n, err := e.d.HandleMessages(t.Context(), []kafka.Message{m}); err != nil || n != 1 {
			t.Fatalf("HandleMessages = %d, %v; want it parked", n, err)
		}
	}
	gauge := func() float64 { return env.metric(t, "fraudwatch_alerts_parked", "channel", "#gone") }
	held := func() float64 { return float64(env.rdb.HLen(t.Context(), env.keys.Parked()).Val()) }
	pass := func(e *testEnv) {
		t.Helper()
		if err := e.d.RetryParked(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	first := msg(env, "e1", 0)
	handle(env, first)
	if gauge() != 1 || held() != 1 {
		t.Fatalf("parked one: gauge %v, Redis %v; want 1 and 1", gauge(), held())
	}
	handle(env, first) // delivered again: parked again, replacing its copy
	if gauge() != held() {
		t.Fatalf("parked again: gauge %v, Redis %v", gauge(), held())
	}
	pass(env)
	if gauge() != 1 {
		t.Fatalf("after a pass: gauge %v, want 1", gauge())
	}
	// Another replica parks two: this one counts them at its next pass.
	handle(other, msg(other, "e2", 1))
	handle(other, msg(other, "e3", 2))
	pass(env)
	if gauge() != 3 || held() != 3 {
		t.Fatalf("after the other replica parked two: gauge %v, Redis %v; want 3 and 3", gauge(), held())
	}
	// The channel is back; the other replica posts them all: this one's
	// next pass finds none.
	slack.setRefused("#gone", false)
	pass(other)
	if held() != 0 {
		t.Fatalf("%v still parked after the other replica's pass", held())
	}
	pass(env)
	if gauge() != 0 {
		t.Fatalf("after the other replica posted them: gauge %v, want 0", gauge())
	}
	if got := slack.carried(); len(got) != 3 || got["r/e1"] != 1 || got["r/e2"] != 1 || got["r/e3"] != 1 {
		t.Errorf("posted %v, want each of the three once", got)
	}
}

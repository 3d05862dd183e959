package dispatch_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
)

// roundTrips counts a client's round trips to Redis: a command, or a
// pipeline however long.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// drainTrips is the round trips of the drain pass that sends n waiting
// alerts of one rule, as one digest, each alert noted for its outcomes.
func drainTrips(t *testing.T, n int) int64 {
	t.Helper()
	f := newFloodEnv(t, dispatch.DispatcherConfig{}, nil)
	lives, err := life.New(life.Config{KeyPrefix: f.pfx}, f.scripts, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := outcome.NewStore(outcome.StoreConfig{KeyPrefix: f.pfx}, f.scripts, lives, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.d.SetOutcomes(store)
	// The first takes the budget's one message; the others wait.
	if got, err := f.handle(t, f.alerts(0, n+1)...); got != n+1 || err != nil {
		t.Fatalf("HandleMessages = %d, %v", got, err)
	}
	f.rdb.Del(t.Context(), budgetKey(f.testEnv, "#fraud"))
	trips := &roundTrips{}
	f.rdb.AddHook(trips)
	if err := f.d.DrainWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(f.slack.carried()); got != n+1 {
		t.Fatalf("%d alerts carried, want %d", got, n+1)
	}
	return trips.n.Load()
}

// A drain pass claims, indexes and notes its waiting alerts in a few
// pipelines, not in round trips an alert: a digest of 40 costs the pass
// what one of 4 does, give or take a trip.
func TestADrainPassTakesRoundTripsNotPerAlert(t *testing.T) {
	few, many := drainTrips(t, 4), drainTrips(t, 40)
	if many > few+2 {
		t.Errorf("a drain pass of 40 waiting alerts took %d round trips to Redis, one of 4 %d; want as many, "+
			"give or take 2", many, few)
	}
	t.Logf("round trips of a drain pass: %d for 4 alerts, %d for 40", few, many)
}

// retryTrips is the round trips of the retry pass that sends n parked
// alerts of one rule, as one digest.
func retryTrips(t *testing.T, n int) int64 {
	t.Helper()
	slack := &refusingSlack{slackLog: newSlackLog(), gone: true}
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{"r": {Mode: alert.ModeAlert, Channel: "#gone"}})
	parkMany(t, env, "r", n)
	slack.setGone(false)
	trips := &roundTrips{}
	env.rdb.AddHook(trips)
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, carried := slack.snapshot(); len(carried) != n {
		t.Fatalf("%d alerts carried, want %d", len(carried), n)
	}
	return trips.n.Load()
}

// A retry of parked alerts claims them in a few pipelines too.
func TestAParkedRetryTakesRoundTripsNotPerAlert(t *testing.T) {
	few, many := retryTrips(t, 4), retryTrips(t, 40)
	if many > few+2 {
		t.Errorf("a retry of 40 parked alerts took %d round trips to Redis, one of 4 %d; want as many, "+
			"give or take 2", many, few)
	}
	t.Logf("round trips of a parked retry: %d for 4 alerts, %d for 40", few, many)
}

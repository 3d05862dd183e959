package dispatch_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
)

// slackLog is a Digester that records each message it is given: when, and
// the alerts it carries.
type slackLog struct {
	mu       sync.Mutex
	at       []time.Time
	carried  map[string]int // alert id -> messages that carried it
	messages int
}

func newSlackLog() *slackLog { return &slackLog{carried: map[string]int{}} }

func (s *slackLog) record(alerts ...alert.Alert) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	s.messages++
	for _, a := range alerts {
		s.carried[a.ID]++
	}
}

func (s *slackLog) Name() string { return "slack" }

func (s *slackLog) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	s.record(a)
	return alert.Receipt{}, nil
}

func (s *slackLog) NotifyDigest(_ context.Context, d alert.Digest) (alert.Receipt, error) {
	s.record(d.Alerts...)
	return alert.Receipt{}, nil
}

func (s *slackLog) snapshot() (at []time.Time, carried map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at), maps.Clone(s.carried)
}

// partitionLoop hands the messages queued on one partition of the alerts
// topic to the dispatcher as the alerts group does: whatever has arrived,
// in order, as one batch; what is not done comes round again.
type partitionLoop struct {
	mu     sync.Mutex
	queue  []kafka.Message
	notify chan struct{}
}

func (p *partitionLoop) add(m kafka.Message) {
	p.mu.Lock()
	p.queue = append(p.queue, m)
	p.mu.Unlock()
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func (p *partitionLoop) run(ctx context.Context, t *testing.T, d *dispatch.Dispatcher) {
	for {
		p.mu.Lock()
		batch := slices.Clone(p.queue[:min(len(p.queue), 500)])
		p.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-p.notify:
				continue
			case <-ctx.Done():
				return
			}
		}
		n, err := d.HandleMessages(ctx, batch)
		if err != nil && ctx.Err() == nil {
			t.Errorf("HandleMessages: %v", err)
		}
		p.mu.Lock()
		p.queue = p.queue[n:]
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// A steady trickle of alerts for a minute, spread over four partitions as
// the alerts topic spreads groups, through the dispatcher with a real
// Redis budget (docs/alerts.md, Floods): Slack gets no more messages than the
// budget allows in any stretch of time, and every alert is carried by
// exactly one of them. $FRAUDWATCH_TEST_FLOOD_FOR shortens the minute: the
// README's suite holds it, and .ci/run's later runs (Redis 8's cluster)
// take 5 s of it, as they do of the binary's flood.
func TestFloodKeepsToTheBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of alerts")
	}
	const (
		rate       = 50 // alerts a second
		partitions = 4
	)
	duration := time.Minute
	if s := os.Getenv("FRAUDWATCH_TEST_FLOOD_FOR"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("FRAUDWATCH_TEST_FLOOD_FOR=%q: %v", s, err)
		}
		duration = d
	}
	budget := lua.Budget{Rate: 1, Burst: 3} // the defaults: docs/alerts.md's figures
	overall := lua.Budget{Rate: 5, Burst: 15}
	slack := newSlackLog()
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{ChannelBudget: budget, OverallBudget: overall})
	env.knowRule()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	loops := make([]*partitionLoop, partitions)
	var wg sync.WaitGroup
	wg.Go(func() { env.d.DrainWaitingEvery(ctx) })
	for i := range loops {
		loops[i] = &partitionLoop{notify: make(chan struct{}, 1)}
		wg.Go(func() { loops[i].run(ctx, t, env.d) })
	}
	var ids []string
	tick := time.NewTicker(time.Second / rate)
	start := time.Now()
	for i := 0; time.Since(start) < duration; i++ {
		<-tick.C
		a := env.alert(fmt.Sprintf("g-%d", i), fmt.Sprintf("e-%d", i))
		ids = append(ids, a.ID)
		loops[i%partitions].add(env.message(t, a, int64(i/partitions)))
	}
	tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, carried := slack.snapshot()
		if len(carried) == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d alerts posted 30 s after the last", len(carried), len(ids))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	at, carried := slack.snapshot()
	for _, id := range ids {
		if carried[id] != 1 {
			t.Errorf("alert %s carried by %d messages, want 1", id, carried[id])
		}
	}
	// A token bucket: in any stretch from one message to another, at most
	// the burst and what the rate refilled meanwhile, by Redis's clock when
	// each was taken. Here they are timed as they reach Slack: each loop
	// (the partitions', and the drain of waiting alerts) takes a message's
	// budget and then sends it, so a loop stalled between the two (a loaded
	// machine) delivers at most one message late, and the stretch may hold
	// one more a loop.
	for i := range at {
		for j := i; j < len(at); j++ {
			allowed := float64(budget.Burst) + budget.Rate*at[j].Sub(at[i]).Seconds() + partitions + 1
			if n := j - i + 1; float64(n) > allowed {
				t.Fatalf("%d messages from %v to %v, past the budget's %.1f", n, at[i].Sub(start), at[j].Sub(start), allowed)
			}
		}
	}
	t.Logf("%d alerts in %d messages over %v", len(ids), len(at), at[len(at)-1].Sub(start).Round(time.Second))
}

// An alert takes one message from the budget when it is to be sent; the
// retries of that delivery take none, so a failed first attempt does not
// push the next alert past the budget.
func TestRetriesTakeNoBudget(t *testing.T) {
	f := newFakeSlack(t, func(n int) reply {
		if n == 0 {
			return reply{status: http.StatusServiceUnavailable}
		}
		return reply{}
	})
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	// Two messages, then none: a retry that took one would leave e2 past
	// the budget, and e2 and e3 would go out as one digest.
	budget := env.withBudget(t, f.webhook(t), true, true, false)
	var msgs []kafka.Message
	for i, id := range []string{"e1", "e2", "e3"} {
		msgs = append(msgs, env.message(t, env.alert("g-"+id, id), int64(i)))
	}
	if n, err := env.d.HandleMessages(t.Context(), msgs); err != nil || n != len(msgs) {
		t.Fatalf("HandleMessages = %d, %v; want %d, nil", n, err, len(msgs))
	}
	if err := env.d.DrainWaiting(t.Context()); err != nil { // e3 waits for it
		t.Fatal(err)
	}
	// e1 after a 503, e2 alone, e3 alone once the budget allowed it.
	if got := f.deliveredCount(); got != 3 {
		t.Errorf("Slack took %d posts, want 3: the first alert, retried, the second, and the third", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_digested_total", "rule", sampleAlert().Rule); got != 0 {
		t.Errorf("digested_total = %v, want 0", got)
	}
	// e1, e2, e3 refused, and e3 once the budget allowed it.
	if budget.calls != 4 {
		t.Errorf("the budget was asked %d times, want 4", budget.calls)
	}
}

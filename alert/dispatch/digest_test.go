package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

// digestNotifier posts single alerts, and answers digests with digestErr.
type digestNotifier struct {
	mu        sync.Mutex
	digestErr error
	singles   int
	digests   int
}

func (n *digestNotifier) Name() string { return "slack" }

func (n *digestNotifier) Notify(context.Context, alert.Alert) (alert.Receipt, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.singles++
	return alert.Receipt{}, nil
}

func (n *digestNotifier) NotifyDigest(context.Context, alert.Digest) (alert.Receipt, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.digests++
	return alert.Receipt{}, n.digestErr
}

// What becomes of the alerts of a digest Slack does not take
// (docs/alerts.md, Floods): their messages are committed once they wait in
// Redis, whatever comes of the digest; refused for good, they are settled
// failed and their cooldowns given back; failing on, they stay waiting, to
// be sent again; refused for their channel, they are parked.
func TestDigestOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		failures   float64 // fraudwatch_alert_failures_total
		parked     int64   // alerts parked in Redis
		waiting    float64 // alerts still waiting in Redis
		cooldowns  int64   // the held alerts' cooldown keys still held
		wantPosted int     // digests tried
		recent     string  // the held alerts' outcome on the status page, if settled
	}{
		{"taken", nil, 0, 0, 0, 2, 1, dispatch.OutcomeDigested},
		{"refused for good", alert.Permanent(errors.New("slack: invalid_blocks")), 2, 0, 0, 0, 1, dispatch.OutcomeFailed},
		{"failing on", errors.New("slack: 503"), 0, 0, 2, 2, 1, ""},
		{"its channel refused", &alert.ChannelError{Channel: "#gone", Err: errors.New("slack: is_archived")}, 0, 2, 0, 2, 1, dispatch.OutcomeParked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &digestNotifier{digestErr: tt.err}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{})
			env.withBudget(t, n, true, false)
			var msgs []kafka.Message
			var held []alert.Alert
			for i, id := range []string{"e1", "e2", "e3"} {
				a := env.alert("g-"+id, id)
				if i > 0 {
					held = append(held, a)
				}
				msgs = append(msgs, env.message(t, a, int64(i)))
			}
			if committed, err := env.d.HandleMessages(t.Context(), msgs); committed != 3 || err != nil {
				t.Fatalf("HandleMessages = %d, %v; want all 3, the two past the budget waiting", committed, err)
			}
			if err := env.d.DrainWaiting(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n.singles != 1 || n.digests != tt.wantPosted {
				t.Errorf("%d single posts, %d digests tried; want 1 and %d", n.singles, n.digests, tt.wantPosted)
			}
			if got := env.total(t, "fraudwatch_alert_failures_total"); got != tt.failures {
				t.Errorf("failures = %v, want %v", got, tt.failures)
			}
			if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != tt.parked {
				t.Errorf("%d alerts parked, want %d", got, tt.parked)
			}
			if err := env.d.DrainWaiting(t.Context()); err != nil { // a pass counts what waits
				t.Fatal(err)
			}
			if got := env.metric(t, "fraudwatch_alerts_waiting", "receiver", "slack", "channel", "(default)"); got != tt.waiting {
				t.Errorf("%v alerts waiting, want %v", got, tt.waiting)
			}
			var cooldowns int64
			for _, a := range held {
				cooldowns += env.rdb.Exists(t.Context(), a.CooldownKey).Val()
			}
			if cooldowns != tt.cooldowns {
				t.Errorf("%d of the digest's cooldowns held, want %d", cooldowns, tt.cooldowns)
			}
			env.wantListed(t, held, tt.recent)
		})
	}
}

// answersLate is a receiver that takes a while to answer a post, during
// which the caller's context ends (cut, called once, as a SIGTERM would);
// like an HTTP client, it gives up when its own context ends first.
type answersLate struct {
	mu              sync.Mutex
	cut             func()
	singles, digest int
}

func (n *answersLate) Name() string { return "slack" }

func (n *answersLate) answer(ctx context.Context, count *int) (alert.Receipt, error) {
	n.mu.Lock()
	*count++ // taken as it arrives, whatever the client does next
	cut := n.cut
	n.cut = func() {}
	n.mu.Unlock()
	cut()
	select {
	case <-ctx.Done():
		return alert.Receipt{}, ctx.Err()
	case <-time.After(100 * time.Millisecond):
		return alert.Receipt{}, nil
	}
}

func (n *answersLate) Notify(ctx context.Context, _ alert.Alert) (alert.Receipt, error) {
	return n.answer(ctx, &n.singles)
}

func (n *answersLate) NotifyDigest(ctx context.Context, _ alert.Digest) (alert.Receipt, error) {
	return n.answer(ctx, &n.digest)
}

// A post under way when the dispatcher's context ends (a shutdown, or a
// rebalance cutting work short) is let finish and recorded: cut at once,
// the receiver would have taken a message that the next pass, or the next
// owner of the partition, sends again. Both ways a message is posted: an
// alert of its own, and a digest of those that waited.
func TestAPostUnderWayWhenTheContextEndsIsRecorded(t *testing.T) {
	for _, digest := range []bool{false, true} {
		t.Run(map[bool]string{false: "alert", true: "digest"}[digest], func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			n := &answersLate{cut: func() {}}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{})
			env.knowRule()
			var msgs []kafka.Message
			for i, id := range []string{"e1", "e2", "e3"} {
				msgs = append(msgs, env.message(t, env.alert("g-"+id, id), int64(i)))
			}
			if !digest {
				msgs = msgs[:1]
				n.cut = cancel
			} else {
				env.withBudget(t, n, true, false)
			}
			if _, err := env.d.HandleMessages(ctx, msgs); err != nil && !digest {
				t.Fatalf("HandleMessages = %v; want the post under way finished and recorded", err)
			}
			if digest {
				n.cut = cancel
				_ = env.d.DrainWaiting(ctx)
			}
			// What comes next: the same messages redelivered, and a pass
			// of the waiting alerts; none may post again, and none waits.
			if _, err := env.d.HandleMessages(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
			if err := env.d.DrainWaiting(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := map[bool][2]int{false: {1, 0}, true: {1, 1}}[digest]
			if n.singles != want[0] || n.digest != want[1] {
				t.Errorf("the receiver took %d alerts and %d digests, want %d and %d", n.singles, n.digest, want[0], want[1])
			}
			if err := env.d.DrainWaiting(t.Context()); err != nil { // a pass counts what waits
				t.Fatal(err)
			}
			if got := env.metric(t, "fraudwatch_alerts_waiting", "receiver", "slack", "channel", "(default)"); got != 0 {
				t.Errorf("%v alerts still waiting after their digest was taken, want 0", got)
			}
		})
	}
}

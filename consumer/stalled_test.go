package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// stalledSeconds reads a partition's fraudwatch_consumer_stalled_seconds;
// ok is false when there is no such series.
func stalledSeconds(t *testing.T, reg *prometheus.Registry, topic string, partition int) (v float64, ok bool) {
	t.Helper()
	return partitionGauge(t, reg, "fraudwatch_consumer_stalled_seconds", topic, partition)
}

// handOver is one call of a stepped handler: what it was handed, and where
// the test says how the call ends.
type handOver struct {
	msgs []kafka.Message
	end  chan stepEnd
}

type stepEnd struct {
	done int
	err  error
}

// fraudwatch_consumer_stalled_seconds is the time since the oldest message
// not yet handled was first handed over, whatever holds it: it grows while
// one call holds a message (a Retry-After retried inside the call, a wait),
// and while a batch is handled a message a call with failures between
// (alerts of rules not yet in force, one after another); it is 0 once the
// batch is handled, and while nothing is in hand.
func TestStalledIsTheAgeOfTheOldestMessageInHand(t *testing.T) {
	e := newEnv(t, 1)
	// All three before the group starts: one fetch, one batch.
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1), order("e2", "c", 1), order("e3", "c", 1))
	cfg := e.config()
	gc := cfg.group()
	gc.Topics = []string{e.orders}
	gc.RetryMin, gc.RetryMax = time.Millisecond, time.Millisecond
	calls := make(chan handOver)
	h := MessageHandlerFunc(func(ctx context.Context, msgs []kafka.Message) (int, error) {
		s := handOver{msgs: msgs, end: make(chan stepEnd)}
		select {
		case calls <- s:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		select {
		case r := <-s.end:
			return r.done, r.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	reg := prometheus.NewRegistry()
	g, err := NewGroup(gc, h, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	stalled := func() float64 { v, _ := stalledSeconds(t, reg, e.orders, 0); return v }
	next := func() handOver {
		t.Helper()
		select {
		case s := <-calls:
			return s
		case <-time.After(30 * time.Second):
			t.Fatal("no call of the handler within 30 s")
			return handOver{}
		}
	}

	first := next()
	handed := time.Now() // the batch was handed over before this
	if len(first.msgs) != 3 {
		t.Fatalf("the first batch holds %d messages, want the 3 produced before the start", len(first.msgs))
	}
	// atLeastSinceHandover checks the gauge against the time since the
	// batch was first handed over, whichever call holds it now.
	atLeastSinceHandover := func(when string, after time.Duration) {
		t.Helper()
		time.Sleep(time.Until(handed.Add(after)))
		since := time.Since(handed)
		if got := stalled(); got < since.Seconds()-0.05 {
			t.Fatalf("%s: stalled %.2f s, want at least the %.2f s since the batch was handed over", when, got, since.Seconds())
		}
	}
	// One call that holds its batch: the gauge grows inside it.
	atLeastSinceHandover("inside the first call", 500*time.Millisecond)
	// Handled one message a call, a failure after each: the gauge keeps
	// counting from the batch's handover, past any one call.
	first.end <- stepEnd{1, errors.New("the next message's rule is not in force yet")}
	second := next()
	atLeastSinceHandover("inside the second call", time.Second)
	second.end <- stepEnd{1, errors.New("the next message's rule is not in force yet")}
	third := next()
	atLeastSinceHandover("inside the third call", 1500*time.Millisecond)
	third.end <- stepEnd{1, nil}
	waitFor(t, 10*time.Second, "the stall gauge at 0 once the batch is handled", func() bool {
		v, ok := stalledSeconds(t, reg, e.orders, 0)
		return ok && v == 0
	})
	// A new message is handed over and handled at once: 0 again.
	e.cluster.ProduceTo(t, e.orders, 0, order("e4", "c", 1))
	fourth := next()
	fourth.end <- stepEnd{1, nil}
	waitFor(t, 10*time.Second, "the stall gauge at 0 with nothing in hand", func() bool {
		v, ok := stalledSeconds(t, reg, e.orders, 0)
		return ok && v == 0
	})
}

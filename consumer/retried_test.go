package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fraudwatch/fraudwatch/event"
)

// retried reads fraudwatch_events_retried_total of a topic.
func (r *running) retried(topic string) float64 {
	return testutil.ToFloat64(r.c.m.retried.WithLabelValues(topic))
}

// A second record of an event at a later offset of its partition (a
// producer's retry) is not handed over again, but counted; one in the same
// batch as the first is too.
func TestAProducersRetryIsHandledOnce(t *testing.T) {
	e := newEnv(t, 1)
	rec := newRecorder()
	r := start(t, e.config(), rec)
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1))
	waitFor(t, 20*time.Second, "e1", func() bool { return len(rec.ids()) == 1 })
	e.cluster.ProduceTo(t, e.orders, 0, order("e2", "c", 1), order("e1", "c", 1), order("e2", "c", 1))
	// The sentinel comes after the retries: once it is handled, they
	// would have been.
	e.cluster.ProduceTo(t, e.orders, 0, order("e3", "c", 1))
	waitFor(t, 20*time.Second, "e3", func() bool { ids := rec.ids(); return len(ids) > 0 && ids[len(ids)-1] == "e3" })
	if got := fmt.Sprint(rec.ids()); got != "[e1 e2 e3]" {
		t.Fatalf("handled %s, want [e1 e2 e3]", got)
	}
	if got := r.retried(e.orders); got != 2 {
		t.Fatalf("retried{topic=orders} = %v, want 2", got)
	}
	if got := r.retried(e.refunds); got != 0 {
		t.Fatalf("retried{topic=refunds} = %v, want 0", got)
	}
}

// A member that takes over a partition reads back the records before its
// committed offset, and so catches the retry of an event handled before
// it started; those records are remembered, never handled again.
func TestARetryAfterARestartIsCaught(t *testing.T) {
	e := newEnv(t, 1)
	cfg := e.config()
	first := newRecorder()
	a := start(t, cfg, first)
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1), order("e2", "c", 1))
	waitFor(t, 20*time.Second, "e1 and e2", func() bool { return len(first.ids()) == 2 })
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, e, e.orders, 0); got != 2 {
		t.Fatalf("committed offset %d, want 2", got)
	}

	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1), order("e3", "c", 1))
	second := newRecorder()
	b := start(t, cfg, second)
	waitFor(t, 20*time.Second, "e3", func() bool { return len(second.ids()) > 0 })
	if got := fmt.Sprint(second.ids()); got != "[e3]" {
		t.Fatalf("after the restart, handled %s, want [e3]", got)
	}
	if got := b.retried(e.orders); got != 1 {
		t.Fatalf("retried = %v, want 1", got)
	}
}

// A batch whose attempt fails is handed over again whole: none of its
// events is taken for a retry of itself, and its true retries are caught
// the same way each time and counted once.
func TestAFailedBatchIsHandedOverWholeAgain(t *testing.T) {
	e := newEnv(t, 1)
	// In the partition before the member starts, so that one fetch brings
	// them all: one batch.
	e.cluster.ProduceTo(t, e.orders, 0, order("e1", "c", 1), order("e2", "c", 1), order("e1", "c", 1))
	var mu sync.Mutex
	var attempts []string
	h := HandlerFunc(func(_ context.Context, evs []*event.Event) (map[int]error, error) {
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for _, ev := range evs {
			ids = append(ids, fmt.Sprintf("%s@%d", ev.EventID, ev.Source.Offset))
		}
		attempts = append(attempts, fmt.Sprint(ids))
		if len(attempts) == 1 {
			return nil, errors.New("redis down")
		}
		return nil, nil
	})
	cfg := e.config()
	cfg.BatchLinger = 500 * time.Millisecond
	r := start(t, cfg, h)
	tried := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(attempts) >= n }
	}
	waitFor(t, 20*time.Second, "a second attempt", tried(2))
	// The sentinel: had the retry been handed over late, it would have
	// been by the time the sentinel is.
	e.cluster.ProduceTo(t, e.orders, 0, order("e3", "c", 1))
	waitFor(t, 20*time.Second, "e3", tried(3))
	mu.Lock()
	got := fmt.Sprint(attempts)
	mu.Unlock()
	if want := "[[e1@0 e2@1] [e1@0 e2@1] [e3@3]]"; got != want {
		t.Fatalf("attempts %s, want %s", got, want)
	}
	if got := r.retried(e.orders); got != 1 {
		t.Fatalf("retried = %v, want 1", got)
	}
}

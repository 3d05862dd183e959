package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
)

// TestDeliveredOnceHoweverOftenRedelivered plays the alerts topic's
// redeliveries: after a crash before the acknowledgement, after Slack was
// down for longer than one call's attempts, and after a permanent refusal.
func TestDeliveredOnceHoweverOftenRedelivered(t *testing.T) {
	var down sync.Mutex
	outage := true
	f := newFakeSlack(t, func(int) reply {
		down.Lock()
		defer down.Unlock()
		if outage {
			return reply{status: 503}
		}
		return reply{}
	})
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{MaxAttempts: 3})
	a := env.alert("g1", "evt-1")
	for range 3 { // Slack down for three whole calls
		if err := env.deliver(t, a); !errors.Is(err, dispatch.ErrNotDelivered) {
			t.Fatalf("HandleMessages during the outage = %v, want ErrNotDelivered", err)
		}
	}
	down.Lock()
	outage = false
	down.Unlock()
	for i := range 3 { // then the alert comes round again, three times
		if err := env.deliver(t, a); err != nil {
			t.Fatalf("HandleMessages %d after the outage = %v", i, err)
		}
	}
	if got := f.deliveredCount(); got != 1 {
		t.Fatalf("Slack accepted %d messages, want exactly 1", got)
	}
	if got := f.requests(); got != 10 {
		t.Fatalf("Slack got %d requests, want 9 during the outage and 1 after", got)
	}
}

// The outcome of a post Slack took is recorded even when the caller's
// context ends right then (a shutdown, or a rebalance cutting work short):
// otherwise the redelivered alert would be posted again.
func TestSentIsRecordedEvenWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSlack(t, func(int) reply { return reply{} })
	slackN := f.webhook(t)
	n := alert.NotifierFunc(func(c context.Context, a alert.Alert) error {
		_, err := slackN.Notify(c, a)
		cancel() // the context ends just after Slack took the post
		return err
	})
	env := testDispatcher(t, n, dispatch.DispatcherConfig{})
	env.knowRule()
	a := env.alert("g1", "evt-1")
	if err := handleOne(ctx, env.d, env.message(t, a, 1)); err != nil {
		t.Fatalf("HandleMessages = %v", err)
	}
	if err := env.deliver(t, a); err != nil { // the redelivery
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 1 {
		t.Fatalf("Slack accepted %d posts, want 1", got)
	}
}

// A crossing published again after a crash can sit in one batch with its
// first message. Past the budget, both read "pending" at claim time: the
// waiting store keeps the alert once, and the digest carries it once.
func TestABatchPostsAnAlertOnceHoweverOftenItCarriesIt(t *testing.T) {
	tests := []struct {
		name   string
		order  []string // event ids, in the batch's order; each a group of its own
		posts  int      // what Slack takes: the first alert alone, then one digest
		listed map[string]int
	}{
		{"copies past the budget", []string{"e1", "e2", "e3", "e2", "e3", "e4"}, 2,
			map[string]int{"g-e1": 1, "g-e2": 1, "g-e3": 1, "g-e4": 1}},
		{"a copy of the alert sent alone", []string{"e1", "e2", "e1", "e1"}, 2,
			map[string]int{"g-e1": 1, "g-e2": 1}},
		{"copies only", []string{"e1", "e2", "e2", "e2"}, 2,
			map[string]int{"g-e1": 1, "g-e2": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSlack(t, func(int) reply { return reply{} })
			env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
			// The first alert takes the budget's last message, the second
			// finds it spent; then the budget allows the digest.
			env.withBudget(t, f.webhook(t), true, false)
			var msgs []kafka.Message
			for i, id := range tt.order {
				a := env.alert("g-"+id, id)
				msgs = append(msgs, env.message(t, a, int64(i)))
			}
			n, err := env.d.HandleMessages(t.Context(), msgs)
			if err != nil || n != len(msgs) {
				t.Fatalf("HandleMessages = %d, %v; want %d, nil", n, err, len(msgs))
			}
			// Those past the budget wait in Redis, once each: the drainer
			// sends them.
			if err := env.d.DrainWaiting(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := f.deliveredCount(); got != tt.posts {
				t.Errorf("Slack took %d posts, want %d", got, tt.posts)
			}
			listed := map[string]int{}
			for _, body := range f.allBodies() {
				var post struct{ Text string } // a line an alert, in a digest too
				if err := json.Unmarshal([]byte(body), &post); err != nil {
					t.Fatal(err)
				}
				for g := range tt.listed {
					listed[g] += strings.Count(post.Text, "card_fingerprint="+g)
				}
			}
			for g, want := range tt.listed {
				if listed[g] != want {
					t.Errorf("%s posted %d times, want %d", g, listed[g], want)
				}
			}
			if got, want := env.metric(t, "fraudwatch_alerts_sent_total", "rule", sampleAlert().Rule), float64(len(tt.listed)); got != want {
				t.Errorf("sent_total = %v, want %v", got, want)
			}
			// Read again, the batch posts nothing more.
			if _, err := env.d.HandleMessages(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
			if got := f.deliveredCount(); got != tt.posts {
				t.Errorf("read again, Slack took %d posts, want still %d", got, tt.posts)
			}
		})
	}
}

package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
)

// gated posts nothing until its gate is closed, and counts the posts
// begun and done.
type gated struct {
	gate    chan struct{}
	begun   atomic.Int32
	mu      sync.Mutex
	posted  []string // alert ids
	receipt alert.Receipt
}

func newGated() *gated { return &gated{gate: make(chan struct{})} }

func (g *gated) Name() string { return "slack" }

func (g *gated) Notify(ctx context.Context, a alert.Alert) (alert.Receipt, error) {
	g.begun.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return alert.Receipt{}, ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.posted = append(g.posted, a.ID)
	return g.receipt, nil
}

func (g *gated) posts() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.posted...)
}

// onPartition is a's message on the alerts topic at partition and offset,
// its crossing marked.
func (e *testEnv) onPartition(t *testing.T, a alert.Alert, partition int, offset int64) kafka.Message {
	t.Helper()
	msg := e.message(t, a, offset)
	msg.Partition = partition
	return msg
}

// One alert on three partitions at once (copies of one message): the
// first claim wins and posts; the copies, claimed elsewhere, are
// acknowledged without a post while the first is still sending, and
// counted. Before claims named their claimant, each copy found the record
// pending and the cooldown its own alert's, and posted.
func TestCopiesOnOtherPartitionsPostOnce(t *testing.T) {
	n := newGated()
	env := testDispatcher(t, n, dispatch.DispatcherConfig{})
	env.knowRule()
	a := env.alert("g1", "evt-1")
	type result struct {
		done int
		err  error
	}
	results := make([]chan result, 3)
	var copiesDone atomic.Int32
	handle := func(p int) {
		results[p] = make(chan result, 1)
		msg := env.onPartition(t, a, p, int64(10+p))
		go func() {
			done, err := env.d.HandleMessages(context.Background(), []kafka.Message{msg})
			results[p] <- result{done, err}
			if p > 0 {
				copiesDone.Add(1)
			}
		}()
	}
	handle(0)
	testkit.WaitFor(t, 10*time.Second, "the first copy's post begun", func() bool { return n.begun.Load() == 1 })
	handle(1)
	handle(2)
	// The copies settle while the first one's post waits (or, before
	// claims named their claimant, post too).
	testkit.WaitFor(t, 10*time.Second, "the copies settled, or posting", func() bool {
		return copiesDone.Load() == 2 || n.begun.Load() == 3
	})
	close(n.gate)
	first := <-results[0]
	copies := []result{<-results[1], <-results[2]}
	if first.done != 1 || first.err != nil {
		t.Errorf("the first copy: %d, %v; want it posted and committed", first.done, first.err)
	}
	for i, r := range copies {
		if r.done != 1 || r.err != nil {
			t.Errorf("copy %d: %d, %v; want it acknowledged", i+1, r.done, r.err)
		}
	}
	if posts := n.posts(); len(posts) != 1 {
		t.Fatalf("%d posts of one alert on three partitions, want 1", len(posts))
	}
	if got := env.metric(t, "fraudwatch_alert_copies_total", "rule", a.Rule); got != 2 {
		t.Errorf("copies_total = %v, want 2", got)
	}
	if got := env.metric(t, "fraudwatch_alerts_sent_total", "rule", a.Rule); got != 1 {
		t.Errorf("sent_total = %v, want 1", got)
	}
	if rec := env.record(t, a, "slack"); rec.State != "sent" || rec.Claimant != "alerts/0/10" {
		t.Errorf("record %+v, want sent by the first copy, alerts/0/10", rec)
	}
}

// A replica that dies mid-send leaves its claim pending: a copy on
// another partition meanwhile is acknowledged without a post, and the
// claimant's own message, delivered again to the partition's next owner
// (another replica), is the one that posts.
func TestACrashMidSendResendsWithItsOwnClaim(t *testing.T) {
	f := newFakeSlack(t, func(n int) reply {
		if n == 0 {
			return reply{hang: true} // the first replica's post, cut short
		}
		return reply{}
	})
	// The post under way is given a moment once the replica's context
	// ends (InFlightGrace); this one never answers.
	first := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{InFlightGrace: 50 * time.Millisecond})
	first.knowRule()
	a := first.alert("g1", "evt-1")
	msg := first.onPartition(t, a, 0, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := make(chan error, 1)
	go func() {
		_, err := first.d.HandleMessages(ctx, []kafka.Message{msg})
		cut <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the post under way", func() bool { return f.requests() == 1 })
	cancel() // the replica dies while Slack takes the post
	if err := <-cut; err == nil {
		t.Fatal("HandleMessages cut short = nil; want its message left uncommitted")
	}
	second := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{KeyPrefix: first.pfx})
	second.knowRule()
	if err := handleOne(t.Context(), second.d, second.onPartition(t, a, 1, 9)); err != nil {
		t.Fatalf("the copy on partition 1: %v", err)
	}
	if got := f.requests(); got != 1 {
		t.Fatalf("the copy made %d requests in all, want none of its own", got-1)
	}
	if err := handleOne(t.Context(), second.d, msg); err != nil {
		t.Fatalf("the claimant's message again: %v", err)
	}
	if got := f.deliveredCount(); got != 1 {
		t.Errorf("Slack took %d posts, want the claimant's resend", got)
	}
	if rec := second.record(t, a, "slack"); rec.State != "sent" || rec.Claimant != "alerts/0/5" {
		t.Errorf("record %+v, want sent by alerts/0/5", rec)
	}
}

// What Slack's bot-token mode answers (channel and ts) is kept in the
// record of each alert the message carried: one alert's, and a digest's
// for each of its alerts. A webhook answers neither: no receipt.
func TestReceiptsAreKept(t *testing.T) {
	api := func(n int) reply {
		return reply{body: fmt.Sprintf(`{"ok":true,"channel":"C9","ts":"1700000000.%06d"}`, n)}
	}
	t.Run("one alert", func(t *testing.T) {
		f := newFakeSlack(t, api)
		env := testDispatcher(t, f.token(t), dispatch.DispatcherConfig{})
		a := env.alert("g1", "evt-1")
		if err := env.deliver(t, a); err != nil {
			t.Fatal(err)
		}
		if rec := env.record(t, a, "slack"); rec.State != "sent" || rec.Receipt != `{"channel":"C9","ts":"1700000000.000000"}` {
			t.Errorf("record %+v, want the post's channel and ts", rec)
		}
	})
	t.Run("a digest", func(t *testing.T) {
		f := newFakeSlack(t, api)
		env := testDispatcher(t, f.token(t), dispatch.DispatcherConfig{})
		env.withBudget(t, f.token(t), true, false) // the first alone, then one digest
		var msgs []kafka.Message
		var alerts []alert.Alert
		for i := range 4 {
			a := env.alert(fmt.Sprint("g", i), fmt.Sprint("evt-", i))
			alerts = append(alerts, a)
			msgs = append(msgs, env.message(t, a, int64(i)))
		}
		if done, err := env.d.HandleMessages(t.Context(), msgs); done != 4 || err != nil {
			t.Fatalf("HandleMessages = %d, %v", done, err)
		}
		// The three past the budget wait in Redis; the drainer sends them
		// as one digest once the budget allows.
		if err := env.d.DrainWaiting(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i, a := range alerts {
			// The digest's, marked one: an update of one of its alerts
			// must not redraw the whole digest (alert.Receipt.Digest).
			want := `{"channel":"C9","ts":"1700000000.000001","digest":true}`
			if i == 0 {
				want = `{"channel":"C9","ts":"1700000000.000000"}`
			}
			if rec := env.record(t, a, "slack"); rec.State != "sent" || rec.Receipt != want {
				t.Errorf("alert %d: record %+v, want receipt %s", i, rec, want)
			}
		}
	})
	t.Run("a webhook", func(t *testing.T) {
		f := newFakeSlack(t, func(int) reply { return reply{} })
		env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
		a := env.alert("g1", "evt-1")
		if err := env.deliver(t, a); err != nil {
			t.Fatal(err)
		}
		if rec := env.record(t, a, "slack"); rec.State != "sent" || rec.Receipt != "" {
			t.Errorf("record %+v, want sent without a receipt", rec)
		}
	})
}

// Parking hands the claim to the parked alerts: the parked message
// delivered again (its commit lost) is claimed elsewhere and posts
// nothing, the retry posts it once, and a copy after that is sent before.
func TestParkingHandsTheClaimOver(t *testing.T) {
	slack := &refusingSlack{slackLog: newSlackLog(), gone: true}
	env := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	env.d.SetRules(map[string]dispatch.RuleSettings{"r-a": {Mode: alert.ModeAlert, Channel: "#gone"}})
	a := env.alert("g1", "e1")
	a.Rule, a.ID = "r-a", "r-a/e1"
	msg := env.onPartition(t, a, 0, 3)
	if err := handleOne(t.Context(), env.d, msg); err != nil {
		t.Fatalf("the parked message: %v", err)
	}
	if rec := env.record(t, a, "slack"); rec.State != "pending" || rec.Claimant != lua.ParkedClaimant {
		t.Fatalf("record %+v, want pending, held by the parked alerts", rec)
	}
	slack.setGone(false)
	if err := handleOne(t.Context(), env.d, msg); err != nil {
		t.Fatalf("the parked message again: %v", err)
	}
	if _, carried := slack.snapshot(); len(carried) != 0 {
		t.Fatalf("the parked message, delivered again, posted %v", carried)
	}
	if err := env.d.RetryParked(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := handleOne(t.Context(), env.d, env.onPartition(t, a, 1, 8)); err != nil {
		t.Fatalf("a copy after the retry: %v", err)
	}
	if _, carried := slack.snapshot(); len(carried) != 1 || carried[a.ID] != 1 {
		t.Errorf("posted %v, want the parked alert once", carried)
	}
	if got := env.rdb.HLen(t.Context(), env.keys.Parked()).Val(); got != 0 {
		t.Errorf("%d still parked", got)
	}
}

// Records the version before records per receiver wrote (a string at the
// old key) still answer: an alert it sent is not posted again, one it
// left pending (its cooldown taken by the alert) is posted, and one it
// parked is posted by the retry.
func TestRecordsOfTheVersionBeforeAreRead(t *testing.T) {
	f := newFakeSlack(t, func(int) reply { return reply{} })
	env := testDispatcher(t, f.webhook(t), dispatch.DispatcherConfig{})
	ctx := t.Context()
	sent, pending := env.alert("g-sent", "e-sent"), env.alert("g-pending", "e-pending")
	env.rdb.Set(ctx, sent.RecordKey, "sent", time.Hour)
	env.rdb.Set(ctx, pending.RecordKey, "pending", time.Hour)
	env.rdb.Set(ctx, pending.CooldownKey, pending.ID, time.Hour)
	if err := env.deliver(t, sent); err != nil {
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 0 {
		t.Fatalf("an alert the old version sent was posted again (%d posts)", got)
	}
	if err := env.deliver(t, pending); err != nil {
		t.Fatal(err)
	}
	if got := f.deliveredCount(); got != 1 {
		t.Fatalf("an alert the old version left pending: %d posts, want 1", got)
	}
	// Parked by the old version: its record pending at the old key.
	slack := &refusingSlack{slackLog: newSlackLog()}
	parker := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	parker.d.SetRules(map[string]dispatch.RuleSettings{"r-a": {Mode: alert.ModeAlert, Channel: "#gone"}})
	old := parker.alert("g-parked", "e-parked")
	old.Rule, old.ID = "r-a", "r-a/e-parked"
	old.RecordKey = parker.keys.AlertRecord(parker.keys.Group(old.GroupValues), old.Rule, old.EventID)
	parker.rdb.Set(ctx, old.RecordKey, "pending", time.Hour)
	data, err := json.Marshal(struct {
		alert.Alert
		ParkedAt time.Time `json:"parked_at"`
	}{old, time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parker.scripts.Park(ctx, parker.keys.Parked(), old.ID, data, 10, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := parker.d.RetryParked(ctx); err != nil {
		t.Fatal(err)
	}
	if _, carried := slack.snapshot(); carried[old.ID] != 1 {
		t.Errorf("posted %v, want the alert the old version parked", carried)
	}
}

// The notifier names its receiver; a name that cannot end a record's key
// is refused at construction.
func TestTheReceiverMustBeNamed(t *testing.T) {
	for _, name := range []string{"", "Slack", "a:b", "{x}", "1st", "a-very-long-receiver-name-of-33-b"} {
		n := named{name}
		if _, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{}, n, &lua.Scripts{}, nil, nil); err == nil {
			t.Errorf("receiver %q taken", name)
		}
	}
	if _, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{}, named{"pager-duty_2"}, &lua.Scripts{}, nil, nil); err != nil {
		t.Errorf("receiver pager-duty_2: %v", err)
	}
}

type named struct{ name string }

func (n named) Name() string { return n.name }

func (n named) Notify(context.Context, alert.Alert) (alert.Receipt, error) {
	return alert.Receipt{}, errors.New("not used")
}

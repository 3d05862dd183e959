package silence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/silence"
	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// notes is a thread that records what it is told, failing with the
// errors queued in fail first.
type notes struct {
	mu   sync.Mutex
	said []string // "<channel>/<ts>: <text>"
	fail []error
}

func (n *notes) Note(_ context.Context, parent alert.Receipt, text string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.fail) > 0 {
		err := n.fail[0]
		n.fail = n.fail[1:]
		return err
	}
	n.said = append(n.said, parent.Channel+"/"+parent.TS+": "+text)
	return nil
}

func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.said)
}

// replicaStores are n replicas' silence stores on one Redis and prefix,
// and a count of the silences whose end waits to be said.
func replicaStores(t *testing.T, n int) ([]*silence.Store, func() int64) {
	t.Helper()
	prefix := redistest.Prefix(t)
	keys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []*silence.Store
	for range n {
		rdb := redistest.Client(t)
		scripts, err := lua.New(lua.Config{}, rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, silence.NewStore(rdb, scripts, keys))
	}
	rdb := redistest.Client(t)
	return out, func() int64 {
		n, err := rdb.ZCard(t.Context(), keys.SilenceIndex()+":ends").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

func sweeper(t *testing.T, cfg silence.SweeperConfig, s *silence.Store, n *notes, log *slog.Logger, reg prometheus.Registerer) *silence.Sweeper {
	t.Helper()
	w, err := silence.NewSweeper(cfg, s, n, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var thread = alert.Receipt{Channel: "C0ALERTS", TS: "1700000000.000001"}

// A Snooze's silence says its end in the thread of the message it came
// from, once, when it ends, or when it is expired early; a silence from
// the CLI (no thread) says nothing. The log names the silence and its
// rule, never the group's values.
func TestSilenceEndSaidInItsThread(t *testing.T) {
	ctx := t.Context()
	stores, waiting := replicaStores(t, 1)
	store := stores[0]
	n := &notes{}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	w := sweeper(t, silence.SweeperConfig{}, store, n, slog.New(slog.NewJSONHandler(&logs, nil)), reg)
	now := time.Now()
	brief, err := store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "cust-secret"},
		Thread: thread, For: silence.MinFor, Reason: "snoozed from Slack", Author: "slack:U1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	long, err := store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "c2"},
		Thread: alert.Receipt{Channel: "C0ALERTS", TS: "1700000000.000002"}, For: time.Hour, Reason: "snoozed from Slack"}, now)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := store.Add(ctx, testRules, silence.Spec{Rule: "pair", For: time.Hour, Reason: "from the CLI"}, now)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := store.List(ctx, now)
	if i := slices.IndexFunc(list, func(s silence.Silence) bool { return s.ID == brief.ID }); len(list) != 3 || i < 0 || list[i].Thread != thread {
		t.Fatalf("List = %+v: want the thread kept with the silence", list)
	}
	if said, err := w.Sweep(ctx); err != nil || said != 0 {
		t.Fatalf("before any end: said %d, %v", said, err)
	}
	testkit.WaitFor(t, 10*time.Second, "the brief silence's end said", func() bool {
		_, err := w.Sweep(ctx)
		return err == nil && len(n.all()) == 1
	})
	want := thread.Channel + "/" + thread.TS + ": :alarm_clock: Snooze of this group ended at " +
		brief.Ends.UTC().Format(time.RFC3339) + " (silence " + brief.ID + ")"
	if got := n.all(); !strings.HasPrefix(got[0], want) {
		t.Errorf("said %q, want %q…", got, want)
	}
	// Expired early, the other says so (the CLI's, expired too, does not);
	// listing silences (which empties
	// the index of ended ones) takes nothing from the sweeper.
	for _, id := range []string{long.ID, cli.ID} {
		if _, err := store.Expire(ctx, testRules, id, "cli:kim", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.List(ctx, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if said, err := w.Sweep(ctx); err != nil || said != 1 {
		t.Fatalf("after expire: said %d, %v", said, err)
	}
	if got := n.all(); len(got) != 2 || !strings.Contains(got[1], "1700000000.000002: :alarm_clock: Snooze ended early") ||
		!strings.Contains(got[1], long.ID) {
		t.Errorf("said %q, want the early end in the second thread", got)
	}
	// Said once: nothing waits any more, a later pass says nothing, and
	// the CLI's silence, ended early, said nothing.
	if said, err := w.Sweep(ctx); err != nil || said != 0 || len(n.all()) != 2 || waiting() != 0 {
		t.Errorf("a later pass said %d (%v): %q; %d ends wait", said, err, n.all(), waiting())
	}
	if strings.Contains(logs.String(), "cust-secret") || !strings.Contains(logs.String(), `"silence_id":"`+brief.ID+`","rule":"burst"`) {
		t.Errorf("log:\n%s", logs.String())
	}
	if got := testutil.ToFloat64(counterOf(t, reg, "said")); got != 2 {
		t.Errorf("said = %v, want 2", got)
	}
}

func counterOf(t *testing.T, reg *prometheus.Registry, outcome string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "fraudwatch_silence_end_notes_total" && m.GetLabel()[0].GetValue() == outcome {
				return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	t.Fatalf("no fraudwatch_silence_end_notes_total{outcome=%q}", outcome)
	return nil
}

// Replicas sweeping at once say each end once between them; a replica
// that took an end and died leaves it to another when its lease ends.
func TestSilenceEndsSaidOnceAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	stores, _ := replicaStores(t, 3)
	n := &notes{}
	var ids []string
	for i := range 8 {
		sil, err := stores[0].Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": fmt.Sprint("c", i)},
			Thread: alert.Receipt{Channel: "C0ALERTS", TS: fmt.Sprintf("1700000000.%06d", i)}, For: time.Hour, Reason: "snoozed"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stores[0].Expire(ctx, testRules, sil.ID, "cli:kim", time.Now()); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sil.ID)
	}
	// One replica takes the first end and dies before saying it.
	taken, err := stores[2].EndedSilences(ctx, 700*time.Millisecond, 1)
	if err != nil || len(taken) != 1 {
		t.Fatalf("taken %+v, %v", taken, err)
	}
	var wg sync.WaitGroup
	for _, s := range stores[:2] {
		w := sweeper(t, silence.SweeperConfig{Batch: 3}, s, n, nil, nil)
		wg.Go(func() {
			for range 5 {
				if _, err := w.Sweep(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := len(n.all()); got != 7 {
		t.Fatalf("said %d ends, want the 7 not held: %q", got, n.all())
	}
	w := sweeper(t, silence.SweeperConfig{}, stores[0], n, nil, nil)
	testkit.WaitFor(t, 10*time.Second, "the dead replica's end said after its lease", func() bool {
		_, err := w.Sweep(ctx)
		return err == nil && len(n.all()) == 8
	})
	for _, id := range ids {
		count := 0
		for _, s := range n.all() {
			if strings.Contains(s, "(silence "+id+" expired)") {
				count++
			}
		}
		if count != 1 {
			t.Errorf("silence %s's end said %d times", id, count)
		}
	}
}

// An end the thread fails to take is tried again after its lease; one it
// refuses for good, or one that ended too long ago, is dropped, counted
// and logged, and never tried again.
func TestSilenceEndFailures(t *testing.T) {
	ctx := t.Context()
	stores, waiting := replicaStores(t, 1)
	store := stores[0]
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	n := &notes{fail: []error{errors.New("slack down"), alert.Permanent(errors.New("message_not_found"))}}
	w := sweeper(t, silence.SweeperConfig{Lease: 300 * time.Millisecond, Late: time.Hour}, store, n, slog.New(slog.NewJSONHandler(&logs, nil)), reg)
	expired := func(match string, at time.Time) silence.Silence {
		t.Helper()
		sil, err := store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": match},
			Thread: thread, For: 3 * time.Hour, Reason: "snoozed"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Expire(ctx, testRules, sil.ID, "cli:kim", at); err != nil {
			t.Fatal(err)
		}
		return sil
	}
	expired("c1", time.Now())
	// The first try fails (retried), the second is refused (given up).
	if said, _ := w.Sweep(ctx); said != 0 || testutil.ToFloat64(counterOf(t, reg, "failed")) != 1 {
		t.Fatalf("a failed note: said %d", said)
	}
	testkit.WaitFor(t, 5*time.Second, "the failed end tried again", func() bool {
		_, _ = w.Sweep(ctx)
		return testutil.ToFloat64(counterOf(t, reg, "given_up")) == 1
	})
	// Ended two hours ago (by the expirer's clock), past Late: dropped.
	expired("c2", time.Now().Add(-2*time.Hour))
	if said, err := w.Sweep(ctx); said != 0 || err != nil || testutil.ToFloat64(counterOf(t, reg, "late")) != 1 {
		t.Fatalf("a late end: said %d, %v", said, err)
	}
	if waiting() != 0 || len(n.all()) != 0 {
		t.Errorf("dropped ends wait to be said again (%d), or were said: %q", waiting(), n.all())
	}
	for _, want := range []string{"silence end not said in its thread yet", "silence end not said in its thread: refused",
		"silence end not said in its thread: it ended too long ago"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}

// A silence Redis refuses leaves no end to say.
func TestRefusedSilenceLeavesNoEnd(t *testing.T) {
	ctx := t.Context()
	stores, waiting := replicaStores(t, 1)
	store := stores[0]
	// Its end already past by Redis's clock: silence_add refuses it.
	if _, err := store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "c1"}, Thread: thread,
		For: time.Hour, Reason: "snoozed"}, time.Now().Add(-2*time.Hour)); err == nil {
		t.Fatal("a silence ended before it began was added")
	}
	if waiting() != 0 {
		t.Errorf("a refused silence's end waits to be said")
	}
}

// A replica whose reply to taking an end's lease is lost does not take it
// again and find its own lease (go-redis's ClusterClient resent it): the
// sweep fails, and another replica says the end once the lease ends.
func TestALostLeaseReplyIsNotResent(t *testing.T) {
	ctx := t.Context()
	prefix := redistest.Prefix(t)
	keys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	l := redistest.NewLossy("set", prefix)
	rdb := l.Client(t)
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	lossy := silence.NewStore(rdb, scripts, keys)
	sil, err := lossy.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "c1"},
		Thread: alert.Receipt{Channel: "C0ALERTS", TS: "1700000000.000001"}, For: time.Hour, Reason: "snoozed"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lossy.Expire(ctx, testRules, sil.ID, "cli:kim", time.Now()); err != nil {
		t.Fatal(err)
	}
	l.Arm()
	taken, err := lossy.EndedSilences(ctx, 500*time.Millisecond, 1)
	if _, reply := errors.AsType[redis.Error](err); err == nil || reply {
		t.Errorf("took %+v, %v; want the lost reply's error", taken, err)
	}
	if n := l.Sent(); n != 1 {
		t.Errorf("the lease was asked for %d times; want once", n)
	}
	plain := redistest.Client(t)
	others, err := lua.New(lua.Config{}, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &notes{}
	w := sweeper(t, silence.SweeperConfig{}, silence.NewStore(plain, others, keys), n, nil, nil)
	testkit.WaitFor(t, 10*time.Second, "the end said after the lease", func() bool {
		_, err := w.Sweep(ctx)
		return err == nil && len(n.all()) == 1
	})
}

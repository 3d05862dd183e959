package dispatch_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
)

// hashedGroup is a group value long enough that its keys use the group's
// hash, as values over 200 bytes do.
var hashedGroup = "card-" + strings.Repeat("9", 300)

// realAlert is a crossing as the engine publishes it: of a hashed group,
// with its order, currency, time and evidence.
func (e *testEnv) realAlert() alert.Alert {
	a := e.alert(hashedGroup, "evt-real")
	a.OrderID, a.Currency = "ord-real-1", "KRW"
	a.At = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	a.Evidence = []alert.Evidence{{OrderID: "ord-real-1", EventID: "evt-real", Amount: 700_000}, {OrderID: "ord-real-0", EventID: "evt-0", Amount: 600_000}}
	return a
}

// A copy of a real crossing with any field changed, read before the
// crossing, between the crossing and its alert, or after its alert, posts
// nothing of its own: it is dropped as unverified at once, and the real
// alert is posted once, with its real order and evidence.
func TestAForgedCopyPostsNothingOfItsOwn(t *testing.T) {
	changes := []struct {
		name  string
		forge func(a *alert.Alert)
	}{
		{"order", func(a *alert.Alert) { a.OrderID = "ord-VICTIM-777" }},
		{"evidence", func(a *alert.Alert) {
			a.Evidence = []alert.Evidence{{OrderID: "ord-VICTIM-777", EventID: "evt-real"}, {OrderID: "ord-VICTIM-778", EventID: "evt-0"}}
		}},
		{"evidence dropped", func(a *alert.Alert) { a.Evidence = nil }},
		{"at", func(a *alert.Alert) { a.At = a.At.Add(-time.Hour) }},
		{"currency", func(a *alert.Alert) { a.Currency = "USD" }},
		{"value", func(a *alert.Alert) { a.Current = 1 }},
		{"the values of its hashed group", func(a *alert.Alert) { a.GroupValues = []string{"customer_id=mallory2 …"} }},
		{"published_at", func(a *alert.Alert) { a.PublishedAt = a.PublishedAt.Add(time.Millisecond) }},
		{"unsealed, as an older version wrote alerts", func(a *alert.Alert) { a.PublishedAt = time.Time{} }},
		{"another definition's window", func(a *alert.Alert) { a.Window, a.Metric = time.Second, alert.Count }},
	}
	whens := []string{"before the crossing", "between the crossing and its alert", "after its alert"}
	for _, ch := range changes {
		for _, when := range whens {
			t.Run(ch.name+"/"+when, func(t *testing.T) {
				n := &captured{}
				env := testDispatcher(t, n, dispatch.DispatcherConfig{})
				env.knowRule()
				dead := &fakeDeadLetters{}
				env.d.SetDeadLetters(dead)
				real := env.realAlert()
				forged := real
				forged.GroupValues, forged.Evidence = slices.Clone(real.GroupValues), slices.Clone(real.Evidence)
				ch.forge(&forged)
				forgedMsg := kafka.Message{Topic: "alerts", Partition: 2, Offset: 1, Time: time.Now(), Value: encode(forged)}
				realMsg := kafka.Message{Topic: "alerts", Partition: 0, Offset: 1, Time: time.Now(), Value: encode(real)}
				steps := []func() error{
					func() error { env.cross(t, real); return nil },
					func() error { return handleOne(t.Context(), env.d, realMsg) },
				}
				at := slices.Index(whens, when)
				steps = slices.Insert(steps, at, func() error { return handleOne(t.Context(), env.d, forgedMsg) })
				for i, step := range steps {
					if err := step(); err != nil {
						t.Fatalf("step %d: %v; want nothing held", i, err)
					}
				}
				posts := n.posted()
				if len(posts) != 1 {
					t.Fatalf("posted %d alerts, want the real one once: %+v", len(posts), posts)
				}
				got := posts[0]
				if got.OrderID != real.OrderID || got.Currency != real.Currency || !got.At.Equal(real.At) || got.Current != real.Current ||
					!slices.Equal(got.GroupValues, real.GroupValues) || !slices.Equal(got.Evidence, real.Evidence) {
					t.Errorf("posted %+v, want the real crossing's order, time, value, values and evidence", got)
				}
				if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnverified); got != 1 {
					t.Errorf("dropped{unverified} = %v, want 1: the forgery", got)
				}
				if len(dead.whys) != 1 || !strings.HasPrefix(dead.whys[0], "alert unverified: ") {
					t.Errorf("dead letters %q, want the forgery's", dead.whys)
				}
			})
		}
	}
}

// A real alert whose group's values were cut for display (over 1 KiB)
// is posted with them: its seal vouches for them as published.
func TestAHashedGroupsCutValuesArePosted(t *testing.T) {
	n := &captured{}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{})
	env.knowRule()
	a := env.alert(strings.Repeat("v", 2000), "evt-1")
	a.GroupValues = []string{strings.Repeat("v", 1024) + "…"} // as rules cuts them
	if err := handleOne(t.Context(), env.d, env.message(t, a, 1)); err != nil {
		t.Fatal(err)
	}
	if posts := n.posted(); len(posts) != 1 || posts[0].GroupValues[0] != a.GroupValues[0] {
		t.Fatalf("posted %d alerts, want the crossing with its cut values", len(posts))
	}
}

// Messages of rules not in force that no crossing vouches for are dropped
// at once, as unverified: however many there are on a partition, none
// holds it for the unknown-rule grace, and the real alert behind them is
// posted without waiting.
func TestUnknownRuleForgeriesHoldNothing(t *testing.T) {
	n := &captured{}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{UnknownRuleGrace: time.Minute})
	env.knowRule()
	var msgs []kafka.Message
	for i, rule := range []string{"rule-from-nowhere", "rule-from-nowhere", "another-rule"} {
		f := env.alert("fraud-1", "evt-forged-"+string(rune('a'+i)))
		f.Rule, f.ID = rule, rule+"/"+f.EventID
		msgs = append(msgs, kafka.Message{Topic: "alerts", Offset: int64(i), Time: time.Now(), Value: encode(f)})
	}
	real := env.alert("fraud-1", "evt-1")
	msgs = append(msgs, env.message(t, real, 3))
	start := time.Now()
	done, err := env.d.HandleMessages(t.Context(), msgs)
	if err != nil || done != len(msgs) {
		t.Fatalf("HandleMessages = %d, %v; want all %d settled at once", done, err, len(msgs))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the batch took %v", took)
	}
	if posts := n.posted(); len(posts) != 1 || posts[0].EventID != "evt-1" {
		t.Fatalf("posted %+v, want the real alert", posts)
	}
	if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnverified); got != 3 {
		t.Errorf("dropped{unverified} = %v, want 3", got)
	}
}

// A crossing fraudwatch sealed, of a rule this replica does not know yet
// (a reload in progress), waits for the reload, and is then delivered.
func TestASealedCrossingOfARuleNotYetLoadedWaitsForIt(t *testing.T) {
	n := &captured{}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{UnknownRuleGrace: time.Minute})
	env.knowRule()
	a := env.alert("fraud-1", "evt-1")
	a.Rule, a.ID = "new-rule", "new-rule/evt-1"
	msg := env.message(t, a, 1)
	for range 2 {
		if err := handleOne(t.Context(), env.d, msg); err == nil {
			t.Fatal("the crossing of a rule not yet loaded was settled at once")
		}
	}
	env.d.SetRules(map[string]dispatch.RuleSettings{sampleAlert().Rule: settingsOf(sampleAlert()), "new-rule": settingsOf(a)})
	if err := handleOne(t.Context(), env.d, msg); err != nil {
		t.Fatalf("after the reload: %v", err)
	}
	if posts := n.posted(); len(posts) != 1 || posts[0].Rule != "new-rule" {
		t.Fatalf("posted %+v, want the new rule's crossing", posts)
	}
}

// withRetention replaces e's dispatcher by one whose delivery records and
// crossing marks live retention.
func (e *testEnv) withRetention(t *testing.T, n alert.Notifier, retention time.Duration) {
	t.Helper()
	scripts, err := lua.New(lua.Config{Retention: retention}, e.rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.scripts, e.reg = scripts, prometheus.NewRegistry()
	d, err := dispatch.NewDispatcher(dispatch.DispatcherConfig{KeyPrefix: e.pfx, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		n, scripts, nil, e.reg)
	if err != nil {
		t.Fatal(err)
	}
	e.d = d
	e.knowRule()
}

// A verbatim copy of a delivered alert, read once its delivery record has
// expired, is stale by its published_at, even though a later crossing of
// its group renewed the marks and its mark outlives the record; its Kafka
// timestamp, which its producer chose, does not count.
func TestAReplayPastItsRecordIsStale(t *testing.T) {
	const retention = 2 * time.Second
	n := &captured{}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{})
	env.withRetention(t, n, retention)
	real := env.alert("fraud-1", "evt-1")
	msg := env.message(t, real, 1)
	g, _ := env.keys.ParseGroup(real.Group)
	marks := env.keys.Marks(g, real.Rule+"."+real.Definition)
	env.rdb.Expire(t.Context(), marks, retention) // as the counting script leaves them
	if err := handleOne(t.Context(), env.d, msg); err != nil || len(n.posted()) != 1 {
		t.Fatalf("the alert: %v, %d posts", err, len(n.posted()))
	}
	record := env.keys.AlertRecord(g, real.Rule, real.EventID)
	deadline := time.Now().Add(10 * time.Second)
	for env.rdb.Exists(t.Context(), record).Val() == 1 || time.Since(real.PublishedAt) <= retention {
		if time.Now().After(deadline) {
			t.Fatal("the delivery record did not expire")
		}
		// The group crosses again and again: its marks live on.
		second := env.alert("fraud-1", "evt-2")
		env.cross(t, second)
		env.rdb.Expire(t.Context(), marks, retention)
		time.Sleep(100 * time.Millisecond)
	}
	if c, err := env.scripts.Crossing(t.Context(), marks, lua.IDOf(real.EventID), nil); err != nil || !c.Marked {
		t.Fatalf("the replayed crossing's mark is gone (%+v, %v): the test shows nothing", c, err)
	}
	replay := msg
	replay.Offset, replay.Time = 9, time.Now()
	if err := handleOne(t.Context(), env.d, replay); err != nil {
		t.Fatal(err)
	}
	if posts := n.posted(); len(posts) != 1 {
		t.Fatalf("the replay was posted: %d posts", len(posts))
	}
	if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedStale); got != 1 {
		t.Errorf("dropped{stale} = %v, want 1", got)
	}
}

// An alert written by a version before seals (no published_at) is taken,
// during a rolling upgrade, only while Redis holds its crossing's mark and
// no seal of its rule's definition and group, and then with only what
// Redis vouches for: its rule, group, event and value, under the rule in
// force. Its order, time, currency and evidence are not shown, nor the
// values of a hashed group; it is counted. It is taken only for an hour
// after fraudwatch began to seal alerts in its Redis.
func TestAnUnsealedAlertShowsOnlyWhatRedisVouchesFor(t *testing.T) {
	tests := []struct {
		name  string
		group string
		// crossed changes the alert as it crossed, message changes the
		// message of it.
		crossed, message func(env *testEnv, a *alert.Alert)
		dropped          string // "" when it is delivered
	}{
		{name: "a crossing of before the upgrade", group: "fraud-1"},
		{name: "of a hashed group", group: hashedGroup},
		{name: "without a definition, of a rule in force", group: "fraud-1", message: func(_ *testEnv, a *alert.Alert) { a.Definition = "" }},
		{name: "of a group whose alerts fraudwatch seals since", group: "fraud-1", message: func(env *testEnv, a *alert.Alert) {
			env.cross(t, env.alert("fraud-1", "evt-later"))
		}, dropped: dispatch.DroppedUnverified},
		{name: "crossed under a definition replaced since", group: "fraud-1", crossed: func(_ *testEnv, a *alert.Alert) { a.Definition = "0000ffff" },
			dropped: dispatch.DroppedUnverified},
		{name: "of a rule not in force", group: "fraud-1", crossed: func(_ *testEnv, a *alert.Alert) { a.Rule, a.ID = "gone-rule", "gone-rule/"+a.EventID },
			dropped: dispatch.DroppedUnknownRule},
		{name: "of no crossing", group: "fraud-1", message: func(_ *testEnv, a *alert.Alert) { a.EventID, a.ID = "evt-never", a.Rule+"/evt-never" },
			dropped: dispatch.DroppedUnverified},
		// Past the upgrade's hour an unsealed message is someone else's: read
		// between a new crossing's mark and its seal, it would otherwise be
		// posted in the real alert's stead.
		{name: "past an hour of seals", group: "fraud-1", message: func(env *testEnv, _ *alert.Alert) {
			since := time.Now().Add(-dispatch.UnsealedFor - time.Minute).UnixMilli()
			env.rdb.Set(t.Context(), env.keys.SealsSince(), since, 0)
		}, dropped: dispatch.DroppedUnverified},
		{name: "when sealing began is unreadable", group: "fraud-1", message: func(env *testEnv, _ *alert.Alert) {
			env.rdb.Set(t.Context(), env.keys.SealsSince(), "not a time", 0)
		}, dropped: dispatch.DroppedUnverified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &captured{}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{UnknownRuleGrace: time.Minute})
			env.knowRule()
			a := env.alert(tt.group, "evt-old")
			a.PublishedAt = time.Time{}
			a.OrderID, a.Currency, a.Evidence = "ord-old", "KRW", []alert.Evidence{{OrderID: "ord-old", EventID: "evt-old"}}
			a.At = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			if tt.crossed != nil {
				tt.crossed(env, &a)
			}
			env.cross(t, a) // its mark, as the old version's scripts wrote it
			if tt.message != nil {
				tt.message(env, &a)
			}
			msg := kafka.Message{Topic: "alerts", Offset: 1, Time: time.Now(), Value: encode(a)}
			read := time.Now()
			if err := handleOne(t.Context(), env.d, msg); err != nil {
				t.Fatalf("HandleMessages = %v, want it settled at once", err)
			}
			posts := n.posted()
			if tt.dropped != "" {
				if len(posts) != 0 || env.metric(t, "fraudwatch_alerts_dropped_total", "reason", tt.dropped) != 1 {
					t.Fatalf("posted %+v; want it dropped as %s", posts, tt.dropped)
				}
				return
			}
			if len(posts) != 1 {
				t.Fatalf("posted %d alerts, want 1", len(posts))
			}
			got := posts[0]
			if got.OrderID != "" || got.Currency != "" || len(got.Evidence) != 0 || got.At.Before(read.Add(-time.Second)) {
				t.Errorf("posted order %q, currency %q, evidence %v, at %v: want none of the message's", got.OrderID, got.Currency, got.Evidence, got.At)
			}
			if got.EventID != "evt-old" || got.Current != a.Current || got.Rule != a.Rule || got.Severity != sampleAlert().Severity {
				t.Errorf("posted %+v, want its rule, event and value", got)
			}
			wantValue := tt.group
			if tt.group == hashedGroup {
				wantValue = "(not shown)"
			}
			if got.GroupValues[0] != wantValue {
				t.Errorf("posted group values %q, want %q", got.GroupValues, wantValue)
			}
			if !strings.Contains(got.Description, "older fraudwatch") {
				t.Errorf("description %q does not say what is not shown", got.Description)
			}
			if got := env.metric(t, "fraudwatch_alerts_unsealed_total"); got != 1 {
				t.Errorf("fraudwatch_alerts_unsealed_total = %v, want 1", got)
			}
		})
	}
}

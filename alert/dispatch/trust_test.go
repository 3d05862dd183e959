package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// captured records the alerts a notifier was given.
type captured struct {
	mu     sync.Mutex
	alerts []alert.Alert
}

func (c *captured) Name() string { return "captured" }

func (c *captured) Notify(_ context.Context, a alert.Alert) (alert.Receipt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alerts = append(c.alerts, a)
	return alert.Receipt{}, nil
}

func (c *captured) posted() []alert.Alert {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]alert.Alert(nil), c.alerts...)
}

// A message of the alerts topic is posted only when Redis decided its
// crossing: its mark, written by the counting script in the call that
// decided it, names its rule's definition, its group and its event. A
// message whose group its values do not make is not trusted either: the
// keys use the group, the post would show the values.
func TestOnlyCrossingsRedisDecidedArePosted(t *testing.T) {
	tests := []struct {
		name    string
		forge   func(a *alert.Alert)
		dropped string // "" when it is posted
	}{
		{"the crossing as the engine wrote it", func(*alert.Alert) {}, ""},
		{"an event that never crossed", func(a *alert.Alert) { a.EventID, a.ID = "evt-never", a.Rule+"/evt-never" }, dispatch.DroppedUnverified},
		{"another group's values over the group that crossed", func(a *alert.Alert) { a.GroupValues = []string{"innocent-bob"} }, dispatch.DroppedMalformed},
		{"the values of a group that never crossed", func(a *alert.Alert) {
			a.GroupValues = []string{"innocent-bob"}
			a.Group = "innocent-bob"
		}, dispatch.DroppedUnverified},
		{"another definition of the rule", func(a *alert.Alert) { a.Definition = "0000ffff" }, dispatch.DroppedUnverified},
		{"a definition no rule has", func(a *alert.Alert) { a.Definition = "../x" }, dispatch.DroppedMalformed},
		{"a rule name with a dot", func(a *alert.Alert) { a.Rule += ".0badcafe" }, dispatch.DroppedMalformed},
		{"an unknown metric", func(a *alert.Alert) { a.Metric = "ratio" }, dispatch.DroppedMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &captured{}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{})
			env.knowRule()
			dead := &fakeDeadLetters{}
			env.d.SetDeadLetters(dead)
			real := env.alert("fraud-1", "evt-1")
			env.cross(t, real)
			forged := real
			tt.forge(&forged)
			before := env.keysUnder(t)
			msg := kafka.Message{Topic: "alerts", Partition: 3, Offset: 11, Time: time.Now(), Value: encode(forged)}
			if err := handleOne(t.Context(), env.d, msg); err != nil {
				t.Fatalf("HandleMessages = %v, want nil: a forged message must not hold its partition", err)
			}
			posts := n.posted()
			if tt.dropped == "" {
				if len(posts) != 1 || posts[0].GroupValues[0] != "fraud-1" {
					t.Fatalf("posted %+v, want the crossing", posts)
				}
				return
			}
			if len(posts) != 0 {
				t.Fatalf("posted %+v, want nothing", posts)
			}
			if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", tt.dropped); got != 1 {
				t.Errorf("dropped{%s} = %v, want 1", tt.dropped, got)
			}
			if len(dead.whys) != 1 || !strings.HasPrefix(dead.whys[0], "alert "+tt.dropped+": ") {
				t.Errorf("dead letters %q, want one, %s", dead.whys, tt.dropped)
			}
			// It wrote nothing: no cooldown, no record, no silence.
			if after := env.keysUnder(t); !equalSets(before, after) {
				t.Errorf("keys before %v, after %v: a forged message wrote to Redis", before, after)
			}
			// The real crossing of the group it named is still posted.
			if err := handleOne(t.Context(), env.d, env.message(t, real, 12)); err != nil {
				t.Fatal(err)
			}
			if posts := n.posted(); len(posts) != 1 || posts[0].EventID != "evt-1" {
				t.Errorf("posted %+v, want the real crossing", posts)
			}
		})
	}
}

// A dispatcher reads a crossing's marks among the engine's counting
// buckets (redis.buckets), and, with fewer than all of them, also where a
// replica with all of them marked it: a version before the setting, whose
// alerts may still wait in the alerts topic at the upgrade.
func TestCrossingsAreReadAmongTheCountingBuckets(t *testing.T) {
	tests := []struct {
		name            string
		dispatcher, was int // buckets of the dispatcher, and of the engine that marked the crossing
		posted          bool
	}{
		{"16, marked among 16", 16, 16, true},
		{"16, marked among all 256 before the upgrade", 16, 256, true},
		{"256, marked among 256", 256, 256, true},
		{"256, marked among 16", 256, 16, false},
		{"100, marked among 16", 100, 16, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &captured{}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{Buckets: tt.dispatcher})
			env.knowRule()
			a := env.alert("fraud-1", "evt-1")
			marked, err := lua.NewKeysIn(env.pfx, tt.was)
			if err != nil {
				t.Fatal(err)
			}
			g, err := marked.ParseGroup(a.Group)
			if err != nil {
				t.Fatal(err)
			}
			if mine, _ := env.keys.ParseGroup(a.Group); tt.dispatcher != tt.was && mine.Tag() == g.Tag() {
				t.Fatalf("the group is in bucket %s among both %d and %d: the case tests nothing", g.Tag(), tt.dispatcher, tt.was)
			}
			marks := marked.Marks(g, a.Rule+"."+a.Definition)
			id := lua.IDOf(a.EventID)
			if err := env.rdb.HSet(t.Context(), marks, string(id[:]), a.Current).Err(); err != nil {
				t.Fatal(err)
			}
			env.seal(t, marks, a)
			if err := handleOne(t.Context(), env.d, kafka.Message{Topic: "alerts", Offset: 1, Time: time.Now(), Value: encode(a)}); err != nil {
				t.Fatal(err)
			}
			if got := len(n.posted()); (got == 1) != tt.posted || got > 1 {
				t.Fatalf("posted %d, want posted %v", got, tt.posted)
			}
			if !tt.posted {
				if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnverified); got != 1 {
					t.Errorf("dropped{unverified} = %v, want 1", got)
				}
			}
		})
	}
}

// keysUnder lists the keys under the test's prefix.
func (e *testEnv) keysUnder(t *testing.T) []string {
	t.Helper()
	return redistest.Keys(t, e.rdb, e.pfx+"*") // every master of a cluster
}

func equalSets(a, b []string) bool {
	set := map[string]bool{}
	for _, k := range a {
		set[k] = true
	}
	if len(a) != len(b) {
		return false
	}
	for _, k := range b {
		if !set[k] {
			return false
		}
	}
	return true
}

// Everything the rule decides comes from the rule in force, and the value
// from the crossing's mark: a message cannot make a real crossing read as
// another severity or threshold, and what it says of the rule's
// definition (metric, window, group_by) gives way to the rule's while the
// definition is the rule's.
func TestTheRuleAndTheMarkDecideWhatAnAlertSays(t *testing.T) {
	n := &captured{}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{})
	env.knowRule()
	real := env.alert("fraud-1", "evt-1")
	env.cross(t, real)
	// Not covered by its seal: the rule in force says them.
	forged := real
	forged.Severity, forged.Threshold, forged.Description = alert.SeverityInfo, 1, "nothing to see"
	forged.Mode, forged.Channel, forged.Cooldown = alert.ModeShadow, "#elsewhere", time.Second
	// Sealed as the engine wrote them, under the rule's definition.
	forged.Metric, forged.WindowType, forged.Window, forged.GroupBy = alert.Count, alert.Sliding, time.Second, []string{"ip"}
	env.cross(t, forged)
	// The mark holds another value than the message says.
	g, _ := env.keys.ParseGroup(real.Group)
	id := lua.IDOf(real.EventID)
	env.rdb.HSet(t.Context(), env.keys.Marks(g, real.Rule+"."+real.Definition), string(id[:]), real.Current+5)
	if err := handleOne(t.Context(), env.d, kafka.Message{Topic: "alerts", Time: time.Now(), Value: encode(forged)}); err != nil {
		t.Fatal(err)
	}
	posts := n.posted()
	if len(posts) != 1 {
		t.Fatalf("posted %d alerts, want 1", len(posts))
	}
	got, want := posts[0], sampleAlert()
	if got.Severity != want.Severity || got.Metric != want.Metric || got.WindowType != want.WindowType || got.Window != want.Window ||
		got.Threshold != want.Threshold || got.Description != want.Description || got.GroupBy[0] != "card_fingerprint" ||
		got.Channel != want.Channel || got.Mode != want.Mode || got.Cooldown != want.Cooldown {
		t.Errorf("posted %+v, want the rule's severity, metric, window, threshold, mode, channel and cooldown", got)
	}
	if got.Current != real.Current+5 {
		t.Errorf("posted value %d, want %d, the crossing's mark", got.Current, real.Current+5)
	}
}

// A sealed alert of a rule not in force is retried for the grace, timed
// from when it was published or from when this process first read it,
// whichever is sooner, whatever its Kafka timestamp says: a producer's
// timestamp an hour ahead must not hold the partition for an hour, nor a
// copy of a crossing published long ago hold it at all.
func TestUnknownRuleGraceRunsFromPublishOrFirstRead(t *testing.T) {
	const grace = 300 * time.Millisecond
	for _, ts := range []struct {
		name      string
		at        time.Time // the Kafka timestamp
		published time.Duration
		waits     bool
	}{
		{"a timestamp 50 minutes ahead", time.Now().Add(50 * time.Minute), 0, true},
		{"a timestamp 2 minutes old", time.Now().Add(-2 * time.Minute), 0, true},
		{"published by a clock 30 s ahead", time.Now(), 30 * time.Second, true},
		{"published 2 minutes ago", time.Now(), -2 * time.Minute, false},
	} {
		t.Run(ts.name, func(t *testing.T) {
			env := testDispatcher(t, &captured{}, dispatch.DispatcherConfig{UnknownRuleGrace: grace})
			env.knowRule()
			a := env.alert("g1", "evt-1")
			a.Rule, a.PublishedAt = "not-yet", a.PublishedAt.Add(ts.published)
			msg := env.message(t, a, 5)
			msg.Time = ts.at
			first := time.Now()
			if err := handleOne(t.Context(), env.d, msg); (err != nil) != ts.waits {
				t.Fatalf("HandleMessages = %v; want it held: %v", err, ts.waits)
			}
			deadline := time.Now().Add(10 * time.Second)
			for ts.waits && handleOne(t.Context(), env.d, msg) != nil {
				if time.Now().After(deadline) {
					t.Fatal("the alert of an unknown rule held its partition past the grace")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if a.PublishedAt.Before(first) {
				first = a.PublishedAt // the sooner of the two
			}
			if waited := time.Since(first); ts.waits && waited < grace {
				t.Errorf("dropped after %v, before the grace of %v", waited, grace)
			}
			if got := env.metric(t, "fraudwatch_alerts_dropped_total", "reason", dispatch.DroppedUnknownRule); got != 1 {
				t.Errorf("dropped{unknown_rule} = %v, want 1", got)
			}
		})
	}
}

// A crossing made just before a reload removed its rule is delivered under
// the rule's last settings for UnknownRuleGrace after the removal; after
// that, and for a rule never in force, it waits out the grace and is
// dropped. A rules file that toggles a rule must not stall its partition.
func TestARemovedRuleIsDeliveredForTheGrace(t *testing.T) {
	const grace = 2 * time.Second
	tests := []struct {
		name      string
		reloads   func(env *testEnv)
		delivered bool
	}{
		{"removed a moment ago", func(env *testEnv) { env.d.SetRules(map[string]dispatch.RuleSettings{}) }, true},
		{"removed, back, removed again", func(env *testEnv) {
			env.d.SetRules(map[string]dispatch.RuleSettings{})
			env.knowRule()
			env.d.SetRules(map[string]dispatch.RuleSettings{})
		}, true},
		{"never in force", func(env *testEnv) { env.d.SetRules(map[string]dispatch.RuleSettings{"other": {}}) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &captured{}
			env := testDispatcher(t, n, dispatch.DispatcherConfig{UnknownRuleGrace: grace})
			if tt.delivered {
				env.knowRule()
			}
			a := env.alert("fraud-1", "evt-1")
			env.cross(t, a)
			tt.reloads(env)
			err := handleOne(t.Context(), env.d, env.message(t, a, 7))
			if tt.delivered {
				if err != nil {
					t.Fatalf("HandleMessages = %v, want the alert of a rule just removed delivered", err)
				}
				if posts := n.posted(); len(posts) != 1 || posts[0].Severity != a.Severity {
					t.Fatalf("posted %+v, want the crossing under the rule's last settings", posts)
				}
				return
			}
			if err == nil || len(n.posted()) != 0 {
				t.Fatalf("HandleMessages = %v, posted %d: an alert of a rule never in force is retried first", err, len(n.posted()))
			}
		})
	}
}

// Past the grace, a removed rule is forgotten: an alert of it published
// meanwhile waits, as one of a rule never in force does, and is then
// dropped.
func TestARemovedRuleIsForgottenAfterTheGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	n := &captured{}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{UnknownRuleGrace: grace})
	env.knowRule()
	a := env.alert("fraud-1", "evt-1")
	env.cross(t, a)
	env.d.SetRules(map[string]dispatch.RuleSettings{})
	removed := time.Now()
	// The first read after the grace since the removal.
	for time.Since(removed) <= grace {
		time.Sleep(20 * time.Millisecond)
	}
	// Published just now, by a replica that still had the rule.
	a.PublishedAt = time.UnixMilli(time.Now().UnixMilli())
	if err := handleOne(t.Context(), env.d, env.message(t, a, 7)); err == nil {
		t.Fatal("an alert of a rule removed past the grace was delivered at once")
	}
	if len(n.posted()) != 0 {
		t.Fatalf("posted %+v", n.posted())
	}
}

// After a reload lowers a threshold, the next alert's description says the
// new one, as its threshold field does, whatever the message says: the
// dispatcher renders it from the rule in force.
func TestDescriptionFollowsTheRuleInForce(t *testing.T) {
	n := &captured{}
	env := testDispatcher(t, n, dispatch.DispatcherConfig{})
	rule := settingsOf(sampleAlert())
	rule.Description = "{threshold} or more paid with one card within {window}"
	env.d.SetRules(map[string]dispatch.RuleSettings{sampleAlert().Rule: rule})
	before := env.alert("card-1", "evt-1")
	before.Description = "KRW 1,000,000 or more paid with one card within 10m" // as the engine rendered it
	if err := handleOne(t.Context(), env.d, env.message(t, before, 1)); err != nil {
		t.Fatal(err)
	}

	rule.Threshold = 700_000 // the reload
	env.d.SetRules(map[string]dispatch.RuleSettings{sampleAlert().Rule: rule})
	after := env.alert("card-2", "evt-2")
	after.Description = before.Description // crossed before the reload reached the engine
	if err := handleOne(t.Context(), env.d, env.message(t, after, 2)); err != nil {
		t.Fatal(err)
	}
	posts := n.posted()
	if len(posts) != 2 {
		t.Fatalf("posted %d alerts, want 2", len(posts))
	}
	for i, want := range []string{
		"KRW 1,000,000 or more paid with one card within 10m",
		"KRW 700,000 or more paid with one card within 10m",
	} {
		if posts[i].Description != want {
			t.Errorf("alert %d says %q, want %q (threshold %d)", i+1, posts[i].Description, want, posts[i].Threshold)
		}
	}
}

package lua

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// lifeKeys are the keys of one alert of a test's (rule, group), all in
// the {t} hash tag, and its record for receiver.
func lifeKeys(prefix, id, receiver string) AlertClaim {
	cd := prefix + ":{t}:cd"
	c := testClaim(cd, prefix+":{t}:rec:"+id+":"+receiver, id, time.Hour)
	c.Claimant = "alerts/" + receiver + "/" + id
	return c
}

// The send decision is the alert's: a receiver whose group comes to an
// alert after its cooldown ended and another alert took it sends it as
// the first receiver did; the later alert, suppressed for the first, is
// suppressed for it too, whatever the cooldown says by then.
func TestEveryReceiverFollowsTheFirstDecision(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	claim := func(id, receiver string) Claim {
		t.Helper()
		got, err := s.ClaimAlert(ctx, lifeKeys(prefix, id, receiver))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := claim("r/x", "slack"); got != ClaimSend {
		t.Fatalf("x at slack: %v, want send", got)
	}
	if got := claim("r/y", "slack"); got != ClaimSuppressed {
		t.Fatalf("y at slack: %v, want suppressed (x holds the cooldown)", got)
	}
	rdb.Del(ctx, prefix+":{t}:cd") // x's cooldown ends
	if got := claim("r/z", "slack"); got != ClaimSend {
		t.Fatalf("z at slack: %v, want send", got)
	}
	// The pager's group lags: it comes to x while z holds the cooldown,
	// and to y while nobody does.
	if got := claim("r/x", "pager"); got != ClaimSend {
		t.Errorf("x at the pager: %v, want send, as at slack", got)
	}
	rdb.Del(ctx, prefix+":{t}:cd")
	if got := claim("r/y", "pager"); got != ClaimSuppressed {
		t.Errorf("y at the pager: %v, want suppressed, as at slack", got)
	}
	if n := rdb.Exists(ctx, prefix+":{t}:cd").Val(); n != 0 {
		t.Error("a claim that followed a decision took the cooldown")
	}
}

// A permanent failure at one receiver gives the cooldown back only when no
// other receiver of the alert sent it or holds its send.
func TestAFailureKeepsTheCooldownAnotherReceiverShows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		other  string // what the other receiver did: "sent", "pending", or "" (never claimed)
		holder bool   // the cooldown stays after the failure
	}{
		{"other sent", "sent", true},
		{"other pending", "pending", true},
		{"other failed too", "failed", false},
		{"no other", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			hook, pager := lifeKeys(prefix, "r/a", "hook"), lifeKeys(prefix, "r/a", "pager")
			settle := func(c AlertClaim, end Ending) {
				t.Helper()
				err := s.SettleAlerts(ctx, end, Settlement{CooldownKey: c.CooldownKey, RecordKey: c.RecordKey, AlertKey: c.AlertKey, ID: c.ID, Claimant: c.Claimant})
				if err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range []AlertClaim{hook, pager} {
				if i == 1 && tc.other == "" {
					continue
				}
				if got, err := s.ClaimAlert(ctx, c); err != nil || got != ClaimSend {
					t.Fatalf("claim at %s: %v, %v", c.RecordKey, got, err)
				}
			}
			switch tc.other {
			case "sent":
				settle(pager, SettleSent)
			case "failed":
				settle(pager, SettleFailed)
			}
			settle(hook, SettleFailed)
			settle(hook, SettleFailed) // a redelivery of the failure counts once
			if held := rdb.Exists(ctx, hook.CooldownKey).Val() == 1; held != tc.holder {
				t.Errorf("cooldown held %v after the hook's failure, want %v", held, tc.holder)
			}
		})
	}
}

// The first claim that decides to send opens the alert's life with its
// JSON; alert_life changes it as docs/alerts.md (Lifecycle) says.
func TestAnAlertsLife(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	c := lifeKeys(prefix, "r/a", "slack")
	c.Alert = []byte(`{"id":"r/a"}`)
	if _, _, err := s.ChangeLife(ctx, c.AlertKey, "acknowledge", "cli:ann"); !errors.Is(err, ErrNoLife) {
		t.Fatalf("ack before the claim: %v, want ErrNoLife", err)
	}
	before := time.Now().Add(-time.Second)
	if got, err := s.ClaimAlert(ctx, c); err != nil || got != ClaimSend {
		t.Fatalf("claim: %v, %v", got, err)
	}
	l, err := s.Life(ctx, c.AlertKey)
	if err != nil || l.Status != "open" || string(l.Alert) != `{"id":"r/a"}` || l.Decision != "send" || l.OpenedAt.Before(before) || l.Version != 0 {
		t.Fatalf("life after the claim %+v, %v", l, err)
	}
	ttl := rdb.TTL(ctx, c.AlertKey).Val()
	steps := []struct {
		op, who string
		changed bool
		status  string
		version int64
		check   func(Life) bool
	}{
		{"assign", "slack:U1", true, "open", 1, func(l Life) bool { return l.Assignee == "slack:U1" }},
		{"acknowledge", "slack:U2", true, "acknowledged", 2, func(l Life) bool { return l.AckedBy == "slack:U2" && !l.AckedAt.IsZero() }},
		{"acknowledge", "cli:bob", false, "acknowledged", 2, func(l Life) bool { return l.AckedBy == "slack:U2" }}, // the first stays
		{"assign", "slack:U1", false, "acknowledged", 2, func(l Life) bool { return l.Assignee == "slack:U1" }},
		{"assign", "cli:bob", true, "acknowledged", 3, func(l Life) bool { return l.Assignee == "cli:bob" }}, // replaced
		{"resolve", "cli:bob", true, "resolved", 4, func(l Life) bool { return l.ResolvedBy == "cli:bob" && l.AckedBy == "slack:U2" }},
		{"acknowledge", "cli:eve", false, "resolved", 4, func(l Life) bool { return l.AckedBy == "slack:U2" }}, // final
		{"resolve", "cli:eve", false, "resolved", 4, func(l Life) bool { return l.ResolvedBy == "cli:bob" }},
		{"assign", "cli:eve", false, "resolved", 4, func(l Life) bool { return l.Assignee == "cli:bob" }},
		// A label comes after resolving; the same label again is
		// unchanged, whoever gives it; another replaces it.
		{"label_fraud", "slack:U2", true, "resolved", 5, func(l Life) bool {
			return l.Label == "fraud" && l.LabelledBy == "slack:U2" && !l.LabelledAt.Before(l.ResolvedAt)
		}},
		{"label_fraud", "cli:eve", false, "resolved", 5, func(l Life) bool { return l.LabelledBy == "slack:U2" }},
		{"label_legit", "cli:eve", true, "resolved", 6, func(l Life) bool { return l.Label == "legit" && l.LabelledBy == "cli:eve" }},
		{"label_unclear", "cli:eve", true, "resolved", 7, func(l Life) bool { return l.Label == "unclear" }},
		{"resolve", "cli:eve", false, "resolved", 7, func(l Life) bool { return l.Label == "unclear" && l.ResolvedBy == "cli:bob" }},
	}
	for i, st := range steps {
		l, changed, err := s.ChangeLife(ctx, c.AlertKey, st.op, st.who)
		if err != nil || changed != st.changed || l.Status != st.status || l.Version != st.version || !st.check(l) {
			t.Fatalf("step %d, %s by %s: %+v changed=%v, %v", i, st.op, st.who, l, changed, err)
		}
	}
	if got := rdb.TTL(ctx, c.AlertKey).Val(); got > ttl || got < ttl-time.Minute {
		t.Errorf("TTL %v after the changes, %v before: want it kept", got, ttl)
	}
	// A suppressed alert has a decision, but no life.
	other := lifeKeys(prefix, "r/b", "slack")
	other.Alert = []byte(`{"id":"r/b"}`)
	if got, err := s.ClaimAlert(ctx, other); err != nil || got != ClaimSuppressed {
		t.Fatalf("b: %v, %v", got, err)
	}
	if _, _, err := s.ChangeLife(ctx, other.AlertKey, "acknowledge", "cli:ann"); !errors.Is(err, ErrNoLife) {
		t.Errorf("ack of a suppressed alert: %v, want ErrNoLife", err)
	}
}

// Each receiver's record keeps the version of the life it shows, only
// forward; no record is made for a receiver that has none. The time to
// acknowledge is observed by one reader only.
func TestShownAndObserved(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	c := lifeKeys(prefix, "r/a", "slack")
	c.Alert = []byte(`{}`)
	if _, err := s.ClaimAlert(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		v    int64
		want bool
	}{{2, true}, {1, false}, {2, false}, {3, true}} {
		if got, err := s.ShowLife(ctx, c.RecordKey, st.v); err != nil || got != st.want {
			t.Errorf("show %d: %v, %v; want %v", st.v, got, err, st.want)
		}
	}
	if rec, _ := s.Record(ctx, c.RecordKey, ""); rec.Shown != 3 {
		t.Errorf("shown %d, want 3", rec.Shown)
	}
	if got, err := s.ShowLife(ctx, c.RecordKey+":none", 1); err != nil || got || rdb.Exists(ctx, c.RecordKey+":none").Val() != 0 {
		t.Errorf("show without a record: %v, %v; want false, nothing written", got, err)
	}
	if _, _, first, err := s.ObserveAck(ctx, c.AlertKey); err != nil || first {
		t.Fatalf("observe before the ack: %v, %v", first, err)
	}
	if _, _, err := s.ChangeLife(ctx, c.AlertKey, "acknowledge", "cli:ann"); err != nil {
		t.Fatal(err)
	}
	firsts := 0
	for range 3 {
		opened, acked, first, err := s.ObserveAck(ctx, c.AlertKey)
		if err != nil {
			t.Fatal(err)
		}
		if first {
			firsts++
			if opened.IsZero() || acked.Before(opened) {
				t.Errorf("observed opened %v, acked %v", opened, acked)
			}
		}
	}
	if firsts != 1 {
		t.Errorf("%d readers observed the ack, want 1", firsts)
	}
	if _, _, first, err := s.ObserveAck(ctx, prefix+":{t}:none"); err != nil || first || rdb.Exists(ctx, prefix+":{t}:none").Val() != 0 {
		t.Errorf("observe without a hash: %v, %v; want nothing, nothing written", first, err)
	}
}

// The index of open alerts lists them newest first with their refs, keeps
// an alert's first place, and stays within its bounds of size and age.
func TestTheIndexOfOpenAlerts(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	index, refs := prefix+":{alerts}:open", prefix+":{alerts}:refs"
	for i := range 5 {
		id := fmt.Sprint("r/e", i)
		if err := s.IndexAlert(ctx, index, refs, id, `{"n":`+strconv.Itoa(i)+`}`, 3, time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // a score of its own
	}
	got, err := s.IndexedAlerts(ctx, index, refs, 10)
	if err != nil || len(got) != 3 || got[0].ID != "r/e4" || got[2].ID != "r/e2" || got[0].Ref != `{"n":4}` {
		t.Fatalf("indexed %+v, %v; want the newest 3, newest first", got, err)
	}
	if err := s.IndexAlert(ctx, index, refs, "r/e2", `{"n":2}`, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.IndexedAlerts(ctx, index, refs, 10); again[2].ID != "r/e2" || !again[2].At.Equal(got[2].At) {
		t.Errorf("added again, e2 is %+v, want its first place", again)
	}
	if rdb.HLen(ctx, refs).Val() != 3 {
		t.Errorf("%d refs kept, want those of the 3 indexed", rdb.HLen(ctx, refs).Val())
	}
	if err := s.Unindex(ctx, index, refs, "r/e3"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.IndexedRef(ctx, refs, "r/e3"); ok || err != nil {
		t.Errorf("r/e3 still indexed: %v, %v", ok, err)
	}
	if ref, ok, err := s.IndexedRef(ctx, refs, "r/e4"); !ok || err != nil || ref != `{"n":4}` {
		t.Errorf("r/e4: %q, %v, %v", ref, ok, err)
	}
	// Entries older than their lifetime go with the next add.
	rdb.ZAdd(ctx, index, redisZ(float64(time.Now().Add(-2*time.Hour).UnixMilli()), "r/old"))
	rdb.HSet(ctx, refs, "r/old", "{}")
	if err := s.IndexAlert(ctx, index, refs, "r/e5", "{}", 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	if rdb.ZScore(ctx, index, "r/old").Err() == nil || rdb.HExists(ctx, refs, "r/old").Val() {
		t.Error("an entry older than the index's lifetime stayed")
	}
	if ttl := rdb.TTL(ctx, index).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("index TTL %v, want at most its lifetime", ttl)
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

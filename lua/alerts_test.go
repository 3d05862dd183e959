package lua

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestAlertClaimAndSettle(t *testing.T) {
	type step struct {
		do     string // claim | sent | failed
		id     string
		want   Claim
		holder string // cooldown value after the step ("" = none)
	}
	tests := []struct {
		name     string
		cooldown time.Duration
		steps    []step
	}{
		{"first alert takes the cooldown, the next is suppressed", time.Hour, []step{
			{"claim", "a1", ClaimSend, "a1"},
			{"sent", "a1", 0, "a1"},
			{"claim", "a2", ClaimSuppressed, "a1"},
		}},
		{"a redelivered claim before sending is still ours", time.Hour, []step{
			{"claim", "a1", ClaimSend, "a1"},
			{"claim", "a1", ClaimSend, "a1"},
		}},
		{"a redelivery after sending is not posted again", time.Hour, []step{
			{"claim", "a1", ClaimSend, "a1"},
			{"sent", "a1", 0, "a1"},
			{"claim", "a1", ClaimSent, "a1"},
		}},
		{"a suppressed alert stays suppressed", time.Hour, []step{
			{"claim", "a1", ClaimSend, "a1"},
			{"claim", "a2", ClaimSuppressed, "a1"},
			{"failed", "a1", 0, ""}, // a1 gives the cooldown back
			{"claim", "a2", ClaimSuppressed, ""},
		}},
		{"a failed alert gives its cooldown back", time.Hour, []step{
			{"claim", "a1", ClaimSend, "a1"},
			{"failed", "a1", 0, ""},
			{"claim", "a1", ClaimFailed, ""},
			{"claim", "a3", ClaimSend, "a3"},
		}},
		{"failing never takes another alert's cooldown away", time.Hour, []step{
			{"claim", "a1", ClaimSend, "a1"},
			{"failed", "a9", 0, "a1"},
		}},
		{"without a cooldown every alert is sent, once", 0, []step{
			{"claim", "a1", ClaimSend, ""},
			{"sent", "a1", 0, ""},
			{"claim", "a2", ClaimSend, ""},
			{"claim", "a1", ClaimSent, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			cooldown := prefix + ":{t}:cooldown"
			record := func(id string) string { return prefix + ":{t}:alert:" + id }
			for i, st := range tt.steps {
				switch st.do {
				case "claim":
					got, err := s.ClaimAlert(ctx, testClaim(cooldown, record(st.id), st.id, tt.cooldown))
					if err != nil || got != st.want {
						t.Fatalf("step %d: claim %s = %v, %v; want %v", i, st.id, got, err, st.want)
					}
				default:
					if err := settleOne(ctx, s, cooldown, record(st.id), st.id, st.do == "sent"); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				if holder := rdb.Get(ctx, cooldown).Val(); holder != st.holder {
					t.Fatalf("step %d: cooldown held by %q, want %q", i, holder, st.holder)
				}
			}
			if tt.cooldown > 0 && rdb.Exists(ctx, cooldown).Val() == 1 {
				if ttl := rdb.TTL(ctx, cooldown).Val(); ttl <= 0 || ttl > tt.cooldown {
					t.Fatalf("cooldown TTL = %v, want (0, %v]", ttl, tt.cooldown)
				}
			}
		})
	}
}

// A digest's alerts are recorded together, each on its own keys (groups
// of other hash tags) with the digest's receipt, the cooldowns of failed
// ones given back.
func TestSettleAlertsRecordsEach(t *testing.T) {
	for _, sent := range []bool{true, false} {
		s, rdb, prefix := newScripts(t)
		ctx := t.Context()
		var alerts []Settlement
		for _, tag := range []string{"a", "b", "c"} {
			c := testClaim(prefix+":{"+tag+"}:cd", prefix+":{"+tag+"}:rec", "r/"+tag, time.Hour)
			c.Claimant = "alerts/" + tag + "/7"
			if got, err := s.ClaimAlert(ctx, c); err != nil || got != ClaimSend {
				t.Fatalf("claim %s = %v, %v", c.ID, got, err)
			}
			a := Settlement{CooldownKey: c.CooldownKey, RecordKey: c.RecordKey, AlertKey: c.AlertKey, ID: c.ID, Claimant: c.Claimant}
			if sent {
				a.Receipt = `{"channel":"C1","ts":"1.2"}`
			}
			alerts = append(alerts, a)
		}
		// The first is still loaded by SHA; after a flush the pipeline's
		// calls fall back to EVAL.
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		end := SettleSent
		if !sent {
			end = SettleFailed
		}
		if err := s.SettleAlerts(ctx, end, alerts...); err != nil {
			t.Fatal(err)
		}
		want, claim, holders := "sent", ClaimSent, int64(3)
		if !sent {
			want, claim, holders = "failed", ClaimFailed, 0
		}
		for _, a := range alerts {
			rec, err := s.Record(ctx, a.RecordKey, a.RecordKey+":legacy")
			if err != nil || rec.State != want || rec.Receipt != a.Receipt || rec.Claimant != a.Claimant {
				t.Errorf("sent=%v: %s recorded %+v, %v; want %s with its receipt and claimant", sent, a.ID, rec, err, want)
			}
			c := testClaim(a.CooldownKey, a.RecordKey, a.ID, time.Hour)
			c.Claimant = "alerts/9/9" // a copy elsewhere
			if got, err := s.ClaimAlert(ctx, c); err != nil || got != claim {
				t.Errorf("sent=%v: claim %s again = %v, %v; want %v", sent, a.ID, got, err, claim)
			}
		}
		var n int64
		for _, a := range alerts { // one by one: other slots on a cluster
			n += rdb.Exists(ctx, a.CooldownKey).Val()
		}
		if n != holders {
			t.Errorf("sent=%v: %d cooldowns held, want %d", sent, n, holders)
		}
	}
	s, _, prefix := newScripts(t)
	for _, bad := range []Settlement{
		{CooldownKey: prefix + ":{a}:cd", RecordKey: prefix + ":{a}:rec", AlertKey: prefix + ":{a}:h", Claimant: "c"},
		{CooldownKey: prefix + ":{a}:cd", RecordKey: prefix + ":{a}:rec", AlertKey: prefix + ":{a}:h", ID: "a"},
		{CooldownKey: prefix + ":{a}:cd", RecordKey: prefix + ":{a}:rec", AlertKey: prefix + ":{a}:h", ID: "a", Claimant: "c", Receipt: strings.Repeat("r", MaxReceipt+1)},
	} {
		if err := s.SettleAlerts(t.Context(), SettleSent, bad); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("%+v: err = %v, want ErrInvalidArguments", bad, err)
		}
	}
	bad := Settlement{CooldownKey: prefix + ":{a}:cd", RecordKey: prefix + ":{a}:rec", AlertKey: prefix + ":{a}:h", ID: "a", Claimant: "c", Receipt: "r"}
	if err := s.SettleAlerts(t.Context(), SettleFailed, bad); !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("a failed alert's receipt: err = %v, want ErrInvalidArguments", err)
	}
}

// One claim wins, whatever the number of copies: a pending record held by
// another claimant answers ClaimElsewhere, the same claimant (its message
// delivered again after a crash) sends again, and a claim handed over to
// the parked alerts is theirs alone.
func TestClaimsAreExclusive(t *testing.T) {
	type step struct {
		do       string // claim | sent | failed | parked
		claimant string
		want     Claim
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"copies on other partitions while the first is pending", []step{
			{"claim", "alerts/0/5", ClaimSend},
			{"claim", "alerts/1/9", ClaimElsewhere},
			{"claim", "alerts/2/3", ClaimElsewhere},
			{"claim", "alerts/0/5", ClaimSend}, // the claimant's message again: a crash mid-send
			{"sent", "alerts/0/5", 0},
			{"claim", "alerts/1/9", ClaimSent},
		}},
		{"a failed claimant's copies are answered failed", []step{
			{"claim", "alerts/0/5", ClaimSend},
			{"failed", "alerts/0/5", 0},
			{"claim", "alerts/1/9", ClaimFailed},
		}},
		{"parked: the claim passes to the parked alerts", []step{
			{"claim", "alerts/0/5", ClaimSend},
			{"parked", "alerts/0/5", 0},
			{"claim", "alerts/0/5", ClaimElsewhere}, // its message again, after the park
			{"claim", ParkedClaimant, ClaimSend},
			{"claim", "alerts/1/9", ClaimElsewhere},
			{"sent", ParkedClaimant, 0},
			{"claim", "alerts/0/5", ClaimSent},
		}},
		{"a handover by a claimant that does not hold the claim changes nothing", []step{
			{"claim", "alerts/0/5", ClaimSend},
			{"parked", "alerts/1/9", 0},
			{"claim", ParkedClaimant, ClaimElsewhere},
			{"claim", "alerts/0/5", ClaimSend},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, prefix := newScripts(t)
			ctx := t.Context()
			cooldown, record := prefix+":{t}:cd", prefix+":{t}:rec"
			for i, st := range tt.steps {
				if st.do == "claim" {
					c := testClaim(cooldown, record, "r/e1", time.Hour)
					c.Claimant = st.claimant
					if got, err := s.ClaimAlert(ctx, c); err != nil || got != st.want {
						t.Fatalf("step %d: claim by %s = %v, %v; want %v", i, st.claimant, got, err, st.want)
					}
					continue
				}
				err := s.SettleAlerts(ctx, Ending(st.do), Settlement{CooldownKey: cooldown, RecordKey: record,
					AlertKey: testAlertKey(cooldown, "r/e1"), ID: "r/e1", Claimant: st.claimant})
				if err != nil {
					t.Fatalf("step %d: %s: %v", i, st.do, err)
				}
			}
		})
	}
}

// Records written by the version before records per receiver (a string,
// the state alone, at the old key) are read: a settled one answers as it
// did, a pending one is claimable.
func TestClaimReadsRecordsOfTheVersionBefore(t *testing.T) {
	for _, tt := range []struct {
		old  string
		want Claim
	}{
		{"sent", ClaimSent}, {"failed", ClaimFailed}, {"suppressed", ClaimSuppressed}, {"silenced", ClaimSilenced},
		{"pending", ClaimSend},
	} {
		t.Run(tt.old, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			c := testClaim(prefix+":{t}:cd", prefix+":{t}:rec", "r/e1", time.Hour)
			rdb.Set(ctx, c.LegacyKey, tt.old, time.Hour)
			if tt.old == "pending" {
				rdb.Set(ctx, c.CooldownKey, c.ID, time.Hour) // as its claim took it
			}
			if got, err := s.ClaimAlert(ctx, c); err != nil || got != tt.want {
				t.Fatalf("claim = %v, %v; want %v", got, err, tt.want)
			}
			rec, err := s.Record(ctx, c.RecordKey, c.LegacyKey)
			if err != nil {
				t.Fatal(err)
			}
			if tt.old == "pending" {
				if rec.State != "pending" || rec.Claimant != c.Claimant || rec.Legacy {
					t.Errorf("record %+v; want pending, held by the claimant", rec)
				}
				return
			}
			if rec.State != tt.old || !rec.Legacy {
				t.Errorf("record %+v; want the old one, %s", rec, tt.old)
			}
			if rdb.Exists(ctx, c.RecordKey).Val() != 0 {
				t.Error("a claim answered from the old record wrote a new one")
			}
		})
	}
}

// An acknowledgement goes into the alert's record, by Redis's clock; the
// first stays; an alert without a record is ErrNoRecord.
func TestAcknowledgeAlert(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	c := testClaim(prefix+":{t}:cd", prefix+":{t}:rec", "r/e1", time.Hour)
	if _, err := s.AcknowledgeAlert(ctx, c.RecordKey, "slack:U1"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("ack of no record = %v, want ErrNoRecord", err)
	}
	if rdb.Exists(ctx, c.RecordKey).Val() != 0 {
		t.Fatal("an ack of no record wrote one")
	}
	if _, err := s.ClaimAlert(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := settleOne(ctx, s, c.CooldownKey, c.RecordKey, c.ID, true); err != nil {
		t.Fatal(err)
	}
	ttl := rdb.TTL(ctx, c.RecordKey).Val()
	before := time.Now()
	ack, err := s.AcknowledgeAlert(ctx, c.RecordKey, "slack:U1")
	if err != nil || ack.By != "slack:U1" || ack.Before || ack.At.Before(before.Add(-time.Minute)) || ack.At.After(time.Now().Add(time.Minute)) {
		t.Fatalf("ack = %+v, %v", ack, err)
	}
	again, err := s.AcknowledgeAlert(ctx, c.RecordKey, "slack:U2")
	if err != nil || again.By != "slack:U1" || !again.Before || !again.At.Equal(ack.At) {
		t.Fatalf("second ack = %+v, %v; want the first, before", again, err)
	}
	rec, err := s.Record(ctx, c.RecordKey, c.LegacyKey)
	if err != nil || rec.State != "sent" || rec.AckedBy != "slack:U1" || !rec.AckedAt.Equal(ack.At) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if got := rdb.TTL(ctx, c.RecordKey).Val(); got > ttl || got < ttl-time.Minute {
		t.Errorf("TTL %v after the ack, %v before: want it kept", got, ttl)
	}
	if _, err := s.AcknowledgeAlert(ctx, c.RecordKey, ""); !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("ack by nobody = %v, want ErrInvalidArguments", err)
	}
}

func TestAlertScriptsRejectBadArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	keys := []string{prefix + ":{t}:cd", prefix + ":{t}:rec", prefix + ":{t}:old", prefix + ":{t}:h"}
	long := strings.Repeat("c", MaxClaimant+1)
	for _, tc := range []struct {
		script *redis.Script
		name   string
		keys   int
		args   []any
	}{
		{alertClaim, AlertClaimName, 4, []any{"", 60, 3600, "c", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", -1, 3600, "c", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", 60, 0, "c", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", "x", 3600, "c", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", "05", 3600, "c", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", 60, "99999999999", "c", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", "99999999999", 3600, "c", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", 60, 3600, "c"}},
		{alertClaim, AlertClaimName, 4, []any{"a", 60, 3600, "", ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", 60, 3600, long, ""}},
		{alertClaim, AlertClaimName, 4, []any{"a", 60, 3600, "c", strings.Repeat("b", MaxAlertJSON+1)}},
		{alertClaim, AlertClaimName, 3, []any{"a", 60, 3600, "c", ""}},
		{alertSettle, AlertSettleName, 3, []any{"a", "maybe", 3600, "c", ""}},
		{alertSettle, AlertSettleName, 3, []any{"", "sent", 3600, "c", ""}},
		{alertSettle, AlertSettleName, 3, []any{"a", "sent", 0, "c", ""}},
		{alertSettle, AlertSettleName, 3, []any{"a", "sent", 3600, "", ""}},
		{alertSettle, AlertSettleName, 3, []any{"a", "sent", 3600, "c"}},
		{alertSettle, AlertSettleName, 3, []any{"a", "parked", 3600, "c", "r"}},
		{alertSettle, AlertSettleName, 2, []any{"a", "sent", 3600, "c", ""}},
		{alertSettle, AlertSettleName, 4, []any{"a", "sent", 3600, "c", ""}},
		{alertLife, AlertLifeName, 1, []any{"snooze", "who"}},
		{alertLife, AlertLifeName, 1, []any{"label_maybe", "who"}},
		{alertLife, AlertLifeName, 1, []any{"label_", "who"}},
		{alertLife, AlertLifeName, 1, []any{"label_fraud", ""}},
		{alertLife, AlertLifeName, 1, []any{"resolve", ""}},
		{alertLife, AlertLifeName, 1, []any{"resolve", strings.Repeat("w", 257)}},
		{alertLife, AlertLifeName, 2, []any{"resolve", "who"}},
		{alertShown, AlertShownName, 1, []any{"0"}},
		{alertShown, AlertShownName, 1, []any{"x"}},
		{alertShown, AlertShownName, 1, []any{"1234567890123456"}},
		{alertShown, AlertShownName, 2, []any{"1"}},
		{alertObserve, AlertObserveName, 2, nil},
		{alertIndex, AlertIndexName, 2, []any{"", "{}", 10, 60}},
		{alertIndex, AlertIndexName, 2, []any{"r/e", "", 10, 60}},
		{alertIndex, AlertIndexName, 2, []any{"r/e", "{}", 0, 60}},
		{alertIndex, AlertIndexName, 2, []any{"r/e", "{}", 1000001, 60}},
		{alertIndex, AlertIndexName, 2, []any{"r/e", "{}", 10, 0}},
		{alertIndex, AlertIndexName, 2, []any{"r/e", strings.Repeat("r", 2049), 10, 60}},
		{alertIndex, AlertIndexName, 1, []any{"r/e", "{}", 10, 60}},
		{alertRepeat, AlertRepeatName, 1, []any{"c", "again"}},
		{alertRepeat, AlertRepeatName, 1, []any{"", "count"}},
		{alertRepeat, AlertRepeatName, 2, []any{"c", "count"}},
		{alertAck, AlertAckName, 2, []any{"who"}},
	} {
		if _, err := s.single(ctx, tc.script, tc.name, keys[:tc.keys], tc.args...); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("%s %v: err = %v, want ErrInvalidArguments", tc.name, tc.args, err)
		}
	}
	if rdb.Exists(ctx, keys...).Val() != 0 {
		t.Fatal("a rejected call wrote a key")
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want int64
	}{
		{time.Minute, 60},
		{1500 * time.Millisecond, 2},
		{time.Second, 1},
		{0, 0},
		{-time.Second, -1},
	}
	for _, tt := range tests {
		if got := seconds(tt.in); got != tt.want {
			t.Errorf("seconds(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

package lua

import (
	"errors"
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
					got, err := s.ClaimAlert(ctx, cooldown, record(st.id), st.id, tt.cooldown)
					if err != nil || got != st.want {
						t.Fatalf("step %d: claim %s = %v, %v; want %v", i, st.id, got, err, st.want)
					}
				default:
					if err := s.SettleAlert(ctx, cooldown, record(st.id), st.id, st.do == "sent"); err != nil {
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
// of other hash tags), the cooldowns of failed ones given back.
func TestSettleAlertsRecordsEach(t *testing.T) {
	for _, sent := range []bool{true, false} {
		s, rdb, prefix := newScripts(t)
		ctx := t.Context()
		var alerts []Settlement
		for _, tag := range []string{"a", "b", "c"} {
			a := Settlement{prefix + ":{" + tag + "}:cd", prefix + ":{" + tag + "}:rec", "r/" + tag}
			if got, err := s.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, time.Hour); err != nil || got != ClaimSend {
				t.Fatalf("claim %s = %v, %v", a.ID, got, err)
			}
			alerts = append(alerts, a)
		}
		// The first is still loaded by SHA; after a flush the pipeline's
		// calls fall back to EVAL.
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.SettleAlerts(ctx, sent, alerts...); err != nil {
			t.Fatal(err)
		}
		want, claim, holders := "sent", ClaimSent, int64(3)
		if !sent {
			want, claim, holders = "failed", ClaimFailed, 0
		}
		for _, a := range alerts {
			if got := rdb.Get(ctx, a.RecordKey).Val(); got != want {
				t.Errorf("sent=%v: %s recorded %q, want %q", sent, a.ID, got, want)
			}
			if got, err := s.ClaimAlert(ctx, a.CooldownKey, a.RecordKey, a.ID, time.Hour); err != nil || got != claim {
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
	bad := Settlement{prefix + ":{a}:cd", prefix + ":{a}:rec", ""}
	if err := s.SettleAlerts(t.Context(), true, bad); !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("an empty id: err = %v, want ErrInvalidArguments", err)
	}
}

func TestAlertScriptsRejectBadArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	keys := []string{prefix + ":{t}:cd", prefix + ":{t}:rec"}
	for _, tc := range []struct {
		script *redis.Script
		name   string
		args   []any
	}{
		{alertClaim, AlertClaimName, []any{"", 60, 3600}},
		{alertClaim, AlertClaimName, []any{"a", -1, 3600}},
		{alertClaim, AlertClaimName, []any{"a", 60, 0}},
		{alertClaim, AlertClaimName, []any{"a", "x", 3600}},
		{alertClaim, AlertClaimName, []any{"a", "05", 3600}},
		{alertClaim, AlertClaimName, []any{"a", 60, "99999999999"}},
		{alertClaim, AlertClaimName, []any{"a", "99999999999", 3600}},
		{alertSettle, AlertSettleName, []any{"a", "maybe", 3600}},
		{alertSettle, AlertSettleName, []any{"", "sent", 3600}},
		{alertSettle, AlertSettleName, []any{"a", "sent", 0}},
	} {
		if _, err := s.single(ctx, tc.script, tc.name, keys, tc.args...); !errors.Is(err, ErrInvalidArguments) {
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

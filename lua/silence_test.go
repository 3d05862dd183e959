package lua

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// A silence that runs silences an alert at its claim, before it can take
// the cooldown, and every later copy of that alert stays silenced.
func TestClaimHonoursSilences(t *testing.T) {
	tests := []struct {
		name  string
		group time.Duration // the group's silence ends this far from now (0: none)
		rule  time.Duration // the rule's silence, the same way
		want  Claim
	}{
		{"no silence", 0, 0, ClaimSend},
		{"the group's silence runs", time.Hour, 0, ClaimSilenced},
		{"the rule's silence runs", 0, time.Hour, ClaimSilenced},
		{"an ended silence does not", -time.Second, 0, ClaimSend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			group, rule := prefix+":{t}:s:r:g", prefix+":{t}:s:r:*"
			now := time.Now()
			for key, d := range map[string]time.Duration{group: tt.group, rule: tt.rule} {
				switch {
				case d > 0:
					if err := s.AddSilence(ctx, []string{key}, "s1", now.Add(d)); err != nil {
						t.Fatal(err)
					}
				case d < 0:
					// An ended silence, as it lingers in its hash.
					rdb.HSet(ctx, key, "old", now.Add(d).UnixMilli())
				}
			}
			cooldown, record := prefix+":{t}:c", prefix+":{t}:a"
			got, err := s.ClaimAlert(ctx, testClaim(cooldown, record, "a1", time.Hour, group, rule))
			if err != nil || got != tt.want {
				t.Fatalf("claim = %v, %v; want %v", got, err, tt.want)
			}
			if tt.want != ClaimSilenced {
				return
			}
			if rdb.Exists(ctx, cooldown).Val() != 0 {
				t.Error("a silenced alert took the cooldown")
			}
			// The silence ends; the alert's copies are still silenced.
			rdb.Del(ctx, group, rule)
			if got, err := s.ClaimAlert(ctx, testClaim(cooldown, record, "a1", time.Hour, group, rule)); err != nil || got != ClaimSilenced {
				t.Errorf("a redelivery = %v, %v; want silenced again", got, err)
			}
		})
	}
}

func TestAddSilence(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	key := prefix + ":{t}:s:r:g"
	now := time.Now()
	if err := s.AddSilence(ctx, []string{key}, "short", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSilence(ctx, []string{key}, "long", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The hash lives as long as its longest silence, not shorter.
	if err := s.AddSilence(ctx, []string{key}, "shorter", now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl < 59*time.Minute || ttl > time.Hour {
		t.Errorf("TTL %v, want the longest silence's hour", ttl)
	}
	if err := s.AddSilence(ctx, []string{key}, "past", now.Add(-time.Second)); err == nil {
		t.Error("a silence that has ended was added")
	}
	for i := 3; i < 100; i++ {
		rdb.HSet(ctx, key, i, now.Add(time.Hour).UnixMilli())
	}
	if err := s.AddSilence(ctx, []string{key}, "one-too-many", now.Add(time.Hour)); err == nil {
		t.Error("a 101st silence was added: alert_claim would read them all")
	}
	if n := rdb.HLen(ctx, key).Val(); n != 100 {
		t.Errorf("%d silences in the hash", n)
	}
}

// Silences run by Redis's clock (TIME), which every replica shares, not by
// the caller's: here a Redis whose clock is two hours off the caller's,
// either way. miniredis, for its clock can be set; what is tested is which
// clock the scripts read.
func TestSilencesRunByRedisClock(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name  string
		skew  time.Duration // Redis's clock against the caller's
		ends  time.Duration // the silence ends this far from the caller's now
		added bool          // silence_add takes it
		want  Claim
	}{
		{"ended by Redis's clock, not yet by the caller's", 2 * time.Hour, time.Hour, false, ClaimSend},
		{"runs by Redis's clock, ended by the caller's", -2 * time.Hour, -time.Hour, true, ClaimSilenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			mr.SetTime(now.Add(tc.skew))
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			s, err := New(Config{}, rdb, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			group, rule := "{t}:s:r:g", "{t}:s:r:*"
			err = s.AddSilence(ctx, []string{group}, "s1", now.Add(tc.ends))
			if (err == nil) != tc.added {
				t.Fatalf("silence_add of a silence ending %v from the caller's now: %v", tc.ends, err)
			}
			if !tc.added {
				// As it would linger, had it been added earlier.
				mr.HSet(group, "s1", fmt.Sprint(now.Add(tc.ends).UnixMilli()))
			}
			got, err := s.ClaimAlert(ctx, testClaim("{t}:c", "{t}:a", "a1", time.Hour, group, rule))
			if err != nil || got != tc.want {
				t.Errorf("claim = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

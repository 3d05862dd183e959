package redisonce_test

import (
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/internal/redisonce"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// SetNX answers as go-redis's SetNX: true for a new key, with its TTL,
// false for one that exists; a TTL under a millisecond is refused before
// anything is sent.
func TestSetNX(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Client(t)
	key := redistest.Prefix(t) + ":k"
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		want    bool
		wantErr bool
	}{
		{"a TTL under a millisecond", 999 * time.Microsecond, false, true},
		{"a new key", time.Minute, true, false},
		{"the key again", time.Minute, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := redisonce.SetNX(ctx, rdb, key, 1, tc.ttl)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("SetNX = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	ttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("the key's TTL %v, %v; want about a minute", ttl, err)
	}
}

package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// A replica starts only when no live replica of its prefix counts in
// other buckets, and leaves another's count where it found it; what it
// finds while it runs is an ERROR and fraudwatch_counting_buckets_conflict.
func TestBucketsGuard(t *testing.T) {
	tests := []struct {
		name       string
		held       string // "" for none
		persistent bool   // held without a lifetime, as no replica writes it
		refused    bool
		conflict   float64 // the gauge after a refresh
	}{
		{"no replica yet", "", false, false, 0},
		{"replicas with the same count", "16", false, false, 0},
		{"a replica with 256", "256", false, true, 1},
		{"something else's value", "{evil}", false, true, 1},
		{"a count without a lifetime, no replica's", "256", true, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb, key := redistest.Client(t), redistest.Prefix(t)+":counting-buckets"
			if tt.held != "" {
				lease := bucketsLease
				if tt.persistent {
					lease = 0
				}
				if err := rdb.Set(t.Context(), key, tt.held, lease).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var logs testkit.Buffer
			g, err := newBucketsGuard(rdb, key, 16, slogText(&logs), prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			err = g.check(t.Context())
			if got := errors.Is(err, errBucketsConflict); got != tt.refused {
				t.Fatalf("check = %v, refused %v, want %v", err, got, tt.refused)
			}
			if tt.refused {
				if strings.Contains(err.Error(), "{evil}") {
					t.Errorf("the error quotes what another wrote: %v", err)
				}
				if v := rdb.Get(t.Context(), key).Val(); v != tt.held {
					t.Fatalf("the key holds %q after a refused start, want %q left", v, tt.held)
				}
			} else {
				ttl := rdb.TTL(t.Context(), key).Val()
				if v := rdb.Get(t.Context(), key).Val(); v != "16" || ttl <= 0 || ttl > bucketsLease {
					t.Fatalf("the key holds %q for %v, want 16 for at most %v", v, ttl, bucketsLease)
				}
			}
			g.refresh(t.Context())
			if got := testutil.ToFloat64(g.conflict); got != tt.conflict {
				t.Errorf("conflict gauge %v, want %v", got, tt.conflict)
			}
			if warned := strings.Contains(logs.String(), "level=WARN"); warned != tt.persistent {
				t.Errorf("logged:\n%s\nwant a WARN: %v", logs.String(), tt.persistent)
			}
			if logged := strings.Contains(logs.String(), "level=ERROR"); logged != (tt.conflict == 1) {
				t.Errorf("logged:\n%s\nwant an ERROR: %v", logs.String(), tt.conflict == 1)
			}
			if v := rdb.Get(t.Context(), key).Val(); v != "16" {
				t.Errorf("after a refresh the key holds %q, want 16", v)
			}
		})
	}
}

// A replica whose redis.buckets differs from a live one's does not run:
// it would split the windows with it.
func TestAReplicaWithOtherBucketsDoesNotStart(t *testing.T) {
	p := newPipeline(t, 1, countRule)
	key := p.cfg.Redis.KeyPrefix + ":counting-buckets"
	other := "256"
	if p.cfg.Redis.CountingBuckets() == 256 {
		other = "16"
	}
	if err := p.rdb.Set(context.Background(), key, other, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r := p.start()
	select {
	case err := <-r.done:
		close(r.done)
		if !errors.Is(err, errBucketsConflict) {
			t.Fatalf("Run = %v, want the buckets' conflict", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a replica with other buckets ran")
	}
	if got, err := p.rdb.Get(context.Background(), key).Result(); err != nil || got != other {
		t.Fatalf("the key holds %q (%v), want the live replica's %s", got, err, other)
	}
}

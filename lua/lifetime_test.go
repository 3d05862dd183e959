package lua

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

func TestWindowTTL(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := testWindow(prefix, "w", 30*time.Second, 100)
	count(t, s, []Window{w}, ev{"0:t", 0, "e0", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl <= 29*time.Second || ttl > 30*time.Second {
		t.Fatalf("new window TTL = %v, want its length", ttl)
	}
	// A running window keeps its end.
	rdb.Expire(ctx, w.Key, 10*time.Second)
	count(t, s, []Window{w}, ev{"0:t", 1, "e1", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl > 10*time.Second {
		t.Fatalf("a later event extended the window to %v", ttl)
	}
	// A window that lost its TTL (a restore, a migration, PERSIST) holds
	// counts of unknown age. It is not asked below its threshold, which
	// saves a TTL a change; at its threshold it starts again with that
	// change alone, with its length, so that it never alerts on counts
	// older than its window.
	rdb.Persist(ctx, w.Key)
	count(t, s, []Window{w}, ev{"0:t", 2, "e2", 1})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl != -1 {
		t.Fatalf("TTL = %v below the threshold, want none yet", ttl)
	}
	rdb.IncrBy(ctx, w.Key, 96) // 99, one below the threshold
	if got := count(t, s, []Window{w}, ev{"0:t", 3, "e3", 1}); got[0].First || got[0].Current != 1 {
		t.Fatalf("%+v at the threshold of a window without a TTL, want it started again at 1, not crossed", got)
	}
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl <= 29*time.Second {
		t.Fatalf("TTL = %v at the threshold, want the window set again", ttl)
	}
	// A change that alone reaches the threshold crosses in the window it
	// starts again.
	rdb.Persist(ctx, w.Key)
	if got := count(t, s, []Window{w}, ev{"0:t", 4, "e4", 150}); !got[0].First || got[0].Current != 150 {
		t.Fatalf("%+v, want the change of 150 to cross the window it starts again", got)
	}
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl <= 29*time.Second {
		t.Fatalf("TTL = %v, want the window's length", ttl)
	}
	// A redelivery writes nothing, so it cannot arm a window either.
	rdb.Persist(ctx, w.Key)
	count(t, s, []Window{w}, ev{"0:t", 4, "e4", 150})
	if ttl := rdb.TTL(ctx, w.Key).Val(); ttl != -1 {
		t.Fatalf("TTL = %v after a redelivery, want it untouched", ttl)
	}
}

func TestWindowEnds(t *testing.T) {
	t.Parallel() // a second waiting for the window to end
	s, rdb, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Second, 2)
	if got := count(t, s, []Window{w}, ev{"0:t", 0, "e0", 1}, ev{"0:t", 1, "e1", 1}); !got[1].First {
		t.Fatalf("%+v, want the second event to cross", got)
	}
	waitGone(t, rdb, w.Key)
	got := count(t, s, []Window{w}, ev{"0:t", 2, "e2", 1}, ev{"0:t", 3, "e3", 1})
	if got[0].Current != 1 || !got[1].First {
		t.Fatalf("after the window: %+v, want a new window that crosses again", got)
	}
}

func waitGone(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(t.Context(), key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("window never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A crossing event redelivered after its window ended still hands its
// alert off, and does not count into the new window, whether that window
// is empty or was opened by events of other partitions. The bucket's
// offsets live as long as the marks.
func TestACrossingIsRememberedPastItsWindow(t *testing.T) {
	t.Parallel() // a second waiting for the window to end
	s, rdb, prefix := newScripts(t)
	w := testWindow(prefix, "w", time.Second, 2)
	count(t, s, []Window{w}, ev{"0:t", 0, "a", 1}, ev{"0:t", 1, "b", 1})
	waitGone(t, rdb, w.Key)
	if got := count(t, s, []Window{w}, ev{"0:t", 1, "b", 1})[0]; got != (Counted{Current: 2, First: true}) {
		t.Fatalf("b after its window: %+v, want its crossing", got)
	}
	if rdb.Exists(t.Context(), w.Key).Val() != 0 {
		t.Fatal("the redelivered crossing event opened a new window")
	}
	count(t, s, []Window{w}, ev{"3:t", 0, "z", 1}) // another partition opens a window
	if got := count(t, s, []Window{w}, ev{"0:t", 1, "b", 1})[0]; !got.First {
		t.Fatalf("b in another partition's window: %+v, want its crossing", got)
	}
	if v := value(t, rdb, w); v != 1 {
		t.Fatalf("counter = %d, want 1", v)
	}
	for _, key := range []string{w.Marks, offsetsOf(w)} {
		if ttl := rdb.TTL(t.Context(), key).Val(); ttl < 6*24*time.Hour {
			t.Fatalf("%s lives %v, want the retention", key, ttl)
		}
	}
}

func TestRetentionIsTheLifetimeOfMarksAndRecords(t *testing.T) {
	rdb := redistest.Client(t)
	const retention = 2 * time.Hour
	s, err := New(Config{Retention: retention}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if s.Retention() != retention {
		t.Fatalf("Retention() = %v, want %v", s.Retention(), retention)
	}
	ctx := t.Context()
	prefix := redistest.Prefix(t)
	w := testWindow(prefix, "w", time.Minute, 1)
	if got := count(t, s, []Window{w}, ev{"0:t", 0, "e1", 1}); !got[0].First {
		t.Fatalf("count = %+v; want the first crossing", got)
	}
	record := prefix + ":{t}:alert:e1"
	if _, err := s.ClaimAlert(ctx, testClaim(prefix+":{t}:cooldown", record, "r/e1", time.Minute)); err != nil {
		t.Fatal(err)
	}
	claimed := rdb.TTL(ctx, record).Val()
	if err := settleOne(ctx, s, prefix+":{t}:cooldown", record, "r/e1", true); err != nil {
		t.Fatal(err)
	}
	for key, ttl := range map[string]time.Duration{
		"crossing marks":          rdb.TTL(ctx, w.Marks).Val(),
		"the bucket's offsets":    rdb.TTL(ctx, offsetsOf(w)).Val(),
		"claimed delivery record": claimed,
		"settled delivery record": rdb.TTL(ctx, record).Val(),
	} {
		if ttl <= retention-time.Minute || ttl > retention {
			t.Errorf("%s TTL = %v, want the retention %v", key, ttl, retention)
		}
	}
}

package lua

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// The batch calls answer as their single calls do, in order: of two
// alerts of one cooldown, the first sends and the second is suppressed;
// a claim without its alert key fails the batch before anything is sent.
// Each survives its scripts flushed (NOSCRIPT in a pipeline: loaded and
// sent again), as the counting calls do (TestScriptFlushIsSurvived).
func TestTheBatchCallsSurviveAFlush(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	index, refs := prefix+":{alerts}:open", prefix+":{alerts}:refs"
	k := outcomeKeys(t, prefix)
	for i := range 3 {
		rdb.ScriptFlush(ctx)
		cd := prefix + fmt.Sprint(":{t}:cd", i)
		claims, err := s.ClaimAlerts(ctx, []AlertClaim{testClaim(cd, cd+":rec:a", "a", time.Hour),
			testClaim(cd, cd+":rec:b", "b", time.Hour), testClaim(prefix+fmt.Sprint(":{u}:cd", i), prefix+":{u}:rec", "c", 0)})
		if want := []Claim{ClaimSend, ClaimSuppressed, ClaimSend}; err != nil || !slices.Equal(claims, want) {
			t.Fatalf("claims after flush %d: %v, %v; want %v", i, claims, err, want)
		}
		rdb.ScriptFlush(ctx)
		in := []Indexing{{ID: fmt.Sprint("r/a", i), Ref: "{}"}, {ID: fmt.Sprint("r/c", i), Ref: "{}"}}
		if err := s.IndexAlerts(ctx, index, refs, in, 100, time.Hour); err != nil {
			t.Fatalf("index after flush %d: %v", i, err)
		}
		rdb.ScriptFlush(ctx)
		opened := []OutcomeAlert{{ID: fmt.Sprint("r/a", i), Rule: "r", Ref: []byte("{}"), Orders: []string{"o-1"}},
			{ID: fmt.Sprint("r/c", i), Rule: "r", Ref: []byte("{}")}}
		if _, err := s.OpenOutcomeAlerts(ctx, k, opened, testBounds); err != nil {
			t.Fatalf("outcome notes after flush %d: %v", i, err)
		}
	}
	if n := rdb.ZCard(ctx, index).Val(); n != 6 {
		t.Errorf("%d alerts indexed, want 6", n)
	}
	if n := rdb.ZCard(ctx, k.Alerts()).Val(); n != 6 {
		t.Errorf("%d alerts noted, want 6", n)
	}
	bad := testClaim(prefix+":{t}:cd9", prefix+":{t}:rec9", "d", 0)
	bad.AlertKey = ""
	if _, err := s.ClaimAlerts(ctx, []AlertClaim{testClaim(prefix+":{t}:cd9", prefix+":{t}:rec9", "e", 0), bad}); !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("a claim without its alert key: %v, want ErrInvalidArguments", err)
	}
	if n := rdb.Exists(ctx, prefix+":{t}:rec9").Val(); n != 0 {
		t.Error("a batch with a claim refused before it was sent claimed another")
	}
}

// Notes of many alerts keep the alerts noted within their bound as notes
// one after another do: each drops the oldest one left.
func TestBatchNotesDropTheOldest(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	b := OutcomeBounds{Max: 3, Lifetime: time.Hour}
	start := time.Now().Add(-time.Minute)
	note := func(from, n int) []OutcomeAlert {
		var out []OutcomeAlert
		for i := from; i < from+n; i++ {
			out = append(out, OutcomeAlert{ID: fmt.Sprint("r/e", i), Rule: "r", Ref: []byte("{}"),
				OpenedAt: start.Add(time.Duration(i) * time.Second)})
		}
		return out
	}
	if _, err := s.OpenOutcomeAlerts(ctx, k, note(0, 3), b); err != nil {
		t.Fatal(err)
	}
	// More than were noted: past those, each drops the batch's own oldest.
	if _, err := s.OpenOutcomeAlerts(ctx, k, note(3, 6), b); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ZRange(ctx, k.Alerts(), 0, -1).Val(); !slices.Equal(got, []string{"r/e6", "r/e7", "r/e8"}) ||
		rdb.Exists(ctx, k.Alert("r/e0"), k.Alert("r/e3"), k.Alert("r/e5")).Val() != 0 {
		t.Errorf("alerts noted %v; want the newest 3, the others' records gone", got)
	}
}

// flushing flushes the server's scripts before each pipeline its client
// sends: as if another flushed them again between a NOSCRIPT and the
// retry after the load.
type flushing struct{ other redis.UniversalClient }

func (f flushing) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (f flushing) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (f flushing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := f.other.ScriptFlush(ctx).Err(); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// Scripts flushed again before the retry that follows a NOSCRIPT and the
// load: the pipelined calls go as EVAL then, and run once each.
func TestAFlushBeforeTheRetryIsSurvived(t *testing.T) {
	rdb := redistest.Client(t)
	rdb.AddHook(flushing{other: redistest.Client(t)})
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	ctx := t.Context()
	cd := prefix + ":{t}:cd"
	claims, err := s.ClaimAlerts(ctx, []AlertClaim{testClaim(cd, cd+":rec:a", "a", time.Hour), testClaim(cd, cd+":rec:b", "b", time.Hour)})
	if want := []Claim{ClaimSend, ClaimSuppressed}; err != nil || !slices.Equal(claims, want) {
		t.Fatalf("claims: %v, %v; want %v", claims, err, want)
	}
	index, refs := prefix+":{alerts}:open", prefix+":{alerts}:refs"
	if err := s.IndexAlerts(ctx, index, refs, []Indexing{{ID: "r/a", Ref: "{}"}}, 100, time.Hour); err != nil {
		t.Fatalf("index: %v", err)
	}
	k := outcomeKeys(t, prefix)
	if _, err := s.OpenOutcomeAlerts(ctx, k, []OutcomeAlert{{ID: "r/a", Rule: "r", Ref: []byte("{}")}}, testBounds); err != nil {
		t.Fatalf("outcome note: %v", err)
	}
	w := testWindow(prefix, "w", time.Minute, 250)
	if got := count(t, s, []Window{w}, ev{"0:o", 1, "o1", 100}); got[0].Current != 100 {
		t.Fatalf("count: %+v, want 100", got[0])
	}
	if v := value(t, rdb, w); v != 100 {
		t.Errorf("window %d, want 100: counted once", v)
	}
}

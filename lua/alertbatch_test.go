package lua

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
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
// one after another do: each drops the oldest one left, whether the bound
// was met before the batch or within it, and an alert noted again adds
// and drops none.
func TestBatchNotesDropTheOldest(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	b := OutcomeBounds{Max: 3, Lifetime: time.Hour}
	start := time.Now().Add(-time.Minute)
	note := func(ids ...int) []OutcomeAlert {
		var out []OutcomeAlert
		for _, i := range ids {
			out = append(out, OutcomeAlert{ID: fmt.Sprint("r/e", i), Rule: "r", Ref: []byte("{}"),
				OpenedAt: start.Add(time.Duration(i) * time.Second)})
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		before, batch []OutcomeAlert
		want          []int
	}{
		{"past the bound before", note(0, 1, 2), note(3, 4, 5, 6, 7, 8), []int{6, 7, 8}},
		{"past it within the batch", note(0, 1), note(2, 3, 4, 5), []int{3, 4, 5}},
		{"one noted again", note(0, 1, 2), note(2, 3, 4), []int{2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := outcomeKeys(t, prefix+":"+strings.ReplaceAll(tc.name, " ", "-"))
			if _, err := s.OpenOutcomeAlerts(ctx, k, tc.before, b); err != nil {
				t.Fatal(err)
			}
			if _, err := s.OpenOutcomeAlerts(ctx, k, tc.batch, b); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, i := range tc.want {
				want = append(want, fmt.Sprint("r/e", i))
			}
			if got := rdb.ZRange(ctx, k.Alerts(), 0, -1).Val(); !slices.Equal(got, want) {
				t.Errorf("alerts noted %v; want %v, the newest", got, want)
			}
			for i := range 9 {
				id := fmt.Sprint("r/e", i)
				if kept := rdb.Exists(ctx, k.Alert(id)).Val() == 1; kept != slices.Contains(want, id) {
					t.Errorf("%s's record kept: %v", id, kept)
				}
			}
		})
	}
}

// failingLast fails the reply of the last script call of each pipeline
// of calls its client sends, after Redis ran it: as a connection lost
// before the last answer came.
type failingLast struct{}

func (failingLast) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (failingLast) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (failingLast) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if last := cmds[len(cmds)-1]; last.Name() == "evalsha" || last.Name() == "eval" {
			last.SetErr(errors.New("connection lost"))
		}
		return err
	}
}

// A batch of notes whose pipeline fails after some ran answers their
// changes with the error: noted again, they would answer none, and an
// outcome known before an alert was noted would never be counted.
func TestBatchNotesThatRanAnswerDespiteAFailure(t *testing.T) {
	s, _, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	if _, err := s.RecordOutcome(ctx, k, OrderOutcome{OrderID: "o-1", Label: "fraud", Source: "test",
		OccurredAt: time.Now(), Via: "cli"}, testBounds); err != nil {
		t.Fatal(err)
	}
	lost := redistest.Client(t)
	lost.AddHook(failingLast{})
	failing, err := New(Config{}, lost, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	batch := []OutcomeAlert{{ID: "r/a", Rule: "r", Ref: []byte("{}"), Orders: []string{"o-1"}},
		{ID: "r/b", Rule: "r", Ref: []byte("{}")}}
	changes, err := failing.OpenOutcomeAlerts(ctx, k, batch, testBounds)
	if err == nil || len(changes) != 1 || changes[0].ID != "r/a" || changes[0].Outcome != "fraud" {
		t.Fatalf("a failed batch answered %+v, %v; want r/a's change (fraud) and an error", changes, err)
	}
	if changes, err := s.OpenOutcomeAlerts(ctx, k, batch, testBounds); err != nil || len(changes) != 0 {
		t.Errorf("the batch again answered %+v, %v; want no change", changes, err)
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

// longest records the most commands a pipeline of its client carried.
type longest struct{ n *atomic.Int64 }

func (l longest) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (l longest) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (l longest) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := int64(len(cmds)); n > l.n.Load() {
			l.n.Store(n)
		}
		return next(ctx, cmds)
	}
}

// A batch of thousands (a drain of a flood's waiting alerts) goes in
// pipelines of at most maxPiped calls, each within a read timeout, and is
// answered whole, in order.
func TestABigBatchGoesInBoundedPipelines(t *testing.T) {
	rdb := redistest.Client(t)
	most := longest{n: &atomic.Int64{}}
	rdb.AddHook(most)
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	var claims []AlertClaim
	for i := range 2*maxPiped + 1 {
		cd := prefix + fmt.Sprint(":{t", i/2%16, "}:cd", i/2) // two alerts a cooldown
		claims = append(claims, testClaim(cd, cd+fmt.Sprint(":rec", i), fmt.Sprint("a", i), time.Hour))
	}
	got, err := s.ClaimAlerts(t.Context(), claims)
	if err != nil || len(got) != len(claims) {
		t.Fatalf("ClaimAlerts: %d claims, %v", len(got), err)
	}
	for i, c := range got {
		if want := []Claim{ClaimSend, ClaimSuppressed}[i%2]; c != want {
			t.Fatalf("claim %d: %v, want %v", i, c, want)
		}
	}
	if n := most.n.Load(); n > maxPiped {
		t.Errorf("a pipeline of %d calls, want at most %d", n, maxPiped)
	}
}

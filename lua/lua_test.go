package lua

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

func newScripts(t *testing.T) (*Scripts, *redis.Client, string) {
	t.Helper()
	rdb := redistest.Client(t)
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb, redistest.Prefix(t)
}

// window returns the keys of a test window; they share the prefix, which
// is all a single Redis needs.
func window(prefix string) Window {
	return Window{Counter: prefix + ":count", Seen: prefix + ":seen"}
}

// incr counts an event the way the engine does, its crossing mark next to
// the window's keys.
func incr(s *Scripts, ctx context.Context, w Window, id string, inc int64, length time.Duration, threshold int64) (Cross, error) {
	return s.IncrAndCheck(ctx, Count{Window: w, EventID: id, Crossing: w.Counter + ":crossed:" + id,
		Increment: inc, Length: length, Threshold: threshold})
}

// ids hands out event ids unique within a test.
type ids struct{ n int }

func (i *ids) next() string { i.n++; return fmt.Sprint("ev-", i.n) }

func TestIncrAndCheckFirstCross(t *testing.T) {
	type step struct {
		inc     int64
		current int64
		first   bool
	}
	tests := []struct {
		name      string
		threshold int64
		steps     []step
	}{
		{"count reaches threshold on the third event", 3, []step{{1, 1, false}, {1, 2, false}, {1, 3, true}, {1, 4, false}, {1, 5, false}}},
		{"threshold of one crosses on the first event", 1, []step{{1, 1, true}, {1, 2, false}}},
		{"amount jumps past the threshold", 1000, []step{{300, 300, false}, {900, 1200, true}, {5000, 6200, false}}},
		{"amount lands exactly on the threshold", 1000, []step{{999, 999, false}, {1, 1000, true}, {1, 1001, false}}},
		{"large amounts stay exact", 2_000_000_000_000_000, []step{{1_000_000_000_000_000, 1_000_000_000_000_000, false}, {1_000_000_000_000_000, 2_000_000_000_000_000, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, prefix := newScripts(t)
			w, id := window(prefix), &ids{}
			for i, st := range tt.steps {
				got, err := incr(s, t.Context(), w, id.next(), st.inc, time.Minute, tt.threshold)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got != (Cross{Current: st.current, First: st.first}) {
					t.Fatalf("step %d: got %+v, want current=%d first=%v", i, got, st.current, st.first)
				}
			}
		})
	}
}

func TestIncrAndCheckExactlyOneFirstCrossUnderRace(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	w := window(prefix)
	const racers, threshold = 100, 37
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		firsts []int64
		start  = make(chan struct{})
	)
	for i := range racers {
		wg.Go(func() {
			<-start
			got, err := incr(s, context.Background(), w, fmt.Sprint("racer-", i), 1, time.Minute, threshold)
			if err != nil {
				t.Error(err)
				return
			}
			if got.First {
				mu.Lock()
				firsts = append(firsts, got.Current)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(firsts) != 1 || firsts[0] != threshold {
		t.Fatalf("first crossings = %v, want exactly one at %d", firsts, threshold)
	}
	if n, _ := rdb.Get(t.Context(), w.Counter).Int64(); n != racers {
		t.Fatalf("counter = %d, want %d", n, racers)
	}
}

func TestIncrAndCheckTTL(t *testing.T) {
	const length = 60 * time.Second
	tests := []struct {
		name    string
		prepare func(ctx context.Context, rdb *redis.Client, key string)
		// the TTL after the call must lie in [min, max]
		min, max time.Duration
	}{
		{
			name:    "new key gets the window",
			prepare: func(context.Context, *redis.Client, string) {},
			min:     length - 2*time.Second, max: length,
		},
		{
			name: "running window is not extended",
			prepare: func(ctx context.Context, rdb *redis.Client, key string) {
				rdb.Set(ctx, key, 2, 10*time.Second) // 50 s into a 60 s window
			},
			min: 8 * time.Second, max: 10 * time.Second,
		},
		{
			name: "key that lost its TTL gets the window again",
			prepare: func(ctx context.Context, rdb *redis.Client, key string) {
				rdb.Set(ctx, key, 2, 0) // e.g. a plain SET by someone else
			},
			min: length - 2*time.Second, max: length,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			w := window(prefix)
			tt.prepare(ctx, rdb, w.Counter)
			if _, err := incr(s, ctx, w, "e1", 1, length, 100); err != nil {
				t.Fatal(err)
			}
			ttl := rdb.PTTL(ctx, w.Counter).Val()
			if ttl < tt.min || ttl > tt.max {
				t.Fatalf("TTL = %v, want within [%v, %v]", ttl, tt.min, tt.max)
			}
			// The record of counted events ends with the window.
			if seen := rdb.PTTL(ctx, w.Seen).Val(); seen <= 0 || seen > ttl+10*time.Millisecond || seen < ttl-time.Second {
				t.Fatalf("seen TTL = %v, want the counter's %v", seen, ttl)
			}
		})
	}
}

func TestIncrAndCheckWindowEnds(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w, id := window(prefix), &ids{}
	key := w.Counter
	for i := range 3 {
		if _, err := incr(s, ctx, w, id.next(), 1, time.Second, 3); err != nil {
			t.Fatal(i, err)
		}
	}
	// Wait for the 1 s window to end (a condition, polled), then a new
	// window must be able to cross again.
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(ctx, key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("window key never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var got Cross
	for range 3 {
		var err error
		if got, err = incr(s, ctx, w, id.next(), 1, time.Second, 3); err != nil {
			t.Fatal(err)
		}
	}
	if !got.First || got.Current != 3 {
		t.Fatalf("new window: got %+v, want a first crossing at 3", got)
	}
}

func TestSalesDecr(t *testing.T) {
	tests := []struct {
		name    string
		initial string // "" = no key
		amount  int64
		want    Decr
		wantVal string // "" = key must not exist
	}{
		{"subtracts", "1000", 300, Decr{Remaining: 700}, "700"},
		{"exact refund leaves zero without a clamp", "1000", 1000, Decr{Remaining: 0}, "0"},
		{"larger refund clamps at zero", "1000", 1500, Decr{Remaining: 0, Clamped: true}, "0"},
		{"missing counter is left alone", "", 500, Decr{}, ""},
		{"zero counter is left alone", "0", 500, Decr{}, "0"},
		{"large values stay exact", "2000000000000000", 999_999_999_999_999, Decr{Remaining: 1_000_000_000_000_001}, "1000000000000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			w := window(prefix)
			key := w.Counter
			if tt.initial != "" {
				rdb.Set(ctx, key, tt.initial, 30*time.Second)
			}
			got, err := s.SalesDecr(ctx, w, "refund-1", tt.amount)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			val, err := rdb.Get(ctx, key).Result()
			switch {
			case tt.wantVal == "" && err != redis.Nil:
				t.Fatalf("key exists (%q, %v), want none", val, err)
			case tt.wantVal != "" && val != tt.wantVal:
				t.Fatalf("value = %q, want %q", val, tt.wantVal)
			}
			if tt.initial != "" {
				// The window keeps its end: KEEPTTL, never a fresh or no TTL.
				if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 30*time.Second {
					t.Fatalf("TTL = %v, want the remaining (0, 30s]", ttl)
				}
			}
			if tt.wantVal == "" || tt.initial == "0" {
				if rdb.Exists(ctx, w.Seen).Val() != 0 {
					t.Fatal("a refund that changed nothing left a record")
				}
			}
		})
	}
}

func TestInvalidArgumentsWriteNothing(t *testing.T) {
	long := strings.Repeat("x", 129)
	tests := []struct {
		name   string
		script *redis.Script
		label  string
		args   []any
	}{
		{"incr zero increment", incrAndCheck, IncrAndCheckName, []any{0, 60, 3, "e", 100, 3600}},
		{"incr negative increment", incrAndCheck, IncrAndCheckName, []any{-1, 60, 3, "e", 100, 3600}},
		{"incr zero ttl", incrAndCheck, IncrAndCheckName, []any{1, 0, 3, "e", 100, 3600}},
		{"incr negative ttl", incrAndCheck, IncrAndCheckName, []any{1, -60, 3, "e", 100, 3600}},
		{"incr zero threshold", incrAndCheck, IncrAndCheckName, []any{1, 60, 0, "e", 100, 3600}},
		{"incr non-numeric", incrAndCheck, IncrAndCheckName, []any{"abc", 60, 3, "e", 100, 3600}},
		{"incr fractional", incrAndCheck, IncrAndCheckName, []any{"1.5", 60, 3, "e", 100, 3600}},
		{"incr exponent", incrAndCheck, IncrAndCheckName, []any{"1e3", 60, 3, "e", 100, 3600}},
		{"incr leading zero", incrAndCheck, IncrAndCheckName, []any{"007", 60, 3, "e", 100, 3600}},
		{"incr beyond int64", incrAndCheck, IncrAndCheckName, []any{"99999999999999999999", 60, 3, "e", 100, 3600}},
		{"incr empty", incrAndCheck, IncrAndCheckName, []any{"", 60, 3, "e", 100, 3600}},
		{"incr empty event id", incrAndCheck, IncrAndCheckName, []any{1, 60, 3, "", 100, 3600}},
		{"incr event id too long", incrAndCheck, IncrAndCheckName, []any{1, 60, 3, long, 100, 3600}},
		{"incr zero memory", incrAndCheck, IncrAndCheckName, []any{1, 60, 3, "e", 0, 3600}},
		{"incr missing event id", incrAndCheck, IncrAndCheckName, []any{1, 60, 3}},
		{"incr window past 10 digits", incrAndCheck, IncrAndCheckName, []any{1, "99999999999", 3, "e", 100, 3600}},
		{"incr zero crossing mark lifetime", incrAndCheck, IncrAndCheckName, []any{1, 60, 3, "e", 100, 0}},
		{"incr crossing mark lifetime past 10 digits", incrAndCheck, IncrAndCheckName, []any{1, 60, 3, "e", 100, "99999999999"}},
		{"incr missing crossing mark lifetime", incrAndCheck, IncrAndCheckName, []any{1, 60, 3, "e", 100}},
		{"incr no arguments", incrAndCheck, IncrAndCheckName, nil},
		{"decr zero", salesDecr, SalesDecrName, []any{0, "r", 100}},
		{"decr negative", salesDecr, SalesDecrName, []any{-100, "r", 100}},
		{"decr non-numeric", salesDecr, SalesDecrName, []any{"ten", "r", 100}},
		{"decr fractional", salesDecr, SalesDecrName, []any{"10.5", "r", 100}},
		{"decr empty event id", salesDecr, SalesDecrName, []any{10, "", 100}},
		{"decr missing event id", salesDecr, SalesDecrName, []any{10}},
		{"decr missing", salesDecr, SalesDecrName, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := redistest.Client(t)
			s, err := New(Config{}, rdb, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			w := window(redistest.Prefix(t))
			rdb.Set(ctx, w.Counter, 500, 30*time.Second)
			crossing := w.Counter + ":crossed"
			_, err = s.pair(ctx, tt.script, tt.label, []string{w.Counter, w.Seen, crossing}, tt.args...)
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("err = %v, want ErrInvalidArguments", err)
			}
			if v := rdb.Get(ctx, w.Counter).Val(); v != "500" {
				t.Fatalf("counter = %q, want it untouched at 500", v)
			}
			if ttl := rdb.PTTL(ctx, w.Counter).Val(); ttl <= 0 || ttl > 30*time.Second {
				t.Fatalf("TTL = %v, want it untouched", ttl)
			}
			if rdb.Exists(ctx, w.Seen, crossing).Val() != 0 {
				t.Fatal("rejected call wrote a record or a crossing mark")
			}
			if n := testutil.ToFloat64(s.errors.WithLabelValues(tt.label)); n != 1 {
				t.Fatalf("fraudwatch_script_errors_total{script=%q} = %v, want 1", tt.label, n)
			}
			// A rejected call on a missing key must not create it.
			missing := Window{Counter: w.Counter + ":missing", Seen: w.Seen + ":missing"}
			if _, err := s.pair(ctx, tt.script, tt.label, []string{missing.Counter, missing.Seen, crossing}, tt.args...); !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("missing key: err = %v", err)
			}
			if rdb.Exists(ctx, missing.Counter, missing.Seen).Val() != 0 {
				t.Fatal("rejected call created a key")
			}
		})
	}
}

func TestTypedCallsRejectNonPositiveArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := window(prefix)
	if _, err := incr(s, ctx, w, "e", 1, 0, 3); !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("zero window: err = %v", err)
	}
	if _, err := s.SalesDecr(ctx, w, "r", 0); !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("zero refund: err = %v", err)
	}
	if rdb.Exists(ctx, w.Counter, w.Seen).Val() != 0 {
		t.Fatal("rejected call wrote a key")
	}
}

func TestRedeliveredEventsCountOnce(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := window(prefix)
	const threshold = 3
	var answers []Cross
	// e2 arrives three times, e3 (the crossing event) three times.
	for _, id := range []string{"e1", "e2", "e2", "e3", "e2", "e3", "e3", "e4"} {
		got, err := incr(s, ctx, w, id, 1, time.Minute, threshold)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, got)
	}
	want := []Cross{{1, false}, {2, false}, {2, false}, {3, true}, {2, false}, {3, true}, {3, true}, {4, false}}
	if fmt.Sprint(answers) != fmt.Sprint(want) {
		t.Fatalf("answers = %v, want %v (a redelivery gets its original answer)", answers, want)
	}
	if n, _ := rdb.Get(ctx, w.Counter).Int64(); n != 4 {
		t.Fatalf("counter = %d, want 4 distinct events", n)
	}
}

func TestRedeliveredRefundSubtractsOnce(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := window(prefix)
	for _, id := range []string{"o1", "o2"} {
		if _, err := incr(s, ctx, w, id, 1000, time.Minute, 1_000_000); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		got, err := s.SalesDecr(ctx, w, "r1", 700)
		if err != nil {
			t.Fatal(err)
		}
		if got != (Decr{Remaining: 1300}) {
			t.Fatalf("refund r1 = %+v, want remaining 1300 both times", got)
		}
	}
	// A clamped refund, redelivered, keeps saying it clamped.
	for range 2 {
		got, err := s.SalesDecr(ctx, w, "r2", 5000)
		if err != nil {
			t.Fatal(err)
		}
		if got != (Decr{Remaining: 0, Clamped: true}) {
			t.Fatalf("refund r2 = %+v, want a clamp both times", got)
		}
	}
	if v := rdb.Get(ctx, w.Counter).Val(); v != "0" {
		t.Fatalf("amount = %s, want 0", v)
	}
	// An order with the id of a refund is a different event.
	if got, err := incr(s, ctx, w, "r1", 10, time.Minute, 1_000_000); err != nil || got.Current != 10 {
		t.Fatalf("order r1 = %+v, %v; want it counted", got, err)
	}
}

func TestACrossingIsRememberedPastItsWindowAndTheCap(t *testing.T) {
	rdb := redistest.Client(t)
	// A record that remembers one event: the crossing event is not in it.
	s, err := New(Config{MaxSeen: 1}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w := window(redistest.Prefix(t))
	for _, step := range []struct {
		id   string
		want Cross
	}{{"e1", Cross{1, false}}, {"e2", Cross{2, true}}, {"e2", Cross{2, true}}} {
		got, err := incr(s, ctx, w, step.id, 1, time.Second, 2)
		if err != nil || got != step.want {
			t.Fatalf("%s: %+v, %v; want %+v", step.id, got, err, step.want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(ctx, w.Counter).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("window never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Redelivered after its window ended: still the crossing event, and it
	// is not counted into a new window.
	got, err := incr(s, ctx, w, "e2", 1, time.Second, 2)
	if err != nil || got != (Cross{2, true}) {
		t.Fatalf("e2 after the window: %+v, %v; want the original crossing", got, err)
	}
	if rdb.Exists(ctx, w.Counter).Val() != 0 {
		t.Fatal("the redelivered crossing event started a new window")
	}
	if ttl := rdb.TTL(ctx, w.Counter+":crossed:e2").Val(); ttl < 6*24*time.Hour {
		t.Fatalf("crossing mark TTL = %v, want the configured week", ttl)
	}
}

// One Retention governs both records that outlive a window: crossing marks
// and alert delivery records, so that a mark never outlives its alert's
// record.
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
	w := window(prefix)
	if got, err := incr(s, ctx, w, "e1", 1, time.Minute, 1); err != nil || !got.First {
		t.Fatalf("incr = %+v, %v; want the first crossing", got, err)
	}
	record := prefix + ":alert:e1"
	if _, err := s.ClaimAlert(ctx, prefix+":cooldown", record, "r/e1", time.Minute); err != nil {
		t.Fatal(err)
	}
	claimed := rdb.TTL(ctx, record).Val()
	if err := s.SettleAlert(ctx, prefix+":cooldown", record, "r/e1", true); err != nil {
		t.Fatal(err)
	}
	for key, ttl := range map[string]time.Duration{
		"crossing mark":           rdb.TTL(ctx, w.Counter+":crossed:e1").Val(),
		"claimed delivery record": claimed,
		"settled delivery record": rdb.TTL(ctx, record).Val(),
	} {
		if ttl <= retention-time.Minute || ttl > retention {
			t.Errorf("%s TTL = %v, want the retention %v", key, ttl, retention)
		}
	}
}

func TestCounterSaturatesInsteadOfOverflowing(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := window(prefix)
	rdb.Set(ctx, w.Counter, "4611686018427380000", 30*time.Second)
	got, err := incr(s, ctx, w, "big", 1_000_000_000_000_000, time.Minute, 1000)
	if err != nil {
		t.Fatalf("err = %v, want the counter to saturate, not fail", err)
	}
	if got.Current != 1<<62 || rdb.Get(ctx, w.Counter).Val() != "4611686018427387904" {
		t.Fatalf("current = %d, stored %s; want 2^62", got.Current, rdb.Get(ctx, w.Counter).Val())
	}
	if ttl := rdb.PTTL(ctx, w.Counter).Val(); ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("TTL = %v, want the window's remaining", ttl)
	}
}

func TestRefundsStayExactPast2To53(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := window(prefix)
	rdb.Set(ctx, w.Counter, "9007199254740993", 30*time.Second) // 2^53 + 1
	if _, err := s.SalesDecr(ctx, w, "r", 1); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, w.Counter).Val(); v != "9007199254740992" {
		t.Fatalf("counter = %s, want 9007199254740992: doubles would have rounded", v)
	}
}

func TestMemoryOfAWindowIsBounded(t *testing.T) {
	rdb := redistest.Client(t)
	s, err := New(Config{MaxSeen: 3}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w := window(redistest.Prefix(t))
	for i := range 5 {
		if _, err := incr(s, ctx, w, fmt.Sprint("e", i), 1, time.Minute, 100); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.HLen(ctx, w.Seen).Val(); n != 3 {
		t.Fatalf("remembered %d events, want the cap of 3", n)
	}
	if n, _ := rdb.Get(ctx, w.Counter).Int64(); n != 5 {
		t.Fatalf("counter = %d, want 5: events past the cap still count", n)
	}
	// Remembered events stay idempotent.
	if got, _ := incr(s, ctx, w, "e0", 1, time.Minute, 100); got.Current != 1 {
		t.Fatalf("redelivered e0 = %+v, want its original answer", got)
	}
}

func TestScriptFlushIsSurvived(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	count, amount := window(prefix+":c"), window(prefix+":a")
	for i := range 4 {
		// Other packages' tests share this server; their scripts come back
		// through the same NOSCRIPT fallback.
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := incr(s, ctx, count, fmt.Sprint("c", i), 100, time.Minute, 250)
		if err != nil {
			t.Fatalf("incr after flush %d: %v", i, err)
		}
		if want := int64(100 * (i + 1)); got.Current != want || got.First != (i == 2) {
			t.Fatalf("incr after flush %d: got %+v", i, got)
		}
		rdb.ScriptFlush(ctx)
		if _, err := incr(s, ctx, amount, fmt.Sprint("o", i), 100, time.Minute, 1_000_000); err != nil {
			t.Fatal(err)
		}
		rdb.ScriptFlush(ctx)
		if _, err := s.SalesDecr(ctx, amount, fmt.Sprint("r", i), 50); err != nil {
			t.Fatalf("decr after flush %d: %v", i, err)
		}
		rdb.ScriptFlush(ctx)
		if _, err := s.ClaimAlert(ctx, prefix+":cd", prefix+fmt.Sprint(":rec", i), fmt.Sprint("a", i), 0); err != nil {
			t.Fatalf("claim after flush %d: %v", i, err)
		}
		rdb.ScriptFlush(ctx)
		if err := s.SettleAlert(ctx, prefix+":cd", prefix+fmt.Sprint(":rec", i), fmt.Sprint("a", i), true); err != nil {
			t.Fatalf("settle after flush %d: %v", i, err)
		}
	}
	if v := rdb.Get(ctx, amount.Counter).Val(); v != "200" {
		t.Fatalf("amount = %s, want 200", v)
	}
}

func TestRedisErrorsAreCounted(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	w := window(prefix)
	rdb.HSet(ctx, w.Counter, "f", "v") // WRONGTYPE for GET inside the script
	if _, err := incr(s, ctx, w, "e", 1, time.Minute, 3); err == nil {
		t.Fatal("want an error for a key of the wrong type")
	}
	if n := testutil.ToFloat64(s.errors.WithLabelValues(IncrAndCheckName)); n != 1 {
		t.Fatalf("script errors = %v, want 1", n)
	}
}

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
			cooldown := prefix + ":cooldown"
			record := func(id string) string { return prefix + ":alert:" + id }
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

func TestAlertScriptsRejectBadArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	keys := []string{prefix + ":cd", prefix + ":rec"}
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

package lua

import (
	"context"
	"errors"
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
	s, err := New(rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb, redistest.Prefix(t)
}

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
			key := prefix + ":count"
			for i, st := range tt.steps {
				got, err := s.IncrAndCheck(t.Context(), key, st.inc, time.Minute, tt.threshold)
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
	key := prefix + ":count"
	const racers, threshold = 100, 37
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		firsts []int64
		start  = make(chan struct{})
	)
	for range racers {
		wg.Go(func() {
			<-start
			got, err := s.IncrAndCheck(context.Background(), key, 1, time.Minute, threshold)
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
	if n, _ := rdb.Get(t.Context(), key).Int64(); n != racers {
		t.Fatalf("counter = %d, want %d", n, racers)
	}
}

func TestIncrAndCheckTTL(t *testing.T) {
	const window = 60 * time.Second
	tests := []struct {
		name    string
		prepare func(ctx context.Context, rdb *redis.Client, key string)
		// the TTL after the call must lie in [min, max]
		min, max time.Duration
	}{
		{
			name:    "new key gets the window",
			prepare: func(context.Context, *redis.Client, string) {},
			min:     window - 2*time.Second, max: window,
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
			min: window - 2*time.Second, max: window,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rdb, prefix := newScripts(t)
			ctx := t.Context()
			key := prefix + ":count"
			tt.prepare(ctx, rdb, key)
			if _, err := s.IncrAndCheck(ctx, key, 1, window, 100); err != nil {
				t.Fatal(err)
			}
			ttl := rdb.PTTL(ctx, key).Val()
			if ttl < tt.min || ttl > tt.max {
				t.Fatalf("TTL = %v, want within [%v, %v]", ttl, tt.min, tt.max)
			}
		})
	}
}

func TestIncrAndCheckWindowEnds(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	key := prefix + ":count"
	for i := range 3 {
		if _, err := s.IncrAndCheck(ctx, key, 1, time.Second, 3); err != nil {
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
		if got, err = s.IncrAndCheck(ctx, key, 1, time.Second, 3); err != nil {
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
			key := prefix + ":amount"
			if tt.initial != "" {
				rdb.Set(ctx, key, tt.initial, 30*time.Second)
			}
			got, err := s.SalesDecr(ctx, key, tt.amount)
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
		})
	}
}

func TestInvalidArgumentsWriteNothing(t *testing.T) {
	tests := []struct {
		name   string
		script *redis.Script
		label  string
		args   []any
	}{
		{"incr zero increment", incrAndCheck, IncrAndCheckName, []any{0, 60, 3}},
		{"incr negative increment", incrAndCheck, IncrAndCheckName, []any{-1, 60, 3}},
		{"incr zero ttl", incrAndCheck, IncrAndCheckName, []any{1, 0, 3}},
		{"incr negative ttl", incrAndCheck, IncrAndCheckName, []any{1, -60, 3}},
		{"incr zero threshold", incrAndCheck, IncrAndCheckName, []any{1, 60, 0}},
		{"incr non-numeric", incrAndCheck, IncrAndCheckName, []any{"abc", 60, 3}},
		{"incr fractional", incrAndCheck, IncrAndCheckName, []any{"1.5", 60, 3}},
		{"incr exponent", incrAndCheck, IncrAndCheckName, []any{"1e3", 60, 3}},
		{"incr leading zero", incrAndCheck, IncrAndCheckName, []any{"007", 60, 3}},
		{"incr beyond int64", incrAndCheck, IncrAndCheckName, []any{"99999999999999999999", 60, 3}},
		{"incr empty", incrAndCheck, IncrAndCheckName, []any{"", 60, 3}},
		{"incr missing threshold", incrAndCheck, IncrAndCheckName, []any{1, 60}},
		{"incr no arguments", incrAndCheck, IncrAndCheckName, nil},
		{"decr zero", salesDecr, SalesDecrName, []any{0}},
		{"decr negative", salesDecr, SalesDecrName, []any{-100}},
		{"decr non-numeric", salesDecr, SalesDecrName, []any{"ten"}},
		{"decr fractional", salesDecr, SalesDecrName, []any{"10.5"}},
		{"decr missing", salesDecr, SalesDecrName, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := redistest.Client(t)
			reg := prometheus.NewRegistry()
			s, err := New(rdb, reg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			key := redistest.Prefix(t) + ":counter"
			rdb.Set(ctx, key, 500, 30*time.Second)
			_, err = s.run(ctx, tt.script, tt.label, key, tt.args...)
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("err = %v, want ErrInvalidArguments", err)
			}
			if v := rdb.Get(ctx, key).Val(); v != "500" {
				t.Fatalf("counter = %q, want it untouched at 500", v)
			}
			if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 30*time.Second {
				t.Fatalf("TTL = %v, want it untouched", ttl)
			}
			if n := testutil.ToFloat64(s.errors.WithLabelValues(tt.label)); n != 1 {
				t.Fatalf("fraudwatch_script_errors_total{script=%q} = %v, want 1", tt.label, n)
			}
			// A rejected call on a missing key must not create it.
			missing := key + ":missing"
			if _, err := s.run(ctx, tt.script, tt.label, missing, tt.args...); !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("missing key: err = %v", err)
			}
			if rdb.Exists(ctx, missing).Val() != 0 {
				t.Fatal("rejected call created the key")
			}
		})
	}
}

func TestTypedCallsRejectNonPositiveArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	key := prefix + ":c"
	if _, err := s.IncrAndCheck(ctx, key, 1, 0, 3); !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("zero window: err = %v", err)
	}
	if _, err := s.SalesDecr(ctx, key, 0); !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("zero refund: err = %v", err)
	}
	if rdb.Exists(ctx, key).Val() != 0 {
		t.Fatal("rejected call wrote the key")
	}
}

func TestScriptFlushIsSurvived(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	countKey, amountKey := prefix+":count", prefix+":amount"
	for i := range 4 {
		// Other packages' tests share this server; their scripts come back
		// through the same NOSCRIPT fallback.
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := s.IncrAndCheck(ctx, countKey, 100, time.Minute, 250)
		if err != nil {
			t.Fatalf("incr after flush %d: %v", i, err)
		}
		if want := int64(100 * (i + 1)); got.Current != want || got.First != (i == 2) {
			t.Fatalf("incr after flush %d: got %+v", i, got)
		}
		rdb.ScriptFlush(ctx)
		if _, err := s.IncrAndCheck(ctx, amountKey, 100, time.Minute, 1_000_000); err != nil {
			t.Fatal(err)
		}
		rdb.ScriptFlush(ctx)
		if _, err := s.SalesDecr(ctx, amountKey, 50); err != nil {
			t.Fatalf("decr after flush %d: %v", i, err)
		}
	}
	if v := rdb.Get(ctx, amountKey).Val(); v != "200" {
		t.Fatalf("amount = %s, want 200", v)
	}
}

func TestRedisErrorsAreCounted(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	key := prefix + ":hash"
	rdb.HSet(ctx, key, "f", "v") // WRONGTYPE for GET inside the script
	if _, err := s.IncrAndCheck(ctx, key, 1, time.Minute, 3); err == nil {
		t.Fatal("want an error for a key of the wrong type")
	}
	if n := testutil.ToFloat64(s.errors.WithLabelValues(IncrAndCheckName)); n != 1 {
		t.Fatalf("script errors = %v, want 1", n)
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

// Package lua holds fraudwatch's Redis scripts and the typed Go calls that run
// them. Every decision that several replicas could race on (did this event
// cross the threshold first? how much is left after this refund?) is made by
// one of these scripts inside Redis, where it runs atomically.
//
// Scripts are called by SHA (EVALSHA); when Redis answers NOSCRIPT (after a
// restart, a failover or SCRIPT FLUSH) go-redis sends the source with EVAL,
// which also caches it again.
package lua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Script names, as used in errors and in the script label of
// fraudwatch_script_errors_total.
const (
	IncrAndCheckName = "incr_and_check"
	SalesDecrName    = "sales_decr"
)

var (
	//go:embed incr_and_check.lua
	incrAndCheckSrc string
	//go:embed sales_decr.lua
	salesDecrSrc string

	incrAndCheck = redis.NewScript(incrAndCheckSrc)
	salesDecr    = redis.NewScript(salesDecrSrc)
)

// ErrInvalidArguments is returned when a script answered with its error
// contract ({-1, -1}): it judged an argument unusable and wrote nothing.
var ErrInvalidArguments = errors.New("script rejected its arguments")

// ErrUnexpectedReply is returned when a script's reply does not have the
// shape of its contract (a different script under the same SHA, or a bug).
var ErrUnexpectedReply = errors.New("unexpected script reply")

// scripter is the part of a go-redis client the scripts need; *redis.Client,
// *redis.ClusterClient and *redis.Ring all satisfy it.
type scripter interface {
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd
	ScriptLoad(ctx context.Context, script string) *redis.StringCmd
}

// Scripts runs fraudwatch's scripts against one Redis (or Redis Cluster).
// It is safe for concurrent use.
type Scripts struct {
	rdb    scripter
	errors *prometheus.CounterVec
}

// New returns Scripts that run against rdb and count failures in
// fraudwatch_script_errors_total{script} on reg (nil reg: not registered).
func New(rdb scripter, reg prometheus.Registerer) (*Scripts, error) {
	if rdb == nil {
		return nil, errors.New("lua: nil redis client")
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_script_errors_total",
		Help: "Script calls that failed: Redis errors, or the script's own error contract.",
	}, []string{"script"})
	for _, name := range []string{IncrAndCheckName, SalesDecrName} {
		errs.WithLabelValues(name) // export zeroes, so rate() works from the start
	}
	if reg != nil {
		if err := reg.Register(errs); err != nil {
			return nil, fmt.Errorf("lua: register metrics: %w", err)
		}
	}
	return &Scripts{rdb: rdb, errors: errs}, nil
}

// Load sends both scripts to Redis (SCRIPT LOAD; on a cluster, to every
// primary). It is not required, since calls fall back to EVAL, but at
// start-up it proves that Redis answers and accepts the scripts.
func (s *Scripts) Load(ctx context.Context) error {
	if err := incrAndCheck.Load(ctx, s.rdb).Err(); err != nil {
		return fmt.Errorf("lua: load %s: %w", IncrAndCheckName, err)
	}
	if err := salesDecr.Load(ctx, s.rdb).Err(); err != nil {
		return fmt.Errorf("lua: load %s: %w", SalesDecrName, err)
	}
	return nil
}

// Cross is the answer of incr_and_check.
type Cross struct {
	// Current is the counter after this event's increment.
	Current int64
	// First is true for exactly one event per window: the one that took
	// the counter from below the threshold to at or above it.
	First bool
}

// IncrAndCheck adds inc to the window counter at key, starting a window of
// length ttl (whole seconds) when the key has no expiry, and reports whether
// this call crossed threshold first.
func (s *Scripts) IncrAndCheck(ctx context.Context, key string, inc int64, ttl time.Duration, threshold int64) (Cross, error) {
	pair, err := s.run(ctx, incrAndCheck, IncrAndCheckName, key, inc, seconds(ttl), threshold)
	if err != nil {
		return Cross{}, err
	}
	if pair[1] != 0 && pair[1] != 1 {
		return Cross{}, s.fail(IncrAndCheckName, fmt.Errorf("%w: %v", ErrUnexpectedReply, pair))
	}
	return Cross{Current: pair[0], First: pair[1] == 1}, nil
}

// Decr is the answer of sales_decr.
type Decr struct {
	// Remaining is the counter after the refund (0 when there was none).
	Remaining int64
	// Clamped is true when the refund was larger than the counter and the
	// counter was set to 0 instead of going negative.
	Clamped bool
}

// SalesDecr subtracts amount from the amount counter at key, keeping its
// TTL and clamping at zero. A missing counter is left alone.
func (s *Scripts) SalesDecr(ctx context.Context, key string, amount int64) (Decr, error) {
	pair, err := s.run(ctx, salesDecr, SalesDecrName, key, amount)
	if err != nil {
		return Decr{}, err
	}
	if pair[0] < 0 || (pair[1] != 0 && pair[1] != 1) {
		return Decr{}, s.fail(SalesDecrName, fmt.Errorf("%w: %v", ErrUnexpectedReply, pair))
	}
	return Decr{Remaining: pair[0], Clamped: pair[1] == 1}, nil
}

// run executes a script that answers with a pair of integers and turns the
// {-1, -1} error contract into ErrInvalidArguments.
func (s *Scripts) run(ctx context.Context, script *redis.Script, name, key string, args ...any) ([2]int64, error) {
	reply, err := script.Run(ctx, s.rdb, []string{key}, args...).Int64Slice()
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down, not a script failure.
			return [2]int64{}, fmt.Errorf("lua: %s: %w", name, err)
		}
		return [2]int64{}, s.fail(name, err)
	}
	if len(reply) != 2 {
		return [2]int64{}, s.fail(name, fmt.Errorf("%w: %v", ErrUnexpectedReply, reply))
	}
	if reply[0] == -1 && reply[1] == -1 {
		return [2]int64{}, s.fail(name, ErrInvalidArguments)
	}
	return [2]int64{reply[0], reply[1]}, nil
}

func (s *Scripts) fail(name string, err error) error {
	s.errors.WithLabelValues(name).Inc()
	return fmt.Errorf("lua: %s: %w", name, err)
}

// seconds converts a window to the whole seconds the scripts take, rounding
// up so that a sub-second remainder never shortens a window. Zero and
// negative durations stay non-positive for the script to reject.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return int64(d / time.Second)
	}
	return int64((d + time.Second - 1) / time.Second)
}

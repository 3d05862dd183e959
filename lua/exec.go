package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// command builds the arguments of one EVALSHA: the script's hash, the keys
// and the script's arguments. Strings go in by pointer: go-redis writes a
// *string as it writes the value, and a pointer fits in an interface where
// a boxed value is an allocation of its own. The pointers are to the
// call's own fields (its Source, its windows' keys), which stay put until
// Exec returns; a counting call's numbers are one packed []byte (pack.go).
type command struct {
	args []any
}

// command starts the command of a script with the given number of keys
// and arguments.
func (b *Batch) command(sha *string, keys, args int) command {
	c := command{args: cut(&b.args, 3+keys+args)}
	c.args = append(c.args, "evalsha", sha, keys)
	return c
}

// countedResults is a call's Results.
func (b *Batch) countedResults(n int) []Counted {
	r := cut(&b.counted, n)
	return r[:n]
}

// chunk is where a batch cuts slices of one type from: s, and how much
// was cut since the batch's Reset (from s and the chunks before it).
type chunk[T any] struct {
	s     []T
	taken int
}

// cut returns an empty slice with room for n from the chunk, and takes
// that room from it; a new chunk when it has less, twice as large as the
// last up to a bound, so that a batch of a few events takes little.
func cut[T any](c *chunk[T], n int) []T {
	if cap(c.s)-len(c.s) < n {
		c.s = make([]T, 0, max(n, 64, min(2*cap(c.s), 4096)))
	}
	c.taken += n
	start := len(c.s)
	c.s = c.s[:start+n]
	return c.s[start : start : start+n]
}

// reset empties the chunk, zeroed so that it holds nothing of the batch:
// one chunk for all that the batch took, which is what the next batch of
// the same events takes.
func (c *chunk[T]) reset() {
	if c.taken > cap(c.s) {
		c.s = make([]T, 0, c.taken)
	} else {
		clear(c.s)
		c.s = c.s[:0]
	}
	c.taken = 0
}

func (c *command) keys(keys ...*string) {
	for _, k := range keys {
		c.args = append(c.args, k)
	}
}

func (c *command) source(s *string) { c.args = append(c.args, s) }

// Exec runs the batch and sets every call's Results. It returns an error
// when Redis failed (an outage, a timeout): some calls may have run, and the
// whole batch is to be run again, which the scripts make harmless. A change
// the script refused is not an error of Exec: its Result says so.
func (b *Batch) Exec(ctx context.Context) error {
	for _, round := range b.rounds() {
		if err := pipelined(ctx, b.s, round); err != nil {
			return err
		}
	}
	return nil
}

// rounds orders the calls into pipelines: a call goes into the round after
// the last one holding a call of its hash tag. All keys of a call share
// one tag, so calls that share a key share it; calls of one tag that share
// no key wait too, which costs a round trip where a batch mixes orders
// and refunds of one bucket, and keeps this cheap.
func (b *Batch) rounds() [][]*batchCall {
	if b.last == nil {
		b.last = map[string]int{}
	}
	clear(b.last)
	for i := range b.round {
		b.round[i] = empty(b.round[i])
	}
	n := 0
	for i := range b.calls {
		c := &b.calls[i]
		tag := hashTag(*c.args[3].(*string)) // its first key
		r := 0
		if last, ok := b.last[tag]; ok {
			r = last + 1
		}
		b.last[tag] = r
		if r == len(b.round) {
			b.round = append(b.round, nil)
		}
		b.round[r] = append(b.round[r], c)
		n = max(n, r+1)
	}
	return b.round[:n]
}

// empty returns s emptied, its elements zeroed.
func empty[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// hashTag is what Redis Cluster hashes of a key: its first {...} when not
// empty, else the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// piped is one script call of a pipeline: send adds its command (EVALSHA,
// or EVAL with eval), answer reads the command's reply once it ran without
// a Redis error.
type piped[R redis.Cmder] interface {
	script() string
	send(ctx context.Context, pipe redis.Pipeliner, eval bool) R
	answer(s *Scripts, cmd R) error
}

// maxPiped bounds the calls of one pipeline. A drain of thousands of
// waiting alerts claims them in several, each far within a read timeout
// (redis.read_timeout): 20,000 claims in one took 1 s at load 6 on 2 cores,
// and a pass that always times out would never send them.
const maxPiped = 500

// pipelined sends calls in pipelines of at most maxPiped, in order, the
// one runner of every pipelined script call. An error ends the run: calls
// after it are not sent, and a caller runs them all again, which the
// scripts make harmless.
func pipelined[C piped[R], R redis.Cmder](ctx context.Context, s *Scripts, calls []C) error {
	var refused error
	for len(calls) > 0 {
		n := min(len(calls), maxPiped)
		if err := pipelineOf(ctx, s, calls[:n], &refused); err != nil {
			return err
		}
		calls = calls[n:]
	}
	return refused
}

// pipelineOf sends calls in one pipeline. Calls refused with NOSCRIPT
// (Redis restarted, failed over or flushed its scripts) had no effect: the
// scripts are loaded and those calls sent again; refused again (flushed
// once more meanwhile: tests that flush share a server with others), they
// go as EVAL, which no flush refuses. Every call that ran is answered, also
// when another met a Redis error, which is returned then (a call that ran
// may have changed Redis for good: outcome_open's changes are read once);
// the errors answer returns are joined into refused.
func pipelineOf[C piped[R], R redis.Cmder](ctx context.Context, s *Scripts, calls []C, refused *error) error {
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		cmds := make([]R, len(calls))
		for i, c := range calls {
			cmds[i] = c.send(ctx, pipe, attempt == 2)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		var again []C
		var failed error
		for i, c := range calls {
			err := cmds[i].Err()
			switch {
			case err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt < 2:
				again = append(again, c)
			case err != nil:
				if failed == nil {
					failed = s.redisError(ctx, c.script(), err)
				}
			default:
				if err := c.answer(s, cmds[i]); err != nil {
					*refused = errors.Join(*refused, err)
				}
			}
		}
		if failed != nil || len(again) == 0 {
			return failed
		}
		if attempt == 0 {
			if err := s.Load(ctx); err != nil {
				return err
			}
		}
		calls = again
	}
}

func (c *batchCall) script() string { return c.call.Kind.String() }

func (c *batchCall) send(ctx context.Context, pipe redis.Pipeliner, eval bool) *redis.IntSliceCmd {
	args := c.args
	if eval {
		text, _ := Text(c.script())
		args = append([]any{"eval", text}, args[2:]...)
	}
	// An IntSliceCmd reads the reply's integers into a slice, where a Cmd
	// boxes each of them.
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // Redis Cluster routes the call by its first key
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// answer reads a counting call's reply: a pair of integers a change.
func (c *batchCall) answer(s *Scripts, cmd *redis.IntSliceCmd) error {
	pairs, name, changes := cmd.Val(), c.script(), len(c.call.Results)
	switch {
	case len(pairs) == 2*changes:
		if refused(pairs) {
			s.fail(name, ErrInvalidArguments)
		}
		c.set(pairs, nil)
	case len(pairs) == 2 && pairs[0] == -1 && pairs[1] == -1:
		// The call's own arguments: every change refused.
		s.fail(name, ErrInvalidArguments)
		c.set(nil, ErrInvalidArguments)
	default:
		return s.fail(name, fmt.Errorf("%w: %d integers for %d changes", ErrUnexpectedReply, len(pairs), changes))
	}
	return nil
}

// evidenceCall is one evidence_add call of a pipeline (AddEvidence): its
// EVALSHA's arguments, each key by pointer, which go-redis writes as it
// is, where a Script's EvalSha boxes each key (an allocation a key, 2 a
// window).
type evidenceCall struct {
	call *Evidence
	args []any
}

func newEvidenceCall(c *Evidence, keys []string, args []any) *evidenceCall {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", &evidenceAddSHA, len(keys))
	for i := range keys {
		cmd = append(cmd, &keys[i])
	}
	return &evidenceCall{call: c, args: append(cmd, args...)}
}

func (c *evidenceCall) script() string { return EvidenceAddName }

func (c *evidenceCall) send(ctx context.Context, pipe redis.Pipeliner, eval bool) *redis.Cmd {
	args := c.args
	if eval {
		text, _ := Text(EvidenceAddName)
		args = append([]any{"eval", text}, args[2:]...)
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // Redis Cluster routes the call by its first key
	_ = pipe.Process(ctx, cmd)
	return cmd
}

func (c *evidenceCall) answer(s *Scripts, cmd *redis.Cmd) error {
	v, _ := cmd.Slice() // no error: pipelined answers only those
	lists, err := evidenceLists(v, c.call)
	if err != nil {
		return s.fail(EvidenceAddName, err)
	}
	c.call.Lists = lists
	return nil
}

// refused reports whether the script refused any change of a reply.
func refused(pairs []int64) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] == -1 && pairs[i+1] == -1 {
			return true
		}
	}
	return false
}

// Source names a partition in a window's hash: the partition and a short
// hash of the topic, so that a window never compares offsets of two topics
// (orders and refunds, or a topic and the one that replaced it).
func Source(topic string, partition int) string {
	var h uint32 = 2166136261 // FNV-1a
	for i := 0; i < len(topic); i++ {
		h ^= uint32(topic[i])
		h *= 16777619
	}
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var b strings.Builder
	b.WriteString(strconv.Itoa(partition))
	b.WriteByte(':')
	for range 4 {
		b.WriteByte(digits[h%62])
		h /= 62
	}
	return b.String()
}

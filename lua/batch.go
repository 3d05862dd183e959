package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Window is one (rule, group) window of a counting call. Its keys share the
// hash tag of the call's other keys.
type Window struct {
	// Key is the window: its counter (or buckets), the last offset counted
	// from each partition, its latest event ids (Keys.Window).
	Key string
	// Marks keeps the events that crossed its threshold (Keys.Marks); all
	// but Refund use it.
	Marks string
	// Values keeps a distinct window's values (Keys.Values); only Distinct
	// uses it.
	Values string
	// Length and Threshold are the rule's; all but Refund use them. Length
	// is whole seconds.
	Length    time.Duration
	Threshold int64
	// Sliding and Lateness are the rule's window type and
	// allowed_lateness; Slide windows are all sliding, Distinct ones may be
	// either.
	Sliding  bool
	Lateness time.Duration
}

// Change is one event's change to one window of a call.
type Change struct {
	// Window indexes the call's Windows.
	Window int
	// Offset is the event's offset in the call's source partition.
	Offset int64
	ID     EventID
	// Amount is the increment of Count, or the refund of Refund; for Slide,
	// an order's increment, or a refund as a negative number.
	Amount int64
	// At is the event's time, in milliseconds since 1970, not negative;
	// Slide and Distinct use it.
	At int64
	// Value is the event's value of a distinct rule's field (ValueOf).
	Value EventID
}

// Counted is the answer of incr_and_check, slide_and_check or
// distinct_and_check to one Change.
type Counted struct {
	// Current is the window's value after the change (after the event
	// counted before, for a redelivery).
	Current int64
	// First is true for exactly one event per crossing: the one that took
	// the value from below the threshold to at or above it, however often
	// it is delivered.
	First bool
	// Late is true when a sliding window did not count the event: it is
	// older than the group's newest event time by more than the window and
	// its lateness.
	Late bool
	// Clamped is true when a refund was larger than its sliding window
	// held, which is now 0.
	Clamped bool
	// Err is ErrInvalidArguments when the script refused the change; it
	// wrote nothing for it.
	Err error
}

// Refunded is sales_decr's answer to one Change.
type Refunded struct {
	// Remaining is the window after the refund (0 when there was none).
	Remaining int64
	// Clamped is true when the refund was larger than the window, which
	// was set to 0 instead of going negative.
	Clamped bool
	// Err is ErrInvalidArguments when the script refused the change.
	Err error
}

// Count is one incr_and_check call: a run of events from one partition, in
// its order, counted into the windows of one group.
type Count struct {
	// Source names the partition (Source): the window remembers the last
	// offset counted from it.
	Source  string
	Windows []Window
	Changes []Change
	// Results answers Changes, one for one, once the batch ran.
	Results []Counted
}

// Refund is one sales_decr call: a run of refunds from one partition, in
// its order, subtracted from the amount windows of one group.
type Refund struct {
	Source  string
	Windows []Window
	Changes []Change
	Results []Refunded
}

// Slide is one slide_and_check call: a run of orders and refunds from one
// partition, in its order, counted into the sliding windows of one group.
type Slide struct {
	Source  string
	Windows []Window
	Changes []Change
	Results []Counted
}

// Distinct is one distinct_and_check call: a run of orders from one
// partition, in its order, whose values are counted in the distinct
// windows of one group.
type Distinct struct {
	Source  string
	Windows []Window
	Changes []Change
	Results []Counted
}

// Span is how many buckets a sliding window is cut into: what the sliding
// value can miss is at most one bucket's worth (1/Span of the window) at
// its trailing edge.
const Span = 40

// MaxLateness bounds a sliding window's lateness, in windows: a group
// keeps its buckets of 2 windows and the lateness.
const MaxLateness = 100

// Bounds of one call: it runs inside one script, which holds Redis
// meanwhile.
const (
	MaxWindows = 64
	MaxChanges = 512
)

// Batch sends counting calls to Redis pipelined: a round trip for many
// calls. Calls that touch the same window go in later pipelines, in the
// order they were added, so that a window's changes always arrive in their
// partition's order: a window skips an offset at or below the last one it
// counted, and a later call counted before an earlier one that failed would
// make the earlier one look counted.
type Batch struct {
	s     *Scripts
	calls []batchCall
}

type batchCall struct {
	name    string
	script  *redis.Script
	keys    []string
	args    []any
	changes int
	// answer takes the reply (pairs of integers) or the error of the whole
	// call.
	answer func(pairs []int64, err error)
}

// Batch starts a batch of counting calls.
func (s *Scripts) Batch() *Batch { return &Batch{s: s} }

// Len is the number of calls in the batch.
func (b *Batch) Len() int { return len(b.calls) }

// Count adds an incr_and_check call; its Results are set by Exec.
func (b *Batch) Count(c *Count) error {
	if err := checkCall(c.Source, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	keys := make([]string, 0, 2*len(c.Windows))
	args := make([]any, 0, 3+2*len(c.Windows)+4*len(c.Changes))
	args = append(args, c.Source, seconds(b.s.cfg.Retention), len(c.Windows))
	for _, w := range c.Windows {
		keys = append(keys, w.Key, w.Marks)
		args = append(args, seconds(w.Length), w.Threshold)
	}
	args = appendChanges(args, c.Changes)
	c.Results = make([]Counted, len(c.Changes))
	b.calls = append(b.calls, batchCall{IncrAndCheckName, incrAndCheck, keys, args, len(c.Changes), func(pairs []int64, err error) {
		for i := range c.Results {
			switch {
			case err != nil:
				c.Results[i].Err = err
			case pairs[2*i] == -1 && pairs[2*i+1] == -1:
				c.Results[i].Err = ErrInvalidArguments
			default:
				c.Results[i] = Counted{Current: pairs[2*i], First: pairs[2*i+1] == 1}
			}
		}
	}})
	return nil
}

// Refund adds a sales_decr call; its Results are set by Exec.
func (b *Batch) Refund(r *Refund) error {
	if err := checkCall(r.Source, r.Windows, len(r.Changes), false); err != nil {
		return err
	}
	keys := make([]string, 0, len(r.Windows))
	for _, w := range r.Windows {
		keys = append(keys, w.Key)
	}
	args := appendChanges(append(make([]any, 0, 1+4*len(r.Changes)), r.Source), r.Changes)
	r.Results = make([]Refunded, len(r.Changes))
	b.calls = append(b.calls, batchCall{SalesDecrName, salesDecr, keys, args, len(r.Changes), func(pairs []int64, err error) {
		for i := range r.Results {
			switch {
			case err != nil:
				r.Results[i].Err = err
			case pairs[2*i] == -1 && pairs[2*i+1] == -1:
				r.Results[i].Err = ErrInvalidArguments
			default:
				r.Results[i] = Refunded{Remaining: pairs[2*i], Clamped: pairs[2*i+1] == 1}
			}
		}
	}})
	return nil
}

// Slide adds a slide_and_check call; its Results are set by Exec.
func (b *Batch) Slide(c *Slide) error {
	if err := checkCall(c.Source, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	keys := make([]string, 0, 2*len(c.Windows))
	args := make([]any, 0, 3+4*len(c.Windows)+5*len(c.Changes))
	args = append(args, c.Source, seconds(b.s.cfg.Retention), len(c.Windows))
	widths := make([]int64, len(c.Windows))
	for i, w := range c.Windows {
		width := w.Length.Milliseconds() / Span
		if width < 1 || w.Lateness < 0 || w.Lateness > MaxLateness*w.Length {
			return fmt.Errorf("lua: a sliding window of %v with lateness %v", w.Length, w.Lateness)
		}
		widths[i] = width
		late := (w.Lateness.Milliseconds() + width - 1) / width
		keys = append(keys, w.Key, w.Marks)
		args = append(args, Span, late, w.Threshold, seconds(2*(w.Length+w.Lateness)))
	}
	for _, ch := range c.Changes {
		if ch.Window < 0 || ch.Window >= len(widths) || ch.At < 0 {
			return fmt.Errorf("lua: a change to window %d at %d", ch.Window, ch.At)
		}
		args = append(args, ch.Window+1, ch.Offset, string(ch.ID[:]), ch.At/widths[ch.Window], ch.Amount)
	}
	c.Results = make([]Counted, len(c.Changes))
	b.calls = append(b.calls, batchCall{SlideAndCheckName, slideAndCheck, keys, args, len(c.Changes), counted(c.Results)})
	return nil
}

// Distinct adds a distinct_and_check call; its Results are set by Exec.
func (b *Batch) Distinct(c *Distinct) error {
	if err := checkCall(c.Source, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	keys := make([]string, 0, 3*len(c.Windows))
	args := make([]any, 0, 3+5*len(c.Windows)+5*len(c.Changes))
	args = append(args, c.Source, seconds(b.s.cfg.Retention), len(c.Windows))
	for _, w := range c.Windows {
		if hashTag(w.Values) != hashTag(w.Key) {
			return fmt.Errorf("lua: the keys of a call must share one hash tag")
		}
		keys = append(keys, w.Key, w.Values, w.Marks)
		kind, ttl := "fixed", w.Length
		if w.Sliding {
			kind, ttl = "sliding", 2*(w.Length+w.Lateness)
		}
		args = append(args, kind, w.Length.Milliseconds(), w.Lateness.Milliseconds(), w.Threshold, seconds(ttl))
	}
	for _, ch := range c.Changes {
		args = append(args, ch.Window+1, ch.Offset, string(ch.ID[:]), ch.At, string(ch.Value[:]))
	}
	c.Results = make([]Counted, len(c.Changes))
	b.calls = append(b.calls, batchCall{DistinctAndCheckName, distinctAndCheck, keys, args, len(c.Changes), counted(c.Results)})
	return nil
}

// counted answers Slide's and Distinct's results from their reply.
func counted(results []Counted) func(pairs []int64, err error) {
	return func(pairs []int64, err error) {
		for i := range results {
			switch {
			case err != nil:
				results[i].Err = err
			case pairs[2*i] == -1 && pairs[2*i+1] == -1:
				results[i].Err = ErrInvalidArguments
			default:
				flag := pairs[2*i+1]
				results[i] = Counted{Current: pairs[2*i], First: flag == 1, Late: flag == 2, Clamped: flag == 3}
			}
		}
	}
}

// checkCall refuses a call the scripts would, and one whose keys do not
// share one hash tag: on Redis Cluster it would touch two slots, and the
// batch orders its calls by tag.
func checkCall(source string, windows []Window, changes int, marks bool) error {
	switch {
	case source == "" || len(source) > 32:
		return errors.New("lua: a call's source must be 1 to 32 bytes")
	case len(windows) < 1 || len(windows) > MaxWindows:
		return fmt.Errorf("lua: a call has 1 to %d windows", MaxWindows)
	case changes < 1 || changes > MaxChanges:
		return fmt.Errorf("lua: a call has 1 to %d changes", MaxChanges)
	}
	tag := hashTag(windows[0].Key)
	for _, w := range windows {
		if hashTag(w.Key) != tag || (marks && hashTag(w.Marks) != tag) {
			return fmt.Errorf("lua: the keys of a call must share one hash tag")
		}
	}
	return nil
}

// appendChanges adds the script arguments of changes: the window's index
// (from 1, as Lua counts), the offset, the id and the amount.
func appendChanges(args []any, changes []Change) []any {
	for _, ch := range changes {
		args = append(args, ch.Window+1, ch.Offset, string(ch.ID[:]), ch.Amount)
	}
	return args
}

// Exec runs the batch and sets every call's Results. It returns an error
// when Redis failed (an outage, a timeout): some calls may have run, and the
// whole batch is to be run again, which the scripts make harmless. A change
// the script refused is not an error of Exec: its Result says so.
func (b *Batch) Exec(ctx context.Context) error {
	for _, round := range b.rounds() {
		if err := b.s.run(ctx, round); err != nil {
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
	var rounds [][]*batchCall
	last := map[string]int{}
	for i := range b.calls {
		c := &b.calls[i]
		tag := hashTag(c.keys[0])
		r := 0
		if n, ok := last[tag]; ok {
			r = n + 1
		}
		last[tag] = r
		for len(rounds) <= r {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], c)
	}
	return rounds
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

// run sends calls in one pipeline. Calls refused with NOSCRIPT (Redis
// restarted, failed over or flushed its scripts) had no effect: the
// scripts are loaded and those calls sent again.
func (s *Scripts) run(ctx context.Context, calls []*batchCall) error {
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(calls))
		for i, c := range calls {
			cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		var again []*batchCall
		for i, c := range calls {
			err := cmds[i].Err()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
				again = append(again, c)
				continue
			}
			if err != nil {
				return s.redisError(ctx, c.name, err)
			}
			pairs, err := cmds[i].Int64Slice()
			if err != nil {
				return s.fail(c.name, err)
			}
			switch {
			case len(pairs) == 2*c.changes:
				if refused(pairs) {
					s.fail(c.name, ErrInvalidArguments)
				}
				c.answer(pairs, nil)
			case len(pairs) == 2 && pairs[0] == -1 && pairs[1] == -1:
				// The call's own arguments: every change refused.
				s.fail(c.name, ErrInvalidArguments)
				c.answer(nil, ErrInvalidArguments)
			default:
				return s.fail(c.name, fmt.Errorf("%w: %d integers for %d changes", ErrUnexpectedReply, len(pairs), c.changes))
			}
		}
		if len(again) == 0 {
			return nil
		}
		if err := s.Load(ctx); err != nil {
			return err
		}
		calls = again
	}
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

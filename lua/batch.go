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
	// Key is the window: a fixed window's counter (Keys.Counter); a sliding
	// window's buckets (Keys.Window); a distinct window's newest time
	// (Keys.Window).
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
// its order, counted into the fixed windows of one bucket of groups. The
// calls of one bucket and Source must cover disjoint runs of offsets, in
// the order they are added to batches: the bucket remembers the last offset
// applied from the Source, and skips what is at or below it.
type Count struct {
	// Source names the partition (Source).
	Source string
	// Offsets is the bucket's offsets (Keys.Offsets), in the windows' hash
	// tag.
	Offsets string
	Windows []Window
	Changes []Change
	// Results answers Changes, one for one, once the batch ran.
	Results []Counted
}

// Refund is one sales_decr call: a run of refunds from one partition, in
// its order, subtracted from the amount windows of one bucket of groups.
// Its runs of offsets are bound as Count's are.
type Refund struct {
	Source  string
	Offsets string
	Windows []Window
	Changes []Change
	Results []Refunded
}

// Slide is one slide_and_check call: a run of orders and refunds from one
// partition, in its order, counted into the sliding windows of one bucket
// of groups. Its runs of offsets are bound as Count's are: a call takes all
// of an event's changes to its bucket or none.
type Slide struct {
	Source string
	// Offsets is the bucket's offsets (Keys.Offsets), in the windows' hash
	// tag.
	Offsets string
	Windows []Window
	Changes []Change
	Results []Counted
}

// Distinct is one distinct_and_check call: a run of orders from one
// partition, in its order, whose values are counted in the distinct
// windows of one bucket of groups. Its runs of offsets are bound as
// Count's are: a call takes all of an event's changes to its bucket or
// none.
type Distinct struct {
	Source string
	// Offsets is the bucket's offsets (Keys.Offsets), in the windows' hash
	// tag.
	Offsets string
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
// calls. Calls of the same bucket go in later pipelines, in the order they
// were added, so that a bucket's changes always arrive in their
// partition's order: a bucket skips an offset at or below the last one it
// applied, and a later call applied before an earlier one that failed
// would make the earlier one look applied.
type Batch struct {
	s     *Scripts
	calls []batchCall
	// The calls' arguments and results are cut from these, a chunk at a
	// time, rather than allocated a call at a time.
	args     []any
	nums     []int64
	counted  []Counted
	refunded []Refunded
}

type batchCall struct {
	name string
	// args is the whole EVALSHA command (see command).
	args    []any
	changes int
	// The call's Results: refunded for sales_decr, counted for the
	// others; flags when its second integers say late (2) and clamped (3)
	// besides first (1), as slide_and_check's and distinct_and_check's do.
	counted  []Counted
	refunded []Refunded
	flags    bool
}

// answer sets the call's results from its reply (pairs of integers) or
// the error of the whole call.
func (c *batchCall) answer(pairs []int64, err error) {
	for i := range c.changes {
		var res Counted
		switch {
		case err != nil:
			res.Err = err
		case pairs[2*i] == -1 && pairs[2*i+1] == -1:
			res.Err = ErrInvalidArguments
		default:
			flag := pairs[2*i+1]
			res = Counted{Current: pairs[2*i], First: flag == 1, Late: c.flags && flag == 2, Clamped: c.flags && flag == 3}
		}
		if c.refunded != nil {
			// sales_decr's second integer is its clamped flag.
			c.refunded[i] = Refunded{Remaining: res.Current, Clamped: res.First, Err: res.Err}
		} else {
			c.counted[i] = res
		}
	}
}

// Batch starts a batch of counting calls.
func (s *Scripts) Batch() *Batch { return &Batch{s: s} }

// Len is the number of calls in the batch.
func (b *Batch) Len() int { return len(b.calls) }

// Count adds an incr_and_check call; its Results are set by Exec. The
// call's Source, Windows and Changes must not change until Exec returns:
// the batch sends them from where they are.
func (b *Batch) Count(c *Count) error {
	if err := checkCall(c.Source, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	if err := checkOffsets(c.Offsets, c.Windows); err != nil {
		return err
	}
	a := b.command(&incrAndCheckSHA, 1+2*len(c.Windows), 3+2*len(c.Windows)+4*len(c.Changes), 1+len(c.Windows))
	a.keys(&c.Offsets)
	for i := range c.Windows {
		a.keys(&c.Windows[i].Key, &c.Windows[i].Marks)
	}
	a.source(&c.Source)
	a.int(seconds(b.s.cfg.Retention))
	a.int(int64(len(c.Windows)))
	for i := range c.Windows {
		a.int(seconds(c.Windows[i].Length))
		a.ptr(&c.Windows[i].Threshold)
	}
	a.changes(c.Changes)
	c.Results = b.countedResults(len(c.Changes))
	b.calls = append(b.calls, batchCall{name: IncrAndCheckName, args: a.args, changes: len(c.Changes), counted: c.Results})
	return nil
}

// Refund adds a sales_decr call; its Results are set by Exec. Like
// Count's, its fields must not change until Exec returns.
func (b *Batch) Refund(r *Refund) error {
	if err := checkCall(r.Source, r.Windows, len(r.Changes), false); err != nil {
		return err
	}
	if err := checkOffsets(r.Offsets, r.Windows); err != nil {
		return err
	}
	a := b.command(&salesDecrSHA, 1+len(r.Windows), 2+4*len(r.Changes), 1)
	a.keys(&r.Offsets)
	// The offsets live as long as a redelivery can come: as long as the
	// crossing marks, or the longest window if it is longer.
	life := b.s.cfg.Retention
	for i := range r.Windows {
		a.keys(&r.Windows[i].Key)
		life = max(life, r.Windows[i].Length)
	}
	a.source(&r.Source)
	a.int(seconds(life))
	a.changes(r.Changes)
	r.Results = b.refundedResults(len(r.Changes))
	b.calls = append(b.calls, batchCall{name: SalesDecrName, args: a.args, changes: len(r.Changes), refunded: r.Results})
	return nil
}

// Slide adds a slide_and_check call; its Results are set by Exec. Like
// Count's, its fields must not change until Exec returns.
func (b *Batch) Slide(c *Slide) error {
	if err := checkCall(c.Source, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	if err := checkOffsets(c.Offsets, c.Windows); err != nil {
		return err
	}
	a := b.command(&slideAndCheckSHA, 1+2*len(c.Windows), 3+4*len(c.Windows)+5*len(c.Changes), 1+2*len(c.Windows)+len(c.Changes))
	a.keys(&c.Offsets)
	for i := range c.Windows {
		a.keys(&c.Windows[i].Key, &c.Windows[i].Marks)
	}
	a.source(&c.Source)
	a.int(seconds(b.s.cfg.Retention))
	a.int(int64(len(c.Windows)))
	widths := make([]int64, len(c.Windows))
	for i := range c.Windows {
		w := &c.Windows[i]
		width := w.Length.Milliseconds() / Span
		if width < 1 || w.Lateness < 0 || w.Lateness > MaxLateness*w.Length {
			return fmt.Errorf("lua: a sliding window of %v with lateness %v", w.Length, w.Lateness)
		}
		widths[i] = width
		a.int(Span)
		a.int((w.Lateness.Milliseconds() + width - 1) / width)
		a.ptr(&w.Threshold)
		a.int(seconds(2 * (w.Length + w.Lateness)))
	}
	for i := range c.Changes {
		ch := &c.Changes[i]
		if ch.Window < 0 || ch.Window >= len(widths) || ch.At < 0 {
			return fmt.Errorf("lua: a change to window %d at %d", ch.Window, ch.At)
		}
		a.int(int64(ch.Window) + 1)
		a.ptr(&ch.Offset)
		a.id(&ch.ID)
		a.int(ch.At / widths[ch.Window])
		a.ptr(&ch.Amount)
	}
	c.Results = b.countedResults(len(c.Changes))
	b.calls = append(b.calls, batchCall{name: SlideAndCheckName, args: a.args, changes: len(c.Changes), counted: c.Results, flags: true})
	return nil
}

// Distinct adds a distinct_and_check call; its Results are set by Exec.
// Like Count's, its fields must not change until Exec returns.
func (b *Batch) Distinct(c *Distinct) error {
	if err := checkCall(c.Source, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	if err := checkOffsets(c.Offsets, c.Windows); err != nil {
		return err
	}
	a := b.command(&distinctAndCheckSHA, 1+3*len(c.Windows), 3+5*len(c.Windows)+5*len(c.Changes), 1+3*len(c.Windows))
	a.keys(&c.Offsets)
	for i := range c.Windows {
		w := &c.Windows[i]
		if hashTag(w.Values) != hashTag(w.Key) {
			return fmt.Errorf("lua: the keys of a call must share one hash tag")
		}
		a.keys(&w.Key, &w.Values, &w.Marks)
	}
	a.source(&c.Source)
	a.int(seconds(b.s.cfg.Retention))
	a.int(int64(len(c.Windows)))
	for i := range c.Windows {
		w := &c.Windows[i]
		kind, ttl := "fixed", w.Length
		if w.Sliding {
			kind, ttl = "sliding", 2*(w.Length+w.Lateness)
		}
		a.args = append(a.args, kind)
		a.int(w.Length.Milliseconds())
		a.int(w.Lateness.Milliseconds())
		a.ptr(&w.Threshold)
		a.int(seconds(ttl))
	}
	for i := range c.Changes {
		ch := &c.Changes[i]
		a.int(int64(ch.Window) + 1)
		a.ptr(&ch.Offset)
		a.id(&ch.ID)
		a.ptr(&ch.At)
		a.id(&ch.Value)
	}
	c.Results = b.countedResults(len(c.Changes))
	b.calls = append(b.calls, batchCall{name: DistinctAndCheckName, args: a.args, changes: len(c.Changes), counted: c.Results, flags: true})
	return nil
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

// checkOffsets refuses a bucket's offsets key outside its windows' hash
// tag.
func checkOffsets(offsets string, windows []Window) error {
	if offsets == "" || hashTag(offsets) != hashTag(windows[0].Key) {
		return errors.New("lua: a call's offsets key must share its windows' hash tag")
	}
	return nil
}

// command builds the arguments of one EVALSHA: the script's hash, the keys
// and the script's arguments. Strings, and integers from 256 up, go in by
// pointer: go-redis writes a *string or *int64 as it writes the value, and
// a pointer fits in an interface where a boxed value is an allocation of
// its own; that was some 20 allocations an order with four rules. The
// pointers are to the call's own fields (its Source, its windows' keys and
// thresholds, its changes' offsets and ids), which stay put until Exec
// returns, or to nums, whose values never change once written.
type command struct {
	args []any
	nums []int64
}

// command starts the command of a script with the given number of keys
// and arguments, nums of which are computed integers (a bound: more only
// costs a copy).
func (b *Batch) command(sha *string, keys, args, nums int) command {
	c := command{args: cut(&b.args, 3+keys+args), nums: cut(&b.nums, nums)}
	c.args = append(c.args, "evalsha", sha, keys)
	return c
}

// countedResults and refundedResults are a call's Results.
func (b *Batch) countedResults(n int) []Counted {
	r := cut(&b.counted, n)
	return r[:n]
}

func (b *Batch) refundedResults(n int) []Refunded {
	r := cut(&b.refunded, n)
	return r[:n]
}

// cut returns an empty slice with room for n from the chunk, and takes
// that room from it; a new chunk when it has less, twice as large as the
// last up to a bound, so that a batch of a few events takes little.
func cut[T any](chunk *[]T, n int) []T {
	if cap(*chunk)-len(*chunk) < n {
		*chunk = make([]T, 0, max(n, 64, min(2*cap(*chunk), 4096)))
	}
	start := len(*chunk)
	*chunk = (*chunk)[:start+n]
	return (*chunk)[start : start : start+n]
}

func (c *command) keys(keys ...*string) {
	for _, k := range keys {
		c.args = append(c.args, k)
	}
}

func (c *command) source(s *string) { c.args = append(c.args, s) }

// int adds a computed integer.
func (c *command) int(v int64) {
	if 0 <= v && v < 256 {
		// Boxed from the runtime's table of small integers, without an
		// allocation.
		c.args = append(c.args, v)
		return
	}
	// A pointer into nums, which may move as it grows: the value stays
	// where the pointer is.
	c.nums = append(c.nums, v)
	c.args = append(c.args, &c.nums[len(c.nums)-1])
}

func (c *command) ptr(v *int64) { c.args = append(c.args, v) }

// id adds an event id or value as its 8 bytes.
func (c *command) id(id *EventID) { c.args = append(c.args, (*idArg)(id)) }

// changes adds the arguments incr_and_check and sales_decr take for each
// change: the window's index (from 1, as Lua counts), the offset, the id
// and the amount.
func (c *command) changes(changes []Change) {
	for i := range changes {
		ch := &changes[i]
		c.int(int64(ch.Window) + 1)
		c.ptr(&ch.Offset)
		c.id(&ch.ID)
		c.ptr(&ch.Amount)
	}
}

// idArg is an EventID as go-redis writes it, through
// encoding.BinaryMarshaler: its bytes, without a copy.
type idArg EventID

func (id *idArg) MarshalBinary() ([]byte, error) { return id[:], nil }

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
		tag := hashTag(*c.args[3].(*string)) // its first key
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
		cmds := make([]*redis.IntSliceCmd, len(calls))
		for i, c := range calls {
			// An IntSliceCmd reads the reply's integers into a slice, where
			// a Cmd boxes each of them.
			cmds[i] = redis.NewIntSliceCmd(ctx, c.args...)
			cmds[i].SetFirstKeyPos(3) // Redis Cluster routes the call by its first key
			_ = pipe.Process(ctx, cmds[i])
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
			pairs := cmds[i].Val()
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

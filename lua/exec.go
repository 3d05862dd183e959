package lua

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

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

// evidenceKeys adds the evidence keys of the m windows that keep
// evidence, after the windows' own keys.
func (c *command) evidenceKeys(windows []Window, m int) {
	for i := 0; m > 0 && i < len(windows); i++ {
		if windows[i].Keep > 0 {
			c.args = append(c.args, &windows[i].EvidenceKey)
		}
	}
}

// evidence adds, for each window that keeps evidence, its index (from 1),
// how many orders it keeps and the value from which it keeps them.
func (c *command) evidence(windows []Window, m int) {
	for i := 0; m > 0 && i < len(windows); i++ {
		if w := &windows[i]; w.Keep > 0 {
			c.int(int64(i) + 1)
			c.int(int64(w.Keep))
			c.ptr(&w.KeepFrom)
		}
	}
}

// text adds a change's evidence text, in a call with evidence.
func (c *command) text(ch *Change, m int) {
	if m > 0 {
		c.args = append(c.args, &ch.Text)
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
		cmds := make([]redis.Cmder, len(calls))
		for i, c := range calls {
			// An IntSliceCmd reads the reply's integers into a slice, where
			// a Cmd boxes each of them; a call with evidence may answer
			// strings too.
			if c.lists {
				cmd := redis.NewCmd(ctx, c.args...)
				cmd.SetFirstKeyPos(3) // Redis Cluster routes the call by its first key
				cmds[i] = cmd
			} else {
				cmd := redis.NewIntSliceCmd(ctx, c.args...)
				cmd.SetFirstKeyPos(3)
				cmds[i] = cmd
			}
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
			if err := s.read(c, cmds[i]); err != nil {
				return err
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

// read answers a call from its command's reply.
func (s *Scripts) read(c *batchCall, cmd redis.Cmder) error {
	var pairs []int64
	var lists []string
	switch cmd := cmd.(type) {
	case *redis.IntSliceCmd:
		pairs = cmd.Val()
	case *redis.Cmd:
		var err error
		if pairs, lists, err = pairsAndLists(cmd.Val(), c.changes); err != nil {
			return s.fail(c.name, err)
		}
	}
	switch {
	case len(pairs) == 2*c.changes && len(lists) == c.crossings(pairs):
		if refused(pairs) {
			s.fail(c.name, ErrInvalidArguments)
		}
		c.answer(pairs, lists, nil)
	case len(pairs) == 2 && len(lists) == 0 && pairs[0] == -1 && pairs[1] == -1:
		// The call's own arguments: every change refused.
		s.fail(c.name, ErrInvalidArguments)
		c.answer(nil, nil, ErrInvalidArguments)
	default:
		return s.fail(c.name, fmt.Errorf("%w: %d integers and %d strings for %d changes", ErrUnexpectedReply, len(pairs), len(lists), c.changes))
	}
	return nil
}

// pairsAndLists reads a reply of integers then strings: the pairs of at
// most changes changes (a refused call's single pair), then the lists.
func pairsAndLists(v any, changes int) ([]int64, []string, error) {
	all, ok := v.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("%w: a reply of %T", ErrUnexpectedReply, v)
	}
	n := min(len(all), 2*changes)
	pairs := make([]int64, n)
	for i := range n {
		if pairs[i], ok = all[i].(int64); !ok {
			return nil, nil, fmt.Errorf("%w: %T among the integers", ErrUnexpectedReply, all[i])
		}
	}
	var lists []string
	if len(all) > n {
		lists = make([]string, len(all)-n)
		for i, l := range all[n:] {
			// '' is a crossing whose text was not kept: no evidence.
			text, ok := l.(string)
			if !ok || (text != "" && !strings.HasSuffix(text, EvidenceSep)) {
				return nil, nil, fmt.Errorf("%w: evidence of %T, or not ending with its separator", ErrUnexpectedReply, l)
			}
			lists[i] = text
		}
	}
	return pairs, lists, nil
}

// crossings is how many lists a reply of these pairs holds: one per First
// of a window that keeps evidence.
func (c *batchCall) crossings(pairs []int64) int {
	if !c.lists || len(pairs) != 2*c.changes {
		return 0
	}
	n := 0
	for i := range c.changes {
		if pairs[2*i+1] == 1 && !(pairs[2*i] == -1) && c.windows[c.chs[i].Window].Keep > 0 {
			n++
		}
	}
	return n
}

// evidenceList is a list of a reply cut to its first keep entries.
func evidenceList(text string, keep int) string {
	end := 0
	for range keep {
		i := strings.Index(text[end:], EvidenceSep)
		if i < 0 {
			break
		}
		end += i + 1
	}
	return text[:end]
}

// EvidenceEntries splits a Counted's Evidence into its entries' texts,
// newest first.
func EvidenceEntries(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(list, EvidenceSep), EvidenceSep)
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

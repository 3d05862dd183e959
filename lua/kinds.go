package lua

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Kind is the counting script a Call runs. A new kind is one entry of
// kinds, its script and encoder, and its model (CONTRIBUTING.md, "Adding a
// rule kind"); TestKindsAreWhole fails while one of them is missing.
type Kind uint8

const (
	// Count adds each change's Amount to a fixed window (incr_and_check).
	Count Kind = iota
	// Refund subtracts each change's Amount from a fixed window, never
	// below 0 (sales_decr). It takes turns with Count on the same windows:
	// they are one family.
	Refund
	// Slide adds each change's Amount, an order's or a refund's (negative),
	// to a sliding window (slide_and_check).
	Slide
	// Distinct counts each change's Value once in a fixed or sliding
	// window (distinct_and_check).
	Distinct
)

// kind describes a counting script once: everything the Go side needs of
// it besides its Lua text and its model.
type kind struct {
	name   string
	script *redis.Script
	// sha is the script's hash, which calls send by pointer (see command).
	sha *string
	// keys is how many keys each window sends (its Key, then Marks, then
	// Values when it has them).
	keys int
	// counter: its windows are plain counters (Keys.Counter), not
	// Keys.Window; marks and values: its windows send those keys.
	counter, marks, values bool
	// maxChanges bounds a call's changes (Kind.MaxChanges).
	maxChanges int
	// reply says what the second integer of each change's answer means:
	// reply[n] is the flag it sets when it is n.
	reply [4]flag
	// add encodes a call's arguments into the batch (batch.go).
	add func(b *Batch, c *Call) error
}

// flag is one of Counted's flags.
type flag uint8

const (
	noFlag flag = iota
	firstFlag
	lateFlag
	clampedFlag
)

// kinds is the table of counting scripts, by Kind.
var kinds = [...]kind{
	Count: {name: IncrAndCheckName, script: incrAndCheck, sha: &incrAndCheckSHA, keys: 2, counter: true, marks: true,
		maxChanges: MaxChanges, reply: [4]flag{1: firstFlag}, add: (*Batch).addCount},
	Refund: {name: SalesDecrName, script: salesDecr, sha: &salesDecrSHA, keys: 1, counter: true,
		maxChanges: MaxChanges, reply: [4]flag{1: clampedFlag}, add: (*Batch).addRefund},
	Slide: {name: SlideAndCheckName, script: slideAndCheck, sha: &slideAndCheckSHA, keys: 2, marks: true,
		maxChanges: MaxChanges, reply: [4]flag{1: firstFlag, 2: lateFlag, 3: clampedFlag}, add: (*Batch).addSlide},
	Distinct: {name: DistinctAndCheckName, script: distinctAndCheck, sha: &distinctAndCheckSHA, keys: 3, marks: true, values: true,
		// As few as a call may take: even so, its largest call takes about
		// 1 ms (1.3 when every window crosses), half of it its 64 windows'
		// own reads and writes (docs/performance.md).
		maxChanges: MaxWindows, reply: [4]flag{1: firstFlag, 2: lateFlag, 3: clampedFlag}, add: (*Batch).addDistinct},
}

// Kinds lists every kind.
func Kinds() []Kind {
	out := make([]Kind, len(kinds))
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// String is the kind's script's name.
func (k Kind) String() string {
	if int(k) < len(kinds) {
		return kinds[k].name
	}
	return fmt.Sprintf("lua.Kind(%d)", uint8(k))
}

// Counter reports whether the kind's windows are fixed count or amount
// windows, each under Keys.Counter (incr_and_check: a string, or a hash
// when its rule keeps evidence), rather than Keys.Window.
func (k Kind) Counter() bool { return int(k) < len(kinds) && kinds[k].counter }

// MaxChanges is the most changes a call of the kind takes: it keeps its
// largest call near 1 ms of Redis time (BenchmarkLargestCall,
// docs/performance.md), since every other client of a Redis waits while a
// script runs. It is at least MaxWindows, so that one event's changes to a
// bucket fit one call, and at most MaxChanges.
func (k Kind) MaxChanges() int {
	if int(k) < len(kinds) {
		return kinds[k].maxChanges
	}
	return 0
}

// Values reports whether the kind's windows keep their values (Window.Values).
func (k Kind) Values() bool { return int(k) < len(kinds) && kinds[k].values }

// Add adds a call to the batch; its Results are set by Exec. The call must
// not change until Exec returns: the batch sends its fields from where
// they are.
func (b *Batch) Add(c *Call) error {
	if int(c.Kind) >= len(kinds) {
		return fmt.Errorf("lua: no counting script of %v", c.Kind)
	}
	// The script would take more; the kind's bound keeps its call short.
	if n := c.Kind.MaxChanges(); len(c.Changes) > n {
		return fmt.Errorf("lua: a %v call has at most %d changes, not %d", c.Kind, n, len(c.Changes))
	}
	return kinds[c.Kind].add(b, c)
}

// queue takes a call whose command is args: its Results are cut for Exec to
// set.
func (b *Batch) queue(c *Call, args []any) {
	c.Results = b.countedResults(len(c.Changes))
	b.calls = append(b.calls, batchCall{call: c, args: args})
}

// answer reads the second integer of a change's answer.
func (k Kind) answer(current, second int64) Counted {
	res := Counted{Current: current}
	if 0 <= second && second < int64(len(kinds[k].reply)) {
		switch kinds[k].reply[second] {
		case firstFlag:
			res.First = true
		case lateFlag:
			res.Late = true
		case clampedFlag:
			res.Clamped = true
		}
	}
	return res
}

package lua

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxEvidence bounds how many entries a window's evidence keeps.
const MaxEvidence = 20

// MaxEvidenceText bounds one evidence entry's text.
const MaxEvidenceText = 512

// Evidence is one evidence_add call: entries of the evidence of windows
// that share a hash tag, each window's in their partition's order.
type Evidence struct {
	Windows []EvidenceWindow
	Entries []EvidenceEntry
	// Lists answers the entries marked List, in order, once AddEvidence
	// ran: each the entries' texts newest first, the marked one first.
	Lists [][]string
}

// EvidenceWindow is one window's evidence in an evidence_add call.
type EvidenceWindow struct {
	// Key is the window's evidence (Keys.Evidence), Window the window it
	// belongs to (Keys.Window): the evidence lives no longer than it. A
	// fixed window's counter (Keys.Counter) holds its own evidence, after
	// its count: Key is then Window (evidence_add's header).
	Key, Window string
	// Keep is how many entries the evidence keeps (1 to MaxEvidence); TTL how
	// long it lives when the window has no TTL (whole seconds).
	Keep int
	TTL  time.Duration
	// Slides is set for a sliding window, whose TTL each change renews:
	// every write then gives the evidence the window's remaining life, not
	// only the first.
	Slides bool
}

// EvidenceEntry is one event's entry in a window's evidence.
type EvidenceEntry struct {
	// Window indexes the call's Windows.
	Window int
	Text   string
	// List asks for the evidence as of this entry (a crossing).
	List bool
}

// AddEvidence runs evidence_add calls pipelined, one round trip for all,
// and sets their Lists. Calls it would not send, and calls the script
// refuses, are errors wrapping ErrInvalidArguments: a retry would meet
// them again. Any other error is Redis's.
func (s *Scripts) AddEvidence(ctx context.Context, calls []*Evidence) error {
	if len(calls) == 0 {
		return nil
	}
	pending := make([]*evidenceCall, len(calls))
	for i, c := range calls {
		keys, args, err := packEvidence(c)
		if err != nil {
			return err
		}
		pending[i] = newEvidenceCall(c, keys, args)
	}
	return pipelined(ctx, s, pending)
}

// Evidence packing (evidence_add's header gives the layout): the call's
// numbers in ARGV[1], then each window's entries joined, each after the
// separator, in ARGV[1+i]: two arguments for a call of one window where
// each entry was three, each checked by a Lua pattern.
const (
	evidenceHead   = 1 // n uint8
	evidenceWindow = 8 // keep uint8, ttl uint32, slides uint8, entries uint16
	evidenceMark   = 3 // window uint8, place uint16
)

// packEvidence is c's keys and arguments: the packed numbers, then each
// window's entries in one byte string cut from a buffer the call shares.
func packEvidence(c *Evidence) ([]string, []any, error) {
	n := len(c.Windows)
	if n < 1 || n > MaxWindows || len(c.Entries) < 1 || len(c.Entries) > MaxChanges {
		return nil, nil, fmt.Errorf("lua: an evidence call has 1 to %d windows and 1 to %d entries: %w", MaxWindows, MaxChanges, ErrInvalidArguments)
	}
	// Each window's entries and their bytes.
	count, size := make([]int, n), make([]int, n)
	marks := 0
	for _, e := range c.Entries {
		if e.Window < 0 || e.Window >= n || len(e.Text) > MaxEvidenceText || strings.Contains(e.Text, EvidenceSep) {
			return nil, nil, fmt.Errorf("lua: an evidence entry names a window of the call, with at most %d bytes and no \\x1e: %w", MaxEvidenceText, ErrInvalidArguments)
		}
		count[e.Window]++
		size[e.Window] += 1 + len(e.Text)
		if e.List {
			marks++
		}
	}
	tag := hashTag(c.Windows[0].Key)
	keys := make([]string, 0, 2*n)
	head := make([]byte, 0, evidenceHead+evidenceWindow*n+evidenceMark*marks)
	head = append(head, byte(n))
	for i, w := range c.Windows {
		if hashTag(w.Key) != tag || hashTag(w.Window) != tag {
			return nil, nil, fmt.Errorf("lua: the keys of a call must share one hash tag: %w", ErrInvalidArguments)
		}
		if w.Keep < 1 || w.Keep > MaxEvidence {
			return nil, nil, fmt.Errorf("lua: evidence keeps 1 to %d entries, not %d: %w", MaxEvidence, w.Keep, ErrInvalidArguments)
		}
		keys = append(keys, w.Key, w.Window)
		head = append(head, byte(w.Keep))
		// A TTL past 2^32-1 s goes as 0, which the script refuses.
		head = binary.LittleEndian.AppendUint32(head, u32(max(seconds(w.TTL), 1)))
		head = append(head, bit(w.Slides))
		head = binary.LittleEndian.AppendUint16(head, uint16(count[i]))
	}
	// Window i's entries go in body[start[i]:start[i+1]]; size[i] is where
	// its next one goes, and count[i], from 0 again, how many went.
	start := make([]int, n+1)
	for i := range n {
		start[i+1] = start[i] + size[i]
		size[i], count[i] = start[i], 0
	}
	body := make([]byte, start[n])
	for _, e := range c.Entries {
		at := size[e.Window]
		body[at] = EvidenceSep[0]
		size[e.Window] = at + 1 + copy(body[at+1:], e.Text)
		count[e.Window]++
		if e.List {
			head = append(head, byte(e.Window+1))
			head = binary.LittleEndian.AppendUint16(head, uint16(count[e.Window]))
		}
	}
	args := make([]any, 1+n)
	args[0] = head
	for i := range n {
		args[1+i] = body[start[i]:start[i+1]:start[i+1]]
	}
	return keys, args, nil
}

// bit is a boolean packed: 1 or 0.
func bit(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// evidenceLists reads evidence_add's reply: for each entry marked List,
// a string of texts, oldest first, each starting with RS, of which the
// window keeps the newest Keep; a List is newest first.
func evidenceLists(v []any, c *Evidence) ([][]string, error) {
	if len(v) == 1 {
		if n, ok := v[0].(int64); ok && n == -1 {
			return nil, ErrInvalidArguments
		}
	}
	var marked []int // the windows of the entries marked List
	for _, e := range c.Entries {
		if e.List {
			marked = append(marked, e.Window)
		}
	}
	if len(v) != len(marked) {
		return nil, fmt.Errorf("%w: %d lists for %d crossings", ErrUnexpectedReply, len(v), len(marked))
	}
	lists := make([][]string, len(v))
	for i, l := range v {
		text, ok := l.(string)
		if !ok || !strings.HasPrefix(text, EvidenceSep) {
			return nil, fmt.Errorf("%w: evidence of %T, or not starting with its separator", ErrUnexpectedReply, l)
		}
		list := strings.Split(text[1:], EvidenceSep)
		list = list[max(len(list)-c.Windows[marked[i]].Keep, 0):]
		slices.Reverse(list)
		lists[i] = list
	}
	return lists, nil
}

// EvidenceSep starts each entry of a window's evidence (evidence_add): no
// entry's text holds it.
const EvidenceSep = "\x1e"

// CounterEvidence reads the evidence fixed count and amount windows hold
// (incr_and_check.lua: a field an order, named by the count it took the
// window to): for each key its entries' texts, by count, highest first;
// none for a key that is gone or of another type (a string: a window whose
// rule keeps no evidence). Fields that are not
// counts as the script writes them (written by another) are left out.
func (s *Scripts) CounterEvidence(ctx context.Context, keys []string) ([][]string, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, k)
	}
	_, _ = pipe.Exec(ctx) // each command carries its error
	lists := make([][]string, len(keys))
	for i, c := range cmds {
		var reply redis.Error
		switch err := c.Err(); {
		case errors.Is(err, redis.Nil), errors.As(err, &reply):
			continue
		case err != nil:
			return nil, fmt.Errorf("lua: read %d windows' evidence: %w", len(keys), err)
		}
		lists[i] = byCount(c.Val())
	}
	return lists, nil
}

// byCount is a window's entries, by the count each field names, highest
// first.
func byCount(fields map[string]string) []string {
	type entry struct {
		n    int64
		text string
	}
	es := make([]entry, 0, len(fields))
	for f, text := range fields {
		if n, err := strconv.ParseInt(f, 10, 64); err == nil && n > 0 && strconv.FormatInt(n, 10) == f {
			es = append(es, entry{n, text})
		}
	}
	if len(es) == 0 {
		return nil
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(b.n, a.n) })
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.text
	}
	return out
}

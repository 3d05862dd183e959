package lua

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
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
	// belongs to (Keys.Window): the evidence lives no longer than it.
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
	keys, args := make([][]string, len(calls)), make([][]any, len(calls))
	for i, c := range calls {
		if len(c.Windows) < 1 || len(c.Windows) > MaxWindows || len(c.Entries) < 1 || len(c.Entries) > MaxChanges {
			return fmt.Errorf("lua: an evidence call has 1 to %d windows and 1 to %d entries: %w", MaxWindows, MaxChanges, ErrInvalidArguments)
		}
		tag := hashTag(c.Windows[0].Key)
		k := make([]string, 0, 2*len(c.Windows))
		a := make([]any, 0, 1+3*len(c.Windows)+3*len(c.Entries))
		a = append(a, len(c.Windows))
		for _, w := range c.Windows {
			if hashTag(w.Key) != tag || hashTag(w.Window) != tag {
				return fmt.Errorf("lua: the keys of a call must share one hash tag: %w", ErrInvalidArguments)
			}
			if w.Keep < 1 || w.Keep > MaxEvidence {
				return fmt.Errorf("lua: evidence keeps 1 to %d entries, not %d: %w", MaxEvidence, w.Keep, ErrInvalidArguments)
			}
			slides := "0"
			if w.Slides {
				slides = "1"
			}
			k = append(k, w.Key, w.Window)
			a = append(a, w.Keep, max(seconds(w.TTL), 1), slides)
		}
		for _, e := range c.Entries {
			if e.Window < 0 || e.Window >= len(c.Windows) || len(e.Text) > MaxEvidenceText || strings.Contains(e.Text, EvidenceSep) {
				return fmt.Errorf("lua: an evidence entry names a window of the call, with at most %d bytes and no \\x1e: %w", MaxEvidenceText, ErrInvalidArguments)
			}
			mark := "0"
			if e.List {
				mark = "1"
			}
			a = append(a, e.Window+1, e.Text, mark)
		}
		keys[i], args[i] = k, a
	}
	pending := make([]*evidenceCall, len(calls))
	for i, c := range calls {
		pending[i] = &evidenceCall{call: c, keys: keys[i], args: args[i]}
	}
	return pipelined(ctx, s, pending)
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

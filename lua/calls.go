package lua

import "time"

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
	// Keep is how many entries a fixed window's evidence keeps (0 to
	// MaxEvidence; 0 keeps none), From the value from which its orders are
	// kept (1 to Threshold). incr_and_check writes the entry (Change.Entry)
	// of an order that takes such a window to From or above, or crosses
	// it, into the window's hash, in the call that counts it.
	Keep int
	From int64
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
	// Entry is the order's evidence entry, for a window that keeps
	// evidence (Window.Keep): at most MaxEvidenceText bytes, no
	// EvidenceSep.
	Entry string
}

// Counted is a counting script's answer to one Change.
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
	// Clamped is true when a refund was larger than its window held,
	// which is now 0 instead of negative.
	Clamped bool
	// Err is ErrInvalidArguments when the script refused the change; it
	// wrote nothing for it.
	Err error
}

// Call is one counting call: a run of events from one partition, in its
// order, counted into the windows of one bucket of groups by the script
// its Kind names. The calls of one bucket, Source and family (see Kind)
// must cover disjoint runs of offsets, in the order they are added to
// batches: the bucket remembers the last offset applied from the Source,
// and skips what is at or below it. A call takes all of an event's changes
// to its bucket or none.
type Call struct {
	Kind Kind
	// Source names the partition (Source).
	Source string
	// Offsets is the bucket's offsets (Keys.Offsets), in the windows' hash
	// tag.
	Offsets string
	Windows []Window
	Changes []Change
	// Results answers Changes, one for one, once the batch ran. For
	// Refund, Current is what the window holds after the refund.
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
// meanwhile. MaxChanges is the most of any kind (a kind may take fewer:
// Kind.MaxChanges) and of an evidence call's entries.
const (
	MaxWindows = 64
	MaxChanges = 512
)

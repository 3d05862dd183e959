package lua

import (
	"errors"
	"fmt"
)

// Batch sends counting calls to Redis pipelined: a round trip for many
// calls. A bucket's second call goes in a later pipeline, so a bucket's
// changes arrive in their partition's order. This matters because a bucket
// skips an offset at or below the last one it applied: a later call applied
// before an earlier one that failed would make the earlier look applied.
type Batch struct {
	s     *Scripts
	calls []batchCall
	// The calls' arguments and results are cut from these, a chunk at a
	// time, rather than allocated a call at a time.
	args    []any
	nums    []int64
	counted []Counted
}

type batchCall struct {
	call *Call
	// args is the whole EVALSHA command (see command).
	args []any
}

// set sets the call's results from its reply (pairs of integers) or the
// error of the whole call.
func (c *batchCall) set(pairs []int64, err error) {
	for i := range c.call.Results {
		var res Counted
		switch {
		case err != nil:
			res.Err = err
		case pairs[2*i] == -1 && pairs[2*i+1] == -1:
			res.Err = ErrInvalidArguments
		default:
			res = c.call.Kind.answer(pairs[2*i], pairs[2*i+1])
		}
		c.call.Results[i] = res
	}
}

// Batch starts a batch of counting calls.
func (s *Scripts) Batch() *Batch { return &Batch{s: s} }

// Len is the number of calls in the batch.
func (b *Batch) Len() int { return len(b.calls) }

// addCount encodes an incr_and_check call.
func (b *Batch) addCount(c *Call) error {
	if err := checkCall(c.Source, c.Offsets, c.Windows, len(c.Changes), true); err != nil {
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
	b.queue(c, a.args)
	return nil
}

// addRefund encodes a sales_decr call.
func (b *Batch) addRefund(r *Call) error {
	if err := checkCall(r.Source, r.Offsets, r.Windows, len(r.Changes), false); err != nil {
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
	b.queue(r, a.args)
	return nil
}

// addSlide encodes a slide_and_check call.
func (b *Batch) addSlide(c *Call) error {
	if err := checkCall(c.Source, c.Offsets, c.Windows, len(c.Changes), true); err != nil {
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
	b.queue(c, a.args)
	return nil
}

// addDistinct encodes a distinct_and_check call.
func (b *Batch) addDistinct(c *Call) error {
	if err := checkCall(c.Source, c.Offsets, c.Windows, len(c.Changes), true); err != nil {
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
	b.queue(c, a.args)
	return nil
}

// checkCall refuses a call the scripts would, and one whose keys (the
// bucket's offsets, its windows and their marks) do not share one hash
// tag: on Redis Cluster it would touch two slots, and the batch orders its
// calls by tag.
func checkCall(source, offsets string, windows []Window, changes int, marks bool) error {
	switch {
	case source == "" || len(source) > 32:
		return errors.New("lua: a call's source must be 1 to 32 bytes")
	case len(windows) < 1 || len(windows) > MaxWindows:
		return fmt.Errorf("lua: a call has 1 to %d windows", MaxWindows)
	case changes < 1 || changes > MaxChanges:
		return fmt.Errorf("lua: a call has 1 to %d changes", MaxChanges)
	}
	tag := hashTag(windows[0].Key)
	if offsets == "" || hashTag(offsets) != tag {
		return errors.New("lua: a call's offsets key must share its windows' hash tag")
	}
	for _, w := range windows {
		if hashTag(w.Key) != tag || (marks && hashTag(w.Marks) != tag) {
			return fmt.Errorf("lua: the keys of a call must share one hash tag")
		}
	}
	return nil
}

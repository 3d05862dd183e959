package lua

import (
	"errors"
	"fmt"
	"strings"
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
	// time, rather than allocated a call at a time; Reset keeps them for
	// the next batch.
	args    chunk[any]
	counted chunk[Counted]
	bytes   chunk[byte]
	packs   chunk[packedArg]
	// last and round are rounds' own, kept as the chunks are: round
	// holds every round an Exec of the batch used.
	last  map[string]int
	round [][]*batchCall
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

// Reset empties the batch for calls to come, keeping the room its calls
// took: a batch made for every batch of events, with its chunks, took
// about a tenth of fraudwatch's CPU an event (most of it in the garbage
// collector). The calls added before must not be read any more: their
// Results are the batch's.
func (b *Batch) Reset() {
	clear(b.calls)
	b.calls = b.calls[:0]
	b.args.reset()
	b.counted.reset()
	b.bytes.reset()
	b.packs.reset()
}

// Len is the number of calls in the batch.
func (b *Batch) Len() int { return len(b.calls) }

// addCount encodes an incr_and_check call.
func (b *Batch) addCount(c *Call) error {
	if err := checkCall(c.Source, c.Offsets, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	p, err := packCount(b.packed(countHead+countWindow*len(c.Windows)+countChange*len(c.Changes)),
		b.s.cfg.Retention, c.Windows, c.Changes)
	if err != nil {
		return err
	}
	var texts, spans []byte
	for i := range c.Windows {
		if c.Windows[i].Keep > 0 {
			size := 0
			for j := range c.Changes {
				size += len(c.Changes[j].Entry)
			}
			if texts, spans, err = packEntries(b.packed(size), b.packed(8*len(c.Changes)), c.Changes); err != nil {
				return err
			}
			break
		}
	}
	a := b.command(&incrAndCheckSHA, 1+2*len(c.Windows), 4)
	a.keys(&c.Offsets)
	for i := range c.Windows {
		a.keys(&c.Windows[i].Key, &c.Windows[i].Marks)
	}
	a.source(&c.Source)
	a.bytes(b, p)
	a.bytes(b, texts)
	a.bytes(b, spans)
	b.queue(c, a.args)
	return nil
}

// addRefund encodes a sales_decr call.
func (b *Batch) addRefund(r *Call) error {
	if err := checkCall(r.Source, r.Offsets, r.Windows, len(r.Changes), false); err != nil {
		return err
	}
	// The offsets live as long as a redelivery can come: as long as the
	// crossing marks, or the longest window if it is longer.
	life := b.s.cfg.Retention
	for i := range r.Windows {
		life = max(life, r.Windows[i].Length)
	}
	p, err := packRefund(b.packed(countHead+len(r.Windows)+countChange*len(r.Changes)), life, r.Windows, r.Changes)
	if err != nil {
		return err
	}
	a := b.command(&salesDecrSHA, 1+len(r.Windows), 2)
	a.keys(&r.Offsets)
	for i := range r.Windows {
		a.keys(&r.Windows[i].Key)
	}
	a.source(&r.Source)
	a.bytes(b, p)
	b.queue(r, a.args)
	return nil
}

// addSlide encodes a slide_and_check call.
func (b *Batch) addSlide(c *Call) error {
	if err := checkCall(c.Source, c.Offsets, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	p, err := packSlide(b.packed(countHead+slideWindow*len(c.Windows)+slideChange*len(c.Changes)),
		b.s.cfg.Retention, c.Windows, c.Changes)
	if err != nil {
		return err
	}
	a := b.command(&slideAndCheckSHA, 1+2*len(c.Windows), 2)
	a.keys(&c.Offsets)
	for i := range c.Windows {
		a.keys(&c.Windows[i].Key, &c.Windows[i].Marks)
	}
	a.source(&c.Source)
	a.bytes(b, p)
	b.queue(c, a.args)
	return nil
}

// addDistinct encodes a distinct_and_check call.
func (b *Batch) addDistinct(c *Call) error {
	if err := checkCall(c.Source, c.Offsets, c.Windows, len(c.Changes), true); err != nil {
		return err
	}
	for i := range c.Windows {
		if hashTag(c.Windows[i].Values) != hashTag(c.Windows[i].Key) {
			return fmt.Errorf("lua: the keys of a call must share one hash tag")
		}
	}
	p, err := packDistinct(b.packed(countHead+distWindow*len(c.Windows)+distChange*len(c.Changes)),
		b.s.cfg.Retention, c.Windows, c.Changes)
	if err != nil {
		return err
	}
	a := b.command(&distinctAndCheckSHA, 1+3*len(c.Windows), 2)
	a.keys(&c.Offsets)
	for i := range c.Windows {
		w := &c.Windows[i]
		a.keys(&w.Key, &w.Values, &w.Marks)
	}
	a.source(&c.Source)
	a.bytes(b, p)
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
	tag := tagOf(windows[0].Key)
	if offsets == "" || !tag.of(offsets) {
		return errors.New("lua: a call's offsets key must share its windows' hash tag")
	}
	for _, w := range windows {
		if !tag.of(w.Key) || (marks && !tag.of(w.Marks)) {
			return fmt.Errorf("lua: the keys of a call must share one hash tag")
		}
	}
	return nil
}

// keyTag is a key's hash tag (hashTag) and the key up to the tag's end.
// A key that starts with that head has that tag: the keys of a call all
// do, Keys making them. Comparing a head is one short comparison where
// reading a key's tag is two searches, which took about 3 % of
// fraudwatch's CPU an event.
type keyTag struct{ tag, head string }

func tagOf(key string) keyTag {
	tag := hashTag(key)
	if len(tag) == len(key) {
		return keyTag{tag: tag} // no tag: the whole key is hashed
	}
	open := strings.IndexByte(key, '{')
	return keyTag{tag: tag, head: key[:open+len(tag)+2]}
}

// of reports whether key has the tag.
func (t keyTag) of(key string) bool {
	return (t.head != "" && strings.HasPrefix(key, t.head)) || hashTag(key) == t.tag
}

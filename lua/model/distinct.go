package model

import (
	"errors"
	"math"
)

// distinctWindow is distinct_and_check's state of one window.
type distinctWindow struct {
	key, values, marks string
	sliding            bool
	length             float64
	late               float64
	threshold          float64
	ttl                float64 // seconds
	newest             float64
	hasNewest          bool
	isNew              bool
	// old is the old layout's last offset of the source (-1 when it does
	// not parse), hasOld whether the hash holds one; r whether it holds the
	// old layout's latest ids.
	old    float64
	hasOld bool
	r      bool
	count  float64 // fixed only: the values' ZCARD as this call has it
	// renew is a sliding window's newest time moved past a multiple of its
	// length: the script renews the offsets' lifetime.
	renew bool
	dirty bool
	// unusable is a window whose hash or values hold another type
	// (redis.pcall's error): its changes answer -1, -1 and nothing is
	// written to it. A sliding window's values are found out by their
	// first read, a change's.
	unusable bool
}

// zcount is the script's count(w, from, to), to +Inf for its nil: the
// bounds go to Redis through format('%d'), which truncates.
func (w *distinctWindow) zcount(s *Store, from, to float64) (float64, error) {
	if !math.IsInf(to, 1) {
		to = float64(integer(to))
	}
	c, err := s.zcount(w.values, float64(integer(from)), to)
	return float64(c), err
}

// current is what a redelivered or late order is answered: the count of
// the window that ends at the group's newest time.
func (w *distinctWindow) current(s *Store) (float64, error) {
	if !w.sliding {
		return w.count, nil
	}
	if !w.hasNewest {
		return 0, nil
	}
	return w.zcount(s, w.newest-w.length, math.Inf(1))
}

// slide is the script's slide(w, t, value).
func (w *distinctWindow) slide(s *Store, t float64, value string) (float64, bool, error) {
	// ZSCORE's reply is the score written with %.17g, which tonumber reads
	// back to the very double.
	last, hasLast, err := s.zscore(w.values, value)
	if errors.Is(err, errWrongType) {
		w.unusable = true
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	from := t - w.length
	inorder := !w.hasNewest || t >= w.newest
	to := math.Inf(1)
	if !inorder {
		to = t
	}
	own, err := w.zcount(s, from, to)
	if err != nil {
		return 0, false, err
	}
	ownAfter := own
	if !hasLast || last <= from {
		ownAfter = own + 1
	}
	before, after := own, ownAfter
	if !inorder {
		curFrom := w.newest - w.length
		cur, err := w.zcount(s, curFrom, math.Inf(1))
		if err != nil {
			return 0, false, err
		}
		curAfter := cur
		if t > curFrom && (!hasLast || last <= curFrom) {
			curAfter = cur + 1
		}
		before, after = max(own, cur), max(ownAfter, curAfter)
	}
	if _, err := s.zadd(w.values, value, float64(integer(t)), true); err != nil {
		return 0, false, err
	}
	return after, before < w.threshold && after >= w.threshold, nil
}

// distinctAndCheck is distinct_and_check.lua.
func distinctAndCheck(s *Store, keys, args argv) (any, error) {
	c, err := open(s, keys, args, distinctPacking, "d:")
	if err != nil || c == nil {
		return refusal(err)
	}
	d := &distinctCall{counting: c}
	d.windows = newLoaded(c.n, func(i int) (*distinctWindow, error) {
		return loadDistinct(s, keys, &c.windows[i], i, c.src)
	})
	for k := range c.changes {
		if err := d.step(&c.changes[k]); err != nil {
			return nil, err
		}
	}
	// The script's pairs(windows) runs in no set order; with distinct keys
	// each window writes only its own, so any order leaves the same.
	for _, w := range d.windows.got {
		if w == nil || !w.dirty {
			continue
		}
		started, err := w.save(s, c.src)
		if err != nil {
			return nil, err
		}
		c.refresh = c.refresh || started
	}
	return c.finish()
}

// loadDistinct is the script's window(i): the window's arguments p, which
// the prologue found usable, and its state in Redis.
func loadDistinct(s *Store, keys argv, p *win, i int, src string) (*distinctWindow, error) {
	w := &distinctWindow{key: keys[3*i-2], values: keys[3*i-1], marks: keys[3*i], sliding: p.sliding,
		length: p.length, late: p.late, threshold: p.threshold, ttl: p.ttl}
	if err := w.load(s, src); err != nil {
		return nil, err
	}
	return w, nil
}

// distinctCall is a call of distinct_and_check past its prologue.
type distinctCall struct {
	*counting
	windows *loaded[distinctWindow]
}

// step is the script's work on change ch: its checks, then its answer.
func (d *distinctCall) step(ch *change) error {
	if !d.usable(ch) {
		d.answer(-1, -1)
		return nil
	}
	w, err := d.windows.at(ch.i)
	if err != nil {
		return err
	}
	fresh := d.applied.decide(ch.o) && !(w.hasOld && ch.o <= w.old)
	v, flag, err := d.outcome(w, fresh, ch.at, ch.id, ch.value)
	if err != nil {
		return err
	}
	d.answer(v, flag)
	return nil
}

// outcome is a checked change's value and flag: again for one counted
// before, 2 for one too late, else counted (and marked when it crossed).
func (d *distinctCall) outcome(w *distinctWindow, fresh bool, t float64, id, value string) (float64, int64, error) {
	switch {
	case !fresh:
		return w.again(d.s, id)
	case w.unusable:
		return -1, -1, nil
	case w.sliding && w.hasNewest && t <= w.newest-w.length-w.late:
		return w.currentOr(d.s, 2)
	}
	v, crossing, err := w.count1(d.s, t, value)
	switch {
	case err != nil:
		return 0, 0, err
	case w.unusable:
		return -1, -1, nil
	case !crossing:
		return v, 0, nil
	}
	if err := d.mark(w.marks, id, format(v)); err != nil {
		return 0, 0, err
	}
	return v, 1, nil
}

// load reads the window as the script does at its first change: HMGET of
// t, the source's old field and r, and a fixed window's ZCARD.
func (w *distinctWindow) load(s *Store, src string) error {
	h, err := s.hgetall(w.key)
	if errors.Is(err, errWrongType) {
		w.unusable = true
		return nil
	}
	if err != nil {
		return err
	}
	ts, tok := h["t"]
	w.isNew = !tok
	if w.newest, w.hasNewest, err = tonumber(ts, tok); err != nil {
		return err
	}
	if old, ok := h[src]; ok {
		var isNum bool
		if w.old, isNum, err = tonumber(old, true); err != nil {
			return err
		}
		if !isNum {
			w.old = -1
		}
		w.hasOld = true
	}
	_, w.r = h["r"]
	if !w.sliding {
		c, err := s.zcard(w.values)
		if errors.Is(err, errWrongType) {
			w.unusable = true
			return nil
		}
		if err != nil {
			return err
		}
		w.count = float64(c)
	}
	return nil
}

// again is the script's answer to an order counted before: its mark, or
// the count of the window that ends at the group's newest time.
func (w *distinctWindow) again(s *Store, id string) (float64, int64, error) {
	if m, ok, err := markOf(s, w.marks, id); err != nil || ok {
		return m, 1, err
	}
	return w.currentOr(s, 0)
}

// currentOr is current with flag, or -1, -1 when the window is unusable or
// its values turn out to be (ZCOUNT's error).
func (w *distinctWindow) currentOr(s *Store, flag int64) (float64, int64, error) {
	if w.unusable {
		return -1, -1, nil
	}
	c, err := w.current(s)
	if errors.Is(err, errWrongType) {
		w.unusable = true
		return -1, -1, nil
	}
	return c, flag, err
}

// count1 is the script's count of an order not counted before: the count
// after it and whether it crossed.
func (w *distinctWindow) count1(s *Store, t float64, value string) (float64, bool, error) {
	var now float64
	var crossing bool
	var err error
	if w.sliding {
		if now, crossing, err = w.slide(s, t, value); err != nil || w.unusable {
			return 0, false, err
		}
	} else {
		// Plain ZADD: a value seen again takes this order's time, and only
		// a new one counts.
		before := w.count
		added, err := s.zadd(w.values, value, float64(integer(t)), false)
		if err != nil {
			return 0, false, err
		}
		w.count = before + float64(added)
		now, crossing = w.count, before < w.threshold && w.count >= w.threshold
	}
	if !w.hasNewest || t > w.newest {
		if w.sliding && w.hasNewest && math.Floor(t/w.length) > math.Floor(w.newest/w.length) {
			w.renew = true
		}
		w.newest, w.hasNewest = t, true
	}
	w.dirty = true
	return now, crossing, nil
}

// save is the script's write-back of a dirty window; started is whether
// it gives the offsets their lifetime (a window that starts, or gets its
// lifetime again, or a sliding one past a multiple of its length).
func (w *distinctWindow) save(s *Store, src string) (started bool, err error) {
	if err := s.hset(w.key, "t", format(w.newest)); err != nil {
		return false, err
	}
	if w.hasOld || w.r {
		if err := s.hdel(w.key, src, "r"); err != nil {
			return false, err
		}
	}
	if err := s.zremRanks(w.values, 0, -(integer(w.threshold) + 2)); err != nil {
		return false, err
	}
	if w.sliding {
		if err := s.zremUpTo(w.values, float64(integer(w.newest-2*w.length-w.late))); err != nil {
			return false, err
		}
		s.expire(w.key, secs(w.ttl))
		s.expire(w.values, secs(w.ttl))
		return w.isNew || w.renew, nil
	}
	if w.isNew || s.ttlSeconds(w.key) == -1 {
		// A running fixed window keeps its end.
		s.expire(w.key, secs(w.ttl))
		s.expire(w.values, secs(w.ttl))
		return true, nil
	}
	return false, nil
}

package model

import "strings"

// refundWindow is sales_decr's state of one window.
type refundWindow struct {
	key      string
	entries  string // its evidence after its count, from RS on
	v        float64
	hasV     bool
	changed  bool
	unusable bool
}

// salesDecr is sales_decr.lua.
func salesDecr(s *Store, keys, args argv) (any, error) {
	// Every window is usable; a refund's offsets live the call's lifetime.
	c, err := open(s, keys, args, salesPacking, "r:")
	if err != nil || c == nil {
		return refusal(err)
	}
	windows := newLoaded(c.n, func(i int) (*refundWindow, error) {
		w := &refundWindow{key: keys[i]}
		got, ok, gerr := s.getString(w.key)
		w.unusable = gerr != nil // redis.pcall: the key holds no string
		if at := strings.IndexByte(got, evidenceSep); at >= 0 && gerr == nil {
			// A count with evidence after it: at most 15 digits, else not ours.
			got, w.entries = got[:at], got[at:]
			w.unusable = !natural(got, true, 15)
		}
		var err error
		if w.v, w.hasV, err = tonumber(got, ok && !w.unusable); err != nil {
			return nil, err
		}
		return w, nil
	})

	for k := range c.changes {
		ch := &c.changes[k]
		if !c.usable(ch) {
			c.answer(-1, -1)
			continue
		}
		fresh := c.applied.decide(ch.o)
		w, err := windows.at(ch.i)
		if err != nil {
			return nil, err
		}
		switch {
		case w.unusable:
			c.answer(-1, -1)
		case !w.hasV || w.v <= 0:
			c.answer(0, 0)
		case !fresh:
			c.answer(w.v, 0)
		default:
			remaining, clamped, ok := w.subtract(s, ch.amount)
			if !ok {
				c.answer(-1, -1)
				continue
			}
			c.answer(remaining, clamped)
		}
	}

	for _, w := range windows.got {
		if w != nil && w.changed {
			s.setKeepTTL(w.key, format(w.v)+w.entries)
		}
	}
	return c.finish()
}

// subtract is the script's subtract(w, amount); ok is false where DECRBY
// fails.
func (w *refundWindow) subtract(s *Store, amount float64) (remaining float64, clamped int64, ok bool) {
	if w.v >= two53 {
		if w.changed {
			s.setKeepTTL(w.key, format(w.v))
			w.changed = false
		}
		v, err := s.incrby(w.key, -int64(amount))
		if err != nil {
			return 0, 0, false
		}
		remaining = float64(v)
	} else {
		remaining, w.changed = w.v-amount, true
	}
	if remaining < 0 {
		remaining, clamped, w.changed = 0, 1, true
	}
	w.v = remaining
	return remaining, clamped, true
}

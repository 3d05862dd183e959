package model

// refundWindow is sales_decr's state of one window.
type refundWindow struct {
	key      string
	v        float64 // its count; 0 where there is none
	changed  bool
	unusable bool
	hashed   bool // a hash's c, else a string
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
		var err error
		if w.v, w.hashed, w.unusable, err = s.readRefunded(w.key, c.windows[i].keep == 1); err != nil {
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
		case w.v <= 0:
			c.answer(0, 0)
		case !fresh:
			c.answer(w.v, 0)
		default:
			remaining, clamped, ok, err := w.subtract(s, ch.amount)
			switch {
			case err != nil:
				return nil, err
			case !ok:
				c.answer(-1, -1)
			default:
				c.answer(remaining, clamped)
			}
		}
	}

	for _, w := range windows.got {
		switch {
		case w == nil || !w.changed:
		case !w.hashed:
			s.setKeepTTL(w.key, format(w.v))
		default:
			if err := s.hset(w.key, "c", format(w.v)); err != nil {
				return nil, err
			}
		}
	}
	return c.finish()
}

// subtract is the script's refund of amount from window w; ok is false
// where HINCRBY or INCRBY refuses it (past 2^53, where the script
// subtracts in Redis, exactly: a count that high was read so and has not
// been lowered by the call in Lua, whose counts stay below it).
func (w *refundWindow) subtract(s *Store, amount float64) (remaining float64, clamped int64, ok bool, err error) {
	if w.v >= two53 {
		var v int64
		if w.hashed {
			v, err = s.hincrby(w.key, "c", -int64(amount))
		} else {
			v, err = s.incrby(w.key, -int64(amount))
		}
		if err != nil {
			return 0, 0, false, nil // redis.pcall: an error table
		}
		remaining = float64(v)
	} else {
		remaining, w.changed = w.v-amount, true
	}
	if remaining < 0 {
		remaining, clamped, w.changed = 0, 1, true
	}
	w.v = remaining
	return remaining, clamped, true, nil
}

package model

// refundWindow is sales_decr's state of one window.
type refundWindow struct {
	key      string
	v        float64
	hasV     bool
	changed  bool
	unusable bool
}

// salesDecr is sales_decr.lua.
func salesDecr(s *Store, keys, args argv) (any, error) {
	args, ok := salesPacking.text(keys, args)
	if !ok {
		return refused(), nil
	}
	const maxChanges = 4096
	src, life, ok := head(args, false)
	n := len(keys) - 1
	rest := len(args) - 2
	if !(ok && n >= 1 && n <= 64) || rest < 4 || rest%4 != 0 || rest/4 > maxChanges {
		return refused(), nil
	}
	// Every window is usable; a refund's offsets live the call's lifetime.
	c := &counting{s: s, keys: keys, args: args, src: src, life: life, offsetsLife: life, n: n, first: 3}
	if err := c.start("r:"+src, rest/4); err != nil {
		return nil, err
	}
	windows := newLoaded(n, func(i int) (*refundWindow, error) {
		w := &refundWindow{key: keys[i]}
		got, ok, gerr := s.getString(w.key)
		w.unusable = gerr != nil // redis.pcall: the key holds no string
		var err error
		if w.v, w.hasV, err = tonumber(got, ok && gerr == nil); err != nil {
			return nil, err
		}
		return w, nil
	})

	for at := c.first; at <= len(args); at += 4 {
		i, o, _, ok := c.change(at)
		amount, amountOK := args.at(at + 3)
		if !(ok && positive(amount, amountOK, 18)) {
			c.answer(-1, -1)
			continue
		}
		fresh := c.applied.decide(o)
		w, err := windows.at(i)
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
			remaining, clamped, ok := w.subtract(s, amount)
			if !ok {
				c.answer(-1, -1)
				continue
			}
			c.answer(remaining, clamped)
		}
	}

	for _, w := range windows.got {
		if w != nil && w.changed {
			s.setKeepTTL(w.key, format(w.v))
		}
	}
	return c.finish()
}

// subtract is the script's subtract(w, amount); ok is false where DECRBY
// fails.
func (w *refundWindow) subtract(s *Store, amount string) (remaining float64, clamped int64, ok bool) {
	if w.v >= two53 {
		if w.changed {
			s.setKeepTTL(w.key, format(w.v))
			w.changed = false
		}
		by, _ := parseInt(amount)
		v, err := s.incrby(w.key, -by)
		if err != nil {
			return 0, 0, false
		}
		remaining = float64(v)
	} else {
		by, _, _ := tonumber(amount, true)
		remaining, w.changed = w.v-by, true
	}
	if remaining < 0 {
		remaining, clamped, w.changed = 0, 1, true
	}
	w.v = remaining
	return remaining, clamped, true
}

package model

// slideAndCheck is slide_and_check.lua.
func slideAndCheck(s *Store, keys, args argv) (any, error) {
	c, err := open(s, keys, args, slidePacking, "s:")
	if err != nil || c == nil {
		return refusal(err)
	}
	d := &slideCall{counting: c}
	d.windows = newLoaded(c.n, func(i int) (*slideWindow, error) { return loadSlide(s, keys, &c.windows[i], i, c.src) })
	for k := range c.changes {
		if err := d.step(&c.changes[k]); err != nil {
			return nil, err
		}
	}
	for _, w := range d.windows.got {
		if w != nil && w.dirty {
			if err := w.save(s, c.src); err != nil {
				return nil, err
			}
			c.refresh = c.refresh || w.isNew || w.renew
		}
	}
	return c.finish()
}

// loadSlide is the script's window(i): the window's arguments p, which
// the prologue found usable, and its hash.
func loadSlide(s *Store, keys argv, p *win, i int, src string) (*slideWindow, error) {
	w := &slideWindow{key: keys[2*i-1], marks: keys[2*i], span: p.span, late: p.late, threshold: p.threshold,
		ttl: p.ttl}
	if err := w.load(s, src); err != nil {
		return nil, err
	}
	return w, nil
}

// slideCall is a call of slide_and_check past its prologue.
type slideCall struct {
	*counting
	windows *loaded[slideWindow]
}

// step is the script's work on change ch: its checks, then its answer.
func (d *slideCall) step(ch *change) error {
	if !d.usable(ch) {
		d.answer(-1, -1)
		return nil
	}
	w, err := d.windows.at(ch.i)
	if err != nil {
		return err
	}
	o, id, k, refund := ch.o, ch.id, ch.at, ch.refund
	var value float64
	var flag int64
	fresh := d.applied.decide(o) && !(w.hasOld && o <= w.old)
	if fresh && w.unusable {
		value, flag = -1, -1
	} else if fresh {
		var marked bool
		if value, flag, marked = w.apply(k, ch.amount, refund); marked {
			if err := d.mark(w.marks, id, format(value)); err != nil {
				return err
			}
		}
	} else if value, flag, err = w.again(d.s, id, refund); err != nil {
		return err
	}
	d.answer(value, flag)
	return nil
}

// apply is what the script does with a change not counted before: its
// value and flag, and whether it is to be marked.
func (w *slideWindow) apply(k, by float64, refund bool) (float64, int64, bool) {
	if refund && !w.hasNewest {
		return 0, 0, false
	}
	if w.hasNewest && k <= w.newest-w.span-w.late {
		return w.total, 2, false
	}
	if !w.hasNewest || k > w.newest {
		w.advance(k)
	}
	if refund {
		value, flag, ok := w.take(k, by)
		if !ok {
			// The window moved on all the same: advance stays, unsaved.
			return 0, 0, false
		}
		w.dirty = true
		return value, flag, false
	}
	value, flag := w.add(k, by)
	w.dirty = true
	return value, flag, flag == 1
}

// again is the script's answer to a change counted before: an order's
// mark, or the window's value (-1, -1 when the window is unusable).
func (w *slideWindow) again(s *Store, id string, refund bool) (float64, int64, error) {
	if !refund {
		if m, ok, err := markOf(s, w.marks, id); err != nil || ok {
			return m, 1, err
		}
	}
	if w.unusable {
		return -1, -1, nil
	}
	return w.total, 0, nil
}

package model

import "strings"

// slideLayout is slide_and_check's call: a window's keys are its hash and
// marks, its arguments its span, lateness, threshold and lifetime.
var slideLayout = layout{keysPer: 2, argsPer: 4, changeArgs: 5, maxWindows: 64, maxChanges: 512, colon: true}

// slideAndCheck is slide_and_check.lua.
func slideAndCheck(s *Store, keys, args argv) (any, error) {
	args, ok := slidePacking.text(keys, args)
	if !ok {
		return refused(), nil
	}
	c, err := slideLayout.open(s, keys, args, "s:", func(a int) (bool, string) { return slideUsable(args, a) })
	if err != nil || c == nil {
		return refusal(err)
	}
	d := &slideCall{counting: c}
	d.windows = newLoaded(c.n, func(i int) (*slideWindow, error) { return loadSlide(s, keys, args, i, c.src) })
	for a := c.first; a <= len(args); a += 5 {
		if err := d.step(a); err != nil {
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

// slideUsable is the prologue's check of the window at ARGV[a], and its
// lifetime.
func slideUsable(args argv, a int) (bool, string) {
	const maxSpan, maxLate = 1000, 4000
	span, sok := args.at(a)
	late, lok := args.at(a + 1)
	threshold, tok := args.at(a + 2)
	ttl, ttlOK := args.at(a + 3)
	return positive(span, sok, 4) && smallInt(span) <= maxSpan && natural(late, lok, 4) &&
		smallInt(late) <= maxLate && positive(threshold, tok, 18) && positive(ttl, ttlOK, 10), ttl
}

// loadSlide is the script's window(i): the window's arguments, which the
// prologue found usable, and its hash.
func loadSlide(s *Store, keys, args argv, i int, src string) (*slideWindow, error) {
	a := 4 * i
	span, _ := args.at(a)
	late, _ := args.at(a + 1)
	ttl, _ := args.at(a + 3)
	w := &slideWindow{key: keys[2*i-1], marks: keys[2*i], span: float64(smallInt(span)),
		late: float64(smallInt(late)), ttl: ttl}
	// Checked usable: at most 18 digits, which tonumber rounds as Lua.
	w.threshold, _, _ = tonumber(args.at(a + 2))
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

// step is the script's work on the change at ARGV[a]: its checks, then
// its answer. An amount with a '-' is a refund.
func (d *slideCall) step(a int) error {
	i, o, id, ok := d.change(a)
	bucket, bucketOK := d.args.at(a + 3)
	amount, amountOK := d.args.at(a + 4)
	refund := amountOK && strings.HasPrefix(amount, "-")
	if refund {
		amount = amount[1:]
	}
	if !(ok && natural(bucket, bucketOK, 15) && positive(amount, amountOK, 18)) {
		d.answer(-1, -1)
		return nil
	}
	w, err := d.windows.at(i)
	if err != nil {
		return err
	}
	k, _, _ := tonumber(bucket, true)
	var value float64
	var flag int64
	fresh := d.applied.decide(o) && !(w.hasOld && o <= w.old)
	if fresh && w.unusable {
		value, flag = -1, -1
	} else if fresh {
		by, _, _ := tonumber(amount, true)
		var marked bool
		if value, flag, marked = w.apply(k, by, refund); marked {
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

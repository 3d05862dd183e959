package model

import "math"

// distinctWindow is distinct_and_check's state of one window.
type distinctWindow struct {
	key, values string
	marks       marks
	sliding     bool
	length      float64
	late        float64
	threshold   float64
	ttl         string
	newest      float64
	hasNewest   bool
	isNew       bool
	last        float64
	hasLast     bool
	latest      string
	count       float64 // fixed only: the values' ZCARD as this call has it
	dirty       bool
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
	const maxWindows, maxChanges, maxThreshold = 64, 512, 10000
	src, srcOK := args.at(1)
	life, lifeOK := args.at(2)
	nArg, nOK := args.at(3)
	if !(srcOK && len(src) >= 1 && len(src) <= 32 && positive(life, lifeOK, 10) && positive(nArg, nOK, 2)) {
		return refused(), nil
	}
	n := smallInt(nArg)
	if n > maxWindows || len(keys) != 3*n {
		return refused(), nil
	}
	first := 4 + 5*n
	rest := len(args) - first + 1
	if rest < 5 || rest%5 != 0 || rest/5 > maxChanges {
		return refused(), nil
	}
	if err := distinctKeys(keys); err != nil {
		return nil, err
	}
	usable := make([]bool, n+1)
	for i := 1; i <= n; i++ {
		a := 5*i - 1
		kind, kok := args.at(a)
		length, lok := args.at(a + 1)
		late, lateOK := args.at(a + 2)
		threshold, tok := args.at(a + 3)
		ttl, ttlOK := args.at(a + 4)
		usable[i] = kok && (kind == "fixed" || kind == "sliding") && positive(length, lok, 13) &&
			natural(late, lateOK, 13) && positive(threshold, tok, 5) && smallInt(threshold) <= maxThreshold &&
			positive(ttl, ttlOK, 10)
	}

	windows := make([]*distinctWindow, n+1)
	window := func(i int) (*distinctWindow, error) {
		if w := windows[i]; w != nil {
			return w, nil
		}
		a := 5*i - 1
		kind, _ := args.at(a)
		ttl, _ := args.at(a + 4)
		w := &distinctWindow{key: keys[3*i-3], values: keys[3*i-2], marks: marks{key: keys[3*i-1]},
			sliding: kind == "sliding", ttl: ttl}
		// Checked usable: digit strings that tonumber reads exactly.
		w.length, _, _ = tonumber(args.at(a + 1))
		w.late, _, _ = tonumber(args.at(a + 2))
		w.threshold, _, _ = tonumber(args.at(a + 3))
		// HMGET key t src r: a src of "t" or "r" reads that field, as the
		// map does.
		h, err := s.hgetall(w.key)
		if err != nil {
			return nil, err
		}
		ts, tok := h["t"]
		w.isNew = !tok
		if w.newest, w.hasNewest, err = tonumber(ts, tok); err != nil {
			return nil, err
		}
		ls, lok := h[src]
		if w.last, w.hasLast, err = tonumber(ls, lok); err != nil {
			return nil, err
		}
		w.latest = h["r"]
		if !w.sliding {
			c, err := s.zcard(w.values)
			if err != nil {
				return nil, err
			}
			w.count = float64(c)
		}
		windows[i] = w
		return w, nil
	}

	reply := make([]int64, 0, 2*(rest/5))
	for a := first; a <= len(args); a += 5 {
		iv, iok, err := tonumber(args.at(a))
		if err != nil {
			return nil, err
		}
		off, offOK := args.at(a + 1)
		id, idOK := args.at(a + 2)
		ts, tsOK := args.at(a + 3)
		value, valueOK := args.at(a + 4)
		if !(iok && iv >= 1 && iv <= float64(n) && iv == math.Floor(iv) && usable[int(iv)] && natural(off, offOK, 15) &&
			idOK && len(id) == 8 && natural(ts, tsOK, 15) && valueOK && len(value) >= 1 && len(value) <= 64) {
			reply = append(reply, -1, -1)
			continue
		}
		w, err := window(int(iv))
		if err != nil {
			return nil, err
		}
		o, _, _ := tonumber(off, true)
		t, _, _ := tonumber(ts, true)
		again := (w.hasLast && o <= w.last) || seen(w.latest, id)
		var mark string
		var marked bool
		if again || !w.hasLast {
			if mark, marked, err = w.marks.crossed(s, id); err != nil {
				return nil, err
			}
		}
		switch {
		case marked:
			m, _, err := tonumber(mark, true)
			if err != nil {
				return nil, err
			}
			reply = append(reply, integer(m), 1)
		case again:
			c, err := w.current(s)
			if err != nil {
				return nil, err
			}
			reply = append(reply, integer(c), 0)
		case w.sliding && w.hasNewest && t <= w.newest-w.length-w.late:
			c, err := w.current(s)
			if err != nil {
				return nil, err
			}
			reply = append(reply, integer(c), 2)
		default:
			var now float64
			var crossing bool
			if w.sliding {
				if now, crossing, err = w.slide(s, t, value); err != nil {
					return nil, err
				}
			} else {
				// Plain ZADD: a value seen again takes this order's
				// time, and only a new one counts.
				before := w.count
				added, err := s.zadd(w.values, value, float64(integer(t)), false)
				if err != nil {
					return nil, err
				}
				w.count = before + float64(added)
				now, crossing = w.count, before < w.threshold && w.count >= w.threshold
			}
			if !w.hasNewest || t > w.newest {
				w.newest, w.hasNewest = t, true
			}
			w.last, w.hasLast, w.dirty = o, true, true
			w.latest = remember(w.latest, id)
			if crossing {
				if err := w.marks.mark(s, id, format(now), life); err != nil {
					return nil, err
				}
				reply = append(reply, integer(now), 1)
			} else {
				reply = append(reply, integer(now), 0)
			}
		}
	}

	// The script's pairs(windows) runs in no set order; with distinct keys
	// each window writes only its own, so any order leaves the same.
	for _, w := range windows {
		if w == nil || !w.dirty {
			continue
		}
		if err := s.hset(w.key, "t", format(w.newest), src, format(w.last), "r", w.latest); err != nil {
			return nil, err
		}
		if err := s.zremRanks(w.values, 0, -(integer(w.threshold) + 2)); err != nil {
			return nil, err
		}
		if w.sliding {
			if err := s.zremUpTo(w.values, float64(integer(w.newest-2*w.length-w.late))); err != nil {
				return nil, err
			}
			s.expire(w.key, duration(w.ttl))
			s.expire(w.values, duration(w.ttl))
		} else if w.isNew || s.ttlSeconds(w.key) == -1 {
			// A running fixed window keeps its end.
			s.expire(w.key, duration(w.ttl))
			s.expire(w.values, duration(w.ttl))
		}
	}
	return reply, nil
}

package model

import "math"

// refundWindow is sales_decr's state of one window.
type refundWindow struct {
	key            string
	v              float64
	hasV           bool
	last           float64
	hasLast        bool
	latest         string
	changed, dirty bool
}

// salesDecr is sales_decr.lua.
func salesDecr(s *Store, keys, args argv) (any, error) {
	const maxChanges = 4096
	src, srcOK := args.at(1)
	n := len(keys)
	rest := len(args) - 1
	if !(srcOK && len(src) >= 1 && len(src) <= 32 && n >= 1 && n <= 64) ||
		rest < 4 || rest%4 != 0 || rest/4 > maxChanges {
		return refused(), nil
	}
	if err := distinctKeys(keys); err != nil {
		return nil, err
	}
	windows := make([]*refundWindow, n+1)
	window := func(i int) (*refundWindow, error) {
		if w := windows[i]; w != nil {
			return w, nil
		}
		key := keys[i-1]
		h, err := s.hgetall(key)
		if err != nil {
			return nil, err
		}
		w := &refundWindow{key: key, latest: h["r"]}
		vs, vok := h["v"]
		if w.v, w.hasV, err = tonumber(vs, vok); err != nil {
			return nil, err
		}
		ls, lok := h[src]
		if w.last, w.hasLast, err = tonumber(ls, lok); err != nil {
			return nil, err
		}
		windows[i] = w
		return w, nil
	}

	reply := make([]int64, 0, 2*(rest/4))
	for a := 2; a <= len(args); a += 4 {
		iv, iok, err := tonumber(args.at(a))
		if err != nil {
			return nil, err
		}
		off, offOK := args.at(a + 1)
		id, idOK := args.at(a + 2)
		amount, amountOK := args.at(a + 3)
		if !(iok && iv >= 1 && iv <= float64(n) && iv == math.Floor(iv) && natural(off, offOK, 15) &&
			idOK && len(id) == 8 && positive(amount, amountOK, 18)) {
			reply = append(reply, -1, -1)
			continue
		}
		w, err := window(int(iv))
		if err != nil {
			return nil, err
		}
		o, _, _ := tonumber(off, true)
		switch {
		case !w.hasV || w.v <= 0:
			reply = append(reply, 0, 0)
		case (w.hasLast && o <= w.last) || seen(w.latest, id):
			reply = append(reply, integer(w.v), 0)
		default:
			var remaining float64
			if w.v >= two53 {
				if w.changed {
					if err := s.hset(w.key, "v", format(w.v)); err != nil {
						return nil, err
					}
					w.changed = false
				}
				by, _ := parseInt("-" + amount)
				v, err := s.hincrby(w.key, "v", by)
				if err != nil {
					return nil, err
				}
				remaining = float64(v)
			} else {
				by, _, _ := tonumber(amount, true)
				remaining, w.changed = w.v-by, true
			}
			clamped := int64(0)
			if remaining < 0 {
				remaining, clamped, w.changed = 0, 1, true
			}
			w.v, w.last, w.hasLast, w.dirty = remaining, o, true, true
			w.latest = remember(w.latest, id)
			reply = append(reply, integer(remaining), clamped)
		}
	}

	for _, w := range windows {
		if w == nil || !w.dirty {
			continue
		}
		var err error
		if w.changed {
			err = s.hset(w.key, "v", format(w.v), src, format(w.last), "r", w.latest)
		} else {
			err = s.hset(w.key, src, format(w.last), "r", w.latest)
		}
		if err != nil {
			return nil, err
		}
	}
	return reply, nil
}

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
	const maxChanges = 4096
	src, srcOK := args.at(1)
	life, lifeOK := args.at(2)
	n := len(keys) - 1
	rest := len(args) - 2
	if !(srcOK && len(src) >= 1 && len(src) <= 32 && positive(life, lifeOK, 10) && n >= 1 && n <= 64) ||
		rest < 4 || rest%4 != 0 || rest/4 > maxChanges {
		return refused(), nil
	}
	if err := distinctKeys(keys); err != nil {
		return nil, err
	}
	a, err := readApplied(s, keys[0], "r:"+src)
	if err != nil {
		return nil, err
	}
	windows := make([]*refundWindow, n+1)
	window := func(i int) (*refundWindow, error) {
		if w := windows[i]; w != nil {
			return w, nil
		}
		w := &refundWindow{key: keys[i]}
		got, ok, gerr := s.getString(w.key)
		w.unusable = gerr != nil // redis.pcall: the key holds no string
		var err error
		if w.v, w.hasV, err = tonumber(got, ok && gerr == nil); err != nil {
			return nil, err
		}
		windows[i] = w
		return w, nil
	}

	reply := make([]int64, 0, 2*(rest/4))
	for at := 3; at <= len(args); at += 4 {
		is, isOK := args.at(at)
		var iv float64
		iok := positive(is, isOK, 2)
		if iok {
			iv, _, _ = tonumber(is, true)
		}
		off, offOK := args.at(at + 1)
		id, idOK := args.at(at + 2)
		amount, amountOK := args.at(at + 3)
		if !(iok && iv <= float64(n) && natural(off, offOK, 15) &&
			idOK && len(id) == 8 && positive(amount, amountOK, 18)) {
			reply = append(reply, -1, -1)
			continue
		}
		o, _, _ := tonumber(off, true)
		fresh := a.decide(o)
		w, err := window(int(iv))
		if err != nil {
			return nil, err
		}
		switch {
		case w.unusable:
			reply = append(reply, -1, -1)
		case !w.hasV || w.v <= 0:
			reply = append(reply, 0, 0)
		case !fresh:
			reply = append(reply, integer(w.v), 0)
		default:
			remaining, clamped, ok := w.subtract(s, amount)
			if !ok {
				reply = append(reply, -1, -1)
				continue
			}
			reply = append(reply, integer(remaining), clamped)
		}
	}

	for _, w := range windows {
		if w != nil && w.changed {
			s.setKeepTTL(w.key, format(w.v))
		}
	}
	if err := a.write(s, life, false); err != nil {
		return nil, err
	}
	return reply, nil
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

package model

import "math"

// Lua's numbers are doubles: these are the scripts' bounds as Lua holds
// them.
const (
	two53 = 9007199254740992.0    // 2^53
	two62 = 4611686018427387904.0 // 2^62
)

// marks is a window's crossing marks: a hash of event id -> counter.
type marks struct {
	key   string
	known bool // whether has is known (EXISTS asked)
	has   bool
}

// crossed is the scripts' crossed(w, id): the counter id crossed at, when
// it is marked.
func (m *marks) crossed(s *Store, id string) (string, bool, error) {
	if !m.known {
		m.known, m.has = true, s.exists(m.key)
	}
	if !m.has {
		return "", false, nil
	}
	return s.hget(m.key, id)
}

// mark is HSET marks id counter, then EXPIRE marks lifetime.
func (m *marks) mark(s *Store, id string, counter float64, lifetime string) error {
	if err := s.hset(m.key, id, format(counter)); err != nil {
		return err
	}
	s.expire(m.key, duration(lifetime))
	m.known, m.has = true, true
	return nil
}

// fixed is incr_and_check's state of one window.
type fixed struct {
	key            string
	marks          marks
	v              float64
	isNew          bool
	last           float64
	hasLast        bool
	latest         string
	threshold      float64
	changed, dirty bool
}

// incrAndCheck is incr_and_check.lua.
func incrAndCheck(s *Store, keys, args argv) (any, error) {
	const maxWindows, maxChanges = 64, 4096
	src, srcOK := args.at(1)
	life, lifeOK := args.at(2)
	nArg, nOK := args.at(3)
	if !(srcOK && len(src) >= 1 && len(src) <= 32 && positive(life, lifeOK, 10) && positive(nArg, nOK, 2)) {
		return refused(), nil
	}
	n := smallInt(nArg)
	if n > maxWindows || len(keys) != 2*n {
		return refused(), nil
	}
	first := 4 + 2*n
	rest := len(args) - first + 1
	if rest < 4 || rest%4 != 0 || rest/4 > maxChanges {
		return refused(), nil
	}
	if err := distinctKeys(keys); err != nil {
		return nil, err
	}
	usable := make([]bool, n+1)
	for i := 1; i <= n; i++ {
		length, lok := args.at(2 + 2*i)
		threshold, tok := args.at(3 + 2*i)
		usable[i] = positive(length, lok, 10) && positive(threshold, tok, 18)
	}

	windows := make([]*fixed, n+1)
	window := func(i int) (*fixed, error) {
		if w := windows[i]; w != nil {
			return w, nil
		}
		key := keys[2*i-2]
		h, err := s.hgetall(key)
		if err != nil {
			return nil, err
		}
		w := &fixed{key: key, marks: marks{key: keys[2*i-1]}, latest: h["r"]}
		vs, vok := h["v"]
		w.isNew = !vok
		if v, ok, err := tonumber(vs, vok); err != nil {
			return nil, err
		} else if ok {
			w.v = v
		}
		ls, lok := h[src]
		if w.last, w.hasLast, err = tonumber(ls, lok); err != nil {
			return nil, err
		}
		w.threshold, _, _ = tonumber(args.at(3 + 2*i))
		windows[i] = w
		return w, nil
	}

	reply := make([]int64, 0, 2*(rest/4))
	for a := first; a <= len(args); a += 4 {
		iv, iok, err := tonumber(args.at(a))
		if err != nil {
			return nil, err
		}
		off, offOK := args.at(a + 1)
		id, idOK := args.at(a + 2)
		inc, incOK := args.at(a + 3)
		if !(iok && iv >= 1 && iv <= float64(n) && iv == math.Floor(iv) && usable[int(iv)] && natural(off, offOK, 15) &&
			idOK && len(id) == 8 && incOK && (inc == "1" || positive(inc, true, 18))) {
			reply = append(reply, -1, -1)
			continue
		}
		i := int(iv)
		w, err := window(i)
		if err != nil {
			return nil, err
		}
		o, _, _ := tonumber(off, true)
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
			reply = append(reply, integer(w.v), 0)
		default:
			prev := w.v
			by, _, _ := tonumber(inc, true)
			sum := prev + by
			switch {
			case sum > two62:
				// Saturated, rather than a HINCRBY overflow no retry cures.
				if err := s.hset(w.key, "v", "4611686018427387904"); err != nil {
					return nil, err
				}
				w.v = two62
			case sum >= two53:
				// Past 2^53 doubles round: HINCRBY adds in int64.
				if w.changed {
					if err := s.hset(w.key, "v", format(w.v)); err != nil {
						return nil, err
					}
					w.changed = false
				}
				byInt, _ := parseInt(inc)
				v, err := s.hincrby(w.key, "v", byInt)
				if err != nil {
					return nil, err
				}
				w.v = float64(v)
			default:
				w.v, w.changed = sum, true
			}
			w.last, w.hasLast, w.dirty = o, true, true
			w.latest = remember(w.latest, id)
			crossed := int64(0)
			if prev < w.threshold && w.v >= w.threshold {
				crossed = 1
				if err := w.marks.mark(s, id, w.v, life); err != nil {
					return nil, err
				}
			}
			reply = append(reply, integer(w.v), crossed)
		}
	}

	for i, w := range windows {
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
		// A running window keeps its end; a new one, or one that lost
		// its TTL, gets its length.
		if w.isNew || s.ttlSeconds(w.key) == -1 {
			length, _ := args.at(2 + 2*i)
			s.expire(w.key, duration(length))
		}
	}
	return reply, nil
}

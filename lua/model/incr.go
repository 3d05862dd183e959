package model

import (
	"errors"
	"strconv"
)

// Lua's numbers are doubles: these are the scripts' bounds as Lua holds
// them.
const (
	two53 = 9007199254740992.0    // 2^53
	two62 = 4611686018427387904.0 // 2^62
)

// incrAndCheck is incr_and_check.lua.
func incrAndCheck(s *Store, keys, args argv) (any, error) {
	c, err := open(s, keys, args, incrPacking, "c:")
	if err != nil || c == nil {
		return refusal(err)
	}
	s.values = resize(s.values, c.n+1)
	clear(s.values)
	f := &fixedCall{counting: c, values: s.values}
	for k := range c.changes {
		ch := &c.changes[k]
		if !c.usable(ch) {
			c.answer(-1, -1)
			continue
		}
		var v float64
		var crossed int64
		if c.applied.decide(ch.o) {
			v, crossed, err = f.count(ch, k)
		} else {
			v, crossed, err = f.again(ch.i, ch.id)
		}
		if err != nil {
			return nil, err
		}
		c.answer(v, crossed)
	}
	return c.finish()
}

// known is a value, if ok.
type known struct {
	v  float64
	ok bool
}

// fixedCall is incr_and_check's state of its windows.
type fixedCall struct {
	*counting
	values []known // by window, from 1: its counter as the call has it
}

// count is the script's count of change ch, the call's k-th (from 0): -1,
// -1 when INCRBY (a window whose rule keeps no evidence) and HINCRBY both
// refuse the window's counter (after an upgrade, when it is a string).
func (f *fixedCall) count(ch *change, k int) (float64, int64, error) {
	i, w := ch.i, &f.windows[ch.i]
	key := f.keys[2*i-1]
	n, hashed, err := f.incr(key, int64(ch.amount), w.keep > 0)
	if err != nil {
		return -1, -1, nil // redis.pcall: an error table
	}
	v, t := float64(n), w.threshold
	first := int64(0)
	if v == ch.amount || v >= t {
		if n, v, err = f.arm(key, n, v, ch, w, hashed); err != nil {
			return 0, 0, err
		}
		if v >= t {
			if v, first, err = f.cross(ch, key, n, v, t, hashed); err != nil {
				return 0, 0, err
			}
		}
	}
	if w.keep > 0 && len(f.spans) > 0 && v < 1e15 && (first == 1 || v >= w.from && v < t) {
		if e, ok := f.entry(k); ok {
			if err := f.s.keepEntry(key, v, e, w); err != nil {
				return 0, 0, err
			}
		}
	}
	// Not kept in f.values: the script keeps only what its redeliveries
	// read (again), which a call's increasing offsets put before its
	// fresh changes.
	return v, first, nil
}

// incr is the script's count of by into a window: INCRBY when its rule
// keeps no evidence (keep false), and, when that is refused or it keeps
// some, HINCRBY of c, after an upgrade of a string into a hash when
// HINCRBY refuses it (WRONGTYPE). hashed is whether the count went to a
// hash's c.
func (f *fixedCall) incr(key string, by int64, keep bool) (n int64, hashed bool, err error) {
	if !keep {
		if n, err = f.s.incrby(key, by); err == nil {
			return n, false, nil
		}
	}
	n, err = f.s.hincrby(key, "c", by)
	if errors.Is(err, errWrongType) {
		if _, ok := f.s.upgrade(key); ok {
			n, err = f.s.hincrby(key, "c", by)
		}
	}
	return n, true, err
}

// arm is the script's TTL check of a window at its first change or its
// threshold: one whose TTL reads -1 (new, or persistent: counts of unknown
// age) starts again with change ch alone (DEL, then HSET c inc or, for a
// string, SET inc) unless it is new, and gets its length (EXPIRE). It
// returns the count, n and v.
func (f *fixedCall) arm(key string, n int64, v float64, ch *change, w *win, hashed bool) (int64, float64, error) {
	if f.s.ttlSeconds(key) != -1 {
		return n, v, nil
	}
	if v != ch.amount {
		f.s.del(key)
		if !hashed {
			f.s.setKeepTTL(key, format(ch.amount))
		} else if err := f.s.hset(key, "c", format(ch.amount)); err != nil {
			return 0, 0, err
		}
		n, v = int64(ch.amount), ch.amount
	}
	f.s.expire(key, secs(w.length))
	f.refresh = true
	return n, v, nil
}

// cross is the script's test of a count v (n exactly) at or past the
// threshold t: first is 1 when change ch crossed it, which leaves its mark;
// past 2^53 compared exactly (HGET c or GET: the digits n has, which the
// mark holds), and past 2^62 the counter saturated (HSET c 2^62, or SET
// 2^62 KEEPTTL). It returns the count as the script replies it.
func (f *fixedCall) cross(ch *change, key string, n int64, v, t float64, hashed bool) (float64, int64, error) {
	first, exact := int64(0), ""
	if v < two53 {
		if v-ch.amount < t {
			first = 1
		}
	} else {
		// The script's two-part comparison of v - inc < t, as v < inc + t:
		// exact in int64.
		exact = strconv.FormatInt(n, 10)
		if n < int64(ch.amount)+int64(t) {
			first = 1
		}
	}
	if v >= two62 {
		if !hashed {
			f.s.setKeepTTL(key, "4611686018427387904")
		} else if err := f.s.hset(key, "c", "4611686018427387904"); err != nil {
			return 0, 0, err
		}
		v = two62
	}
	if first == 1 {
		if exact == "" {
			exact = format(v)
		}
		if err := f.mark(f.keys[2*ch.i], ch.id, exact); err != nil {
			return 0, 0, err
		}
	}
	return v, first, nil
}

// again is the script's answer to a change applied before: its mark, or
// the counter's count as it is, read once a call (values).
func (f *fixedCall) again(i int, id string) (float64, int64, error) {
	if m, ok, err := markOf(f.s, f.keys[2*i], id); err != nil || ok {
		return m, 1, err
	}
	if !f.values[i].ok {
		v, err := f.s.countOf(f.keys[2*i-1], f.windows[i].keep > 0)
		if err != nil {
			return 0, 0, err
		}
		f.values[i] = known{v, true}
	}
	v := f.values[i].v
	if v == -1 {
		return -1, -1, nil
	}
	return v, 0, nil
}

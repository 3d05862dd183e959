package model

import (
	"strconv"
)

// Lua's numbers are doubles: these are the scripts' bounds as Lua holds
// them.
const (
	two53 = 9007199254740992.0    // 2^53
	two62 = 4611686018427387904.0 // 2^62
)

// incrLayout is incr_and_check's call: a window's keys are its counter
// and its marks, its arguments its length and threshold.
var incrLayout = layout{keysPer: 2, argsPer: 2, changeArgs: 4, maxWindows: 64, maxChanges: 4096}

// incrAndCheck is incr_and_check.lua.
func incrAndCheck(s *Store, keys, args argv) (any, error) {
	args, ok := incrPacking.text(keys, args)
	if !ok {
		return refused(), nil
	}
	c, err := incrLayout.open(s, keys, args, "c:", func(a int) (bool, string) {
		length, lok := args.at(a)
		threshold, tok := args.at(a + 1)
		return positive(length, lok, 10) && positive(threshold, tok, 18), length
	})
	if err != nil || c == nil {
		return refusal(err)
	}
	f := &fixedCall{counting: c, values: map[int]float64{}}
	for at := c.first; at <= len(args); at += 4 {
		i, o, id, ok := c.change(at)
		inc, incOK := args.at(at + 3)
		if !(ok && incOK && (inc == "1" || positive(inc, true, 18))) {
			c.answer(-1, -1)
			continue
		}
		var v float64
		var crossed int64
		if c.applied.decide(o) {
			v, crossed, err = f.count(i, id, inc)
		} else {
			v, crossed, err = f.again(i, id)
		}
		if err != nil {
			return nil, err
		}
		c.answer(v, crossed)
	}
	return c.finish()
}

// fixedCall is incr_and_check's state of its windows.
type fixedCall struct {
	*counting
	values map[int]float64
}

// count is the script's count(i, id, inc): -1, -1 when INCRBY fails.
func (f *fixedCall) count(i int, id, inc string) (float64, int64, error) {
	key := f.keys[2*i-1]
	threshold, _ := f.args.at(3 + 2*i)
	by, _ := parseInt(inc)
	n, err := f.s.incrby(key, by)
	if err != nil {
		return -1, -1, nil // redis.pcall: the window holds no integer, or would overflow
	}
	v := float64(n)
	length, _ := f.args.at(2 + 2*i)
	byF, _, _ := tonumber(inc, true)
	if v == byF {
		f.arm(key, length)
	}
	t, _, _ := tonumber(threshold, true)
	first, exact := int64(0), ""
	if v >= t && v != byF && f.s.ttlSeconds(key) == -1 {
		// Persistent: counts of unknown age; the window starts again with
		// this change alone (SET key inc EX length).
		f.s.setEx(key, inc, duration(length))
		f.refresh = true
		n, v = by, byF
	}
	if v >= t {
		if v < two53 {
			if v-byF < t {
				first = 1
			}
		} else {
			// below(exact, inc, threshold): exact in int64.
			exact = strconv.FormatInt(n, 10)
			ti, _ := parseInt(threshold)
			if n-by < ti {
				first = 1
			}
		}
	}
	if v >= two62 {
		f.s.setKeepTTL(key, "4611686018427387904")
		v = two62
	}
	if first == 1 {
		if exact == "" {
			exact = format(v)
		}
		if err := f.mark(f.keys[2*i], id, exact); err != nil {
			return 0, 0, err
		}
	}
	f.values[i] = v
	return v, first, nil
}

// arm is the script's arm(key, length): EXPIRE when TTL reads -1.
func (f *fixedCall) arm(key, length string) {
	if f.s.expireNX(key, duration(length)) {
		f.refresh = true
	}
}

// again is the script's again(i, id): -1, -1 where it is nil.
func (f *fixedCall) again(i int, id string) (float64, int64, error) {
	if m, ok, err := markOf(f.s, f.keys[2*i], id); err != nil || ok {
		return m, 1, err
	}
	if _, known := f.values[i]; !known {
		got, ok, err := f.s.getString(f.keys[2*i-1])
		if err != nil {
			return -1, -1, nil // redis.pcall: the key holds no string
		}
		v, isNum, nerr := tonumber(got, ok)
		if nerr != nil {
			return 0, 0, nerr
		}
		if !isNum {
			v = 0
		}
		f.values[i] = v
	}
	return f.values[i], 0, nil
}

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

// mark is the scripts' write of a crossing's mark: HSET marks id value
// (marks of another type, redis.pcall's error, deleted and written anew),
// then EXPIRE marks lifetime.
func mark(s *Store, marks, id, value, lifetime string) error {
	err := s.hset(marks, id, value)
	if errors.Is(err, errWrongType) {
		s.del(marks)
		err = s.hset(marks, id, value)
	}
	if err != nil {
		return err
	}
	s.expire(marks, duration(lifetime))
	return nil
}

// applied is incr_and_check's and sales_decr's memory of one source in a
// bucket: the field of the bucket's offsets, and which of a call's events
// count.
type applied struct {
	key, field string
	last       float64
	hasLast    bool
	dirty      bool
}

// readApplied is the scripts' HGET of the source's field, parsed; a field
// that does not parse is none, and offsets of another type (redis.pcall's
// error) are none and deleted.
func readApplied(s *Store, key, field string) (*applied, error) {
	a := &applied{key: key, field: field}
	got, ok, err := s.hget(key, field)
	if errors.Is(err, errWrongType) {
		s.del(key)
		return a, nil
	}
	if err != nil || !ok {
		return a, err
	}
	if natural(got, true, 15) {
		a.last, a.hasLast, _ = tonumber(got, true)
	}
	return a, nil
}

// decide is the scripts' counts(a, o): whether the change at offset o
// counts; an event's changes share its offset.
func (a *applied) decide(o float64) bool {
	if !a.hasLast || o > a.last {
		a.last, a.hasLast, a.dirty = o, true, true
		return true
	}
	return a.dirty && o == a.last
}

// write is the scripts' HSET of the field, when the call applied an
// offset, and when the field is new or refresh the offsets' lifetime,
// never shorter than the TTL they have: EXPIRE GT, then NX when GT
// answers 0.
func (a *applied) write(s *Store, life string, refresh bool) error {
	if !a.dirty {
		return nil
	}
	added, err := s.hsetField(a.key, a.field, format(a.last))
	if err != nil {
		return err
	}
	if (added || refresh) && !s.expireGT(a.key, duration(life)) {
		s.expireNX(a.key, duration(life))
	}
	return nil
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
	if n > maxWindows || len(keys) != 2*n+1 {
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
	offsetsLife := life
	for i := 1; i <= n; i++ {
		length, lok := args.at(2 + 2*i)
		threshold, tok := args.at(3 + 2*i)
		usable[i] = positive(length, lok, 10) && positive(threshold, tok, 18)
		if usable[i] && duration(length) > duration(offsetsLife) {
			offsetsLife = length
		}
	}
	a, err := readApplied(s, keys[0], "c:"+src)
	if err != nil {
		return nil, err
	}
	f := &fixedCall{s: s, keys: keys, args: args, life: life, values: map[int]float64{}}

	reply := make([]int64, 0, 2*(rest/4))
	for at := first; at <= len(args); at += 4 {
		idx, idxOK := args.at(at)
		off, offOK := args.at(at + 1)
		id, idOK := args.at(at + 2)
		inc, incOK := args.at(at + 3)
		i := 0
		if positive(idx, idxOK, 2) {
			i = smallInt(idx)
		}
		if !(i >= 1 && i <= n && usable[i] && natural(off, offOK, 15) &&
			idOK && len(id) == 8 && incOK && (inc == "1" || positive(inc, true, 18))) {
			reply = append(reply, -1, -1)
			continue
		}
		o, _, _ := tonumber(off, true)
		var v float64
		var crossed int64
		if a.decide(o) {
			v, crossed, err = f.count(i, id, inc)
		} else {
			v, crossed, err = f.again(i, id)
		}
		if err != nil {
			return nil, err
		}
		reply = append(reply, integer(v), crossed)
	}
	if err := a.write(s, offsetsLife, f.refresh); err != nil {
		return nil, err
	}
	return reply, nil
}

// fixedCall is incr_and_check's state of its windows.
type fixedCall struct {
	s       *Store
	keys    argv
	args    argv
	life    string
	values  map[int]float64
	refresh bool
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
	if v >= t {
		if v != byF {
			f.arm(key, length)
		}
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
		if err := mark(f.s, f.keys[2*i], id, exact, f.life); err != nil {
			return 0, 0, err
		}
		f.refresh = true
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

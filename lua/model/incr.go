package model

import (
	"errors"
	"strconv"
	"strings"
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
			v, crossed, err = f.count(ch)
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

var errHoldsEvidence = errors.New("a counter with evidence after its count")

// count is the script's count(i, id, inc): -1, -1 when INCRBY fails.
func (f *fixedCall) count(ch *change) (float64, int64, error) {
	i, w := ch.i, &f.windows[ch.i]
	key := f.keys[2*i-1]
	by := int64(ch.amount)
	var n int64
	var err error
	if got, ok, _ := f.s.getString(key); w.keeps && ok && strings.IndexByte(got, evidenceSep) >= 0 {
		err = errHoldsEvidence // read first (GET): INCRBY is not tried
	} else {
		n, err = f.s.incrby(key, by)
	}
	if err != nil {
		// redis.pcall: the window holds no integer (or would overflow):
		// its count, if evidence follows it.
		var ok bool
		if n, ok = f.s.incrBeforeEvidence(key, by); !ok {
			return -1, -1, nil
		}
	}
	v := float64(n)
	if v == ch.amount {
		f.arm(key, w.length)
	}
	t := w.threshold
	first, exact := int64(0), ""
	if v >= t && v != ch.amount && f.s.ttlSeconds(key) == -1 {
		// Persistent: counts of unknown age; the window starts again with
		// this change alone (SET key inc EX length).
		f.s.setEx(key, format(ch.amount), secs(w.length))
		f.refresh = true
		n, v = by, ch.amount
	}
	if v >= t {
		if v < two53 {
			if v-ch.amount < t {
				first = 1
			}
		} else {
			// below(exact, inc, threshold): exact in int64.
			exact = strconv.FormatInt(n, 10)
			if n-by < int64(t) {
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
		if err := f.mark(f.keys[2*i], ch.id, exact); err != nil {
			return 0, 0, err
		}
	}
	// Not kept in f.values: the script keeps only what its redeliveries
	// read (again), which a call's increasing offsets put before its
	// fresh changes.
	return v, first, nil
}

// arm is the script's arm(key, length): EXPIRE when TTL reads -1.
func (f *fixedCall) arm(key string, length float64) {
	if f.s.expireNX(key, secs(length)) {
		f.refresh = true
	}
}

// again is the script's again(i, id): -1, -1 where it is nil.
func (f *fixedCall) again(i int, id string) (float64, int64, error) {
	if m, ok, err := markOf(f.s, f.keys[2*i], id); err != nil || ok {
		return m, 1, err
	}
	if !f.values[i].ok {
		got, ok, err := f.s.getString(f.keys[2*i-1])
		if err != nil {
			return -1, -1, nil // redis.pcall: the key holds no string
		}
		v, isNum, nerr := tonumber(got, ok)
		if nerr != nil {
			return 0, 0, nerr
		}
		if !isNum {
			// tonumber(match(got, '^(%d+)\30')): a count with evidence.
			at := strings.IndexByte(got, evidenceSep)
			if v = 0; at > 0 && allDigits(got[:at]) {
				v, _, _ = tonumber(got[:at], true)
			}
		}
		f.values[i] = known{v, true}
	}
	return f.values[i].v, 0, nil
}

// evidenceSep starts each entry of a fixed window's evidence, after its
// count in its counter's string (lua.EvidenceSep).
const evidenceSep = '\x1e'

// incrBeforeEvidence is the script's count of a counter that holds
// evidence after its count (INCRBY refused it): the count, at most 15
// digits, added to and written back before the entries, its TTL kept;
// past 15 digits, the count alone, and INCRBY. ok is false when the value is
// not of that form (unusable).
func (s *Store) incrBeforeEvidence(key string, by int64) (int64, bool) {
	got, ok, err := s.getString(key)
	at := strings.IndexByte(got, evidenceSep)
	if err != nil || !ok || at < 0 || !natural(got[:at], true, 15) {
		return 0, false
	}
	c, _ := strconv.ParseInt(got[:at], 10, 64)
	if v := c + by; v < 1e15 { // at most 15 digits, as the script's #d <= 15
		s.setKeepTTL(key, strconv.FormatInt(v, 10)+got[at:])
		return v, true
	}
	s.setKeepTTL(key, got[:at])
	v, err := s.incrby(key, by)
	return v, err == nil
}

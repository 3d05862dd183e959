package model

import (
	"errors"
	"slices"
	"time"
)

// A fixed window's counter (incr_and_check.lua's header) is a string, its
// count, when its rule keeps no evidence, and a hash when it keeps some:
// its count in field "c" and each order its evidence keeps in a field
// named by the count it took the window to. What incr_and_check and
// sales_decr both do with one is here.

// evidenceSep is RS, which ends a counter's count in a string of the
// version before ("<count>" RS entry ...), and which no kept entry holds.
const evidenceSep = '\x1e'

// leadingCount is the scripts' match(got, '^(%d+)\30') or
// match(got, '^%d+$'): the digits got starts with, when RS or its end
// follows them; "" when none.
func leadingCount(got string) string {
	n := 0
	for n < len(got) && got[n] >= '0' && got[n] <= '9' {
		n++
	}
	if n == 0 || n < len(got) && got[n] != evidenceSep {
		return ""
	}
	return got[:n]
}

// upgrade is the scripts' move of a counter of the version before (a
// string) into a hash, after a command on its hash refused it (WRONGTYPE):
// GET; its count (leadingCount: natural, at most 2^62) into field c: PTTL, DEL,
// HSET c count, PEXPIRE what PTTL read when it is positive. ok is false,
// and nothing changed, when GET refuses the key or its value holds no such
// count.
func (s *Store) upgrade(key string) (count string, ok bool) {
	got, has, err := s.getString(key)
	if err != nil || !has {
		return "", false
	}
	c := leadingCount(got)
	if !natural(c, true, 19) || len(c) == 19 && c > "4611686018427387904" {
		return "", false
	}
	left := s.pttl(key)
	s.del(key)
	if err := s.hset(key, "c", c); err != nil {
		return "", false // not reached: the key is gone
	}
	if left > 0 {
		s.expire(key, time.Duration(left)*time.Millisecond)
	}
	return c, true
}

// countOf is incr_and_check's read of a counter for a change applied
// before, in its rule's layout first (keep: a hash) and in the other when
// that is refused: HGET c, or GET's count (leadingCount: a string, or one
// of the version before). 0 when it reads none; -1 where it is not digits
// without a leading zero, or both reads refuse the key, or a string holds
// no count.
func (s *Store) countOf(key string, keep bool) (float64, error) {
	var got string
	var has bool
	var err error
	str := !keep
	if keep {
		got, has, err = s.hget(key, "c")
		str = err != nil
	}
	if str {
		var raw string
		raw, has, err = s.getString(key)
		switch {
		case err != nil && keep:
			return -1, nil
		case err != nil:
			if got, has, err = s.hget(key, "c"); err != nil {
				return -1, nil
			}
		case has:
			if got = leadingCount(raw); got == "" {
				return -1, nil
			}
		}
	}
	if !has {
		return 0, nil
	}
	// type(got) == 'string' and (got == '0' or match(got, DIGITS)) and tonumber(got) or -1
	if got != "0" && (got == "" || got[0] == '0' || !allDigits(got)) {
		return -1, nil
	}
	v, _, err := tonumber(got, true)
	return v, err
}

// keepEntry is incr_and_check's write of an order's entry e into its
// window's counter, in the field named by the count v it took the window
// to (HSET); then, for a window w whose counts run past its keep entries
// (an amount's), past 2 keep + 1 fields (HLEN) the fields of its lowest
// counts go (HKEYS, HDEL), all but its keep highest.
func (s *Store) keepEntry(key string, v float64, e string, w *win) error {
	if err := s.hset(key, format(v), e); err != nil {
		return err
	}
	kept := w.keep
	if v-w.from < kept {
		return nil
	}
	if n, err := s.hlen(key); err != nil || n <= 2*int(kept)+1 {
		return err
	}
	fields, err := s.hkeys(key)
	if err != nil {
		return err
	}
	// Every field of at most 15 digits without a leading zero, sorted:
	// Lua's table.sort, whose order of equal numbers does not show, as
	// they name one field.
	var counts []float64
	for _, f := range fields {
		if positive(f, true, 15) {
			n, _, err := tonumber(f, true)
			if err != nil {
				return err
			}
			counts = append(counts, n)
		}
	}
	slices.Sort(counts)
	for _, n := range counts[:max(len(counts)-int(kept), 0)] {
		if err := s.hdel(key, format(n)); err != nil {
			return err
		}
	}
	return nil
}

// readRefunded is sales_decr's read of a window's counter, in its rule's
// layout first (keep: a hash) and in the other when that is refused:
// GET, whose value must be digits to be read as a string's count; else
// HGET c, with a string upgraded first (upgrade, on WRONGTYPE). hashed is
// the layout read. unusable when the read is an error, or a value not
// digits without a leading zero; v is 0 where there is none.
func (s *Store) readRefunded(key string, keep bool) (v float64, hashed, unusable bool, err error) {
	var got string
	var has bool
	hashed = keep
	if !keep {
		got, has, err = s.getString(key)
		hashed = err != nil || has && (got == "" || !allDigits(got))
	}
	if hashed {
		got, has, err = s.hget(key, "c")
		if errors.Is(err, errWrongType) {
			if c, ok := s.upgrade(key); ok {
				got, has, err = c, true, nil
			}
		}
	}
	if err != nil {
		return 0, hashed, true, nil // redis.pcall: an error table
	}
	// got and not (got == '0' or match(got, DIGITS))
	if has && got != "0" && (got == "" || got[0] == '0' || !allDigits(got)) {
		return 0, hashed, true, nil
	}
	v, _, err = tonumber(got, has)
	if err != nil {
		return 0, hashed, false, err
	}
	return v, hashed, false, nil
}

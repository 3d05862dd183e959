package model

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Hash commands, with Redis's replies and errors.

// hget is HGET: ok is false without the key or the field.
func (s *Store) hget(key, field string) (v string, ok bool, err error) {
	e, err := s.typed(key, kindHash)
	if e == nil {
		return "", false, err
	}
	v, ok = e.hash[field]
	return v, ok, nil
}

// hgetall is key's hash, nil without one. It is the store's own: callers
// must not change it.
func (s *Store) hgetall(key string) (map[string]string, error) {
	e, err := s.typed(key, kindHash)
	if e == nil {
		return nil, err
	}
	return e.hash, nil
}

// hset is HSET of field-value pairs.
func (s *Store) hset(key string, pairs ...string) error {
	if len(pairs) == 0 || len(pairs)%2 != 0 {
		return errors.New("ERR wrong number of arguments for 'hset' command")
	}
	e, err := s.create(key, kindHash)
	if err != nil {
		return err
	}
	for i := 0; i < len(pairs); i += 2 {
		e.hash[strings.Clone(pairs[i])] = strings.Clone(pairs[i+1])
	}
	return nil
}

// hsetField is HSET of one field: true when the field is new.
func (s *Store) hsetField(key, field, value string) (bool, error) {
	e, err := s.create(key, kindHash)
	if err != nil {
		return false, err
	}
	_, had := e.hash[field]
	e.hash[strings.Clone(field)] = strings.Clone(value)
	return !had, nil
}

// hdel is HDEL; a hash left empty is removed, as Redis removes it.
func (s *Store) hdel(key string, fields ...string) error {
	e, err := s.typed(key, kindHash)
	if e == nil {
		return err
	}
	for _, f := range fields {
		delete(e.hash, f)
	}
	if len(e.hash) == 0 {
		delete(s.keys, key)
	}
	return nil
}

// hlen is HLEN: 0 without the key.
func (s *Store) hlen(key string) (int, error) {
	e, err := s.typed(key, kindHash)
	if e == nil {
		return 0, err
	}
	return len(e.hash), nil
}

// hkeys is HKEYS, in no order (as Redis's order is none the scripts use).
func (s *Store) hkeys(key string) ([]string, error) {
	e, err := s.typed(key, kindHash)
	if e == nil {
		return nil, err
	}
	fields := make([]string, 0, len(e.hash))
	for f := range e.hash {
		fields = append(fields, f)
	}
	return fields, nil
}

// hincrby is HINCRBY with Redis's checks and errors: WRONGTYPE on a key of
// another type, the field must hold an integer as Redis writes one
// (string2ll: no sign but '-', no leading zero, no space), and the sum must
// not overflow. A new key has no TTL; an existing one keeps its own. A new
// field is the store's own copy; an existing one takes field as its key
// (a map's assignment does), which callers pass as a constant ("c"), so
// that a count, the commonest write, makes no copy of it.
func (s *Store) hincrby(key, field string, by int64) (int64, error) {
	e, err := s.create(key, kindHash)
	if err != nil {
		return 0, err
	}
	var v int64
	old, had := e.hash[field]
	if had {
		var ok bool
		if v, ok = parseInt(old); !ok {
			return 0, errHashNotInteger
		}
	} else {
		field = strings.Clone(field)
	}
	if (by > 0 && v > math.MaxInt64-by) || (by < 0 && v < math.MinInt64-by) {
		return 0, errOverflow
	}
	v += by
	e.hash[field] = strconv.FormatInt(v, 10)
	return v, nil
}

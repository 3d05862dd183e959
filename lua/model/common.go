package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// refused is a counting script's reply to a call whose own arguments are
// unusable.
func refused() []int64 { return []int64{-1, -1} }

// duration is a number of seconds the script has checked (positive, at most
// 10 digits) as EXPIRE and SET EX take it; past what a Duration holds it
// saturates, as far beyond any replay.
func duration(secs string) time.Duration {
	n, _ := strconv.ParseInt(secs, 10, 64)
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// secs is a number of seconds a packing holds (a uint32) as EXPIRE and
// SET EX take it.
func secs(n float64) time.Duration { return time.Duration(n) * time.Second }

// distinctKeys refuses a call that names one key twice: a script keeps a
// state for each window it is given, and two states of one key would be
// written back in the order of a Lua table's iteration, which the model does
// not follow. The lua package never sends one.
func distinctKeys(keys []string) error {
	if len(keys) > 16 {
		seen := make(map[string]struct{}, len(keys))
		for _, k := range keys {
			if _, ok := seen[k]; ok {
				return fmt.Errorf("model: a call names key %q twice", k)
			}
			seen[k] = struct{}{}
		}
		return nil
	}
	for i, k := range keys {
		for _, o := range keys[:i] {
			if k == o {
				return fmt.Errorf("model: a call names key %q twice", k)
			}
		}
	}
	return nil
}

// errNoKey is Redis's error for a script's redis.call of a KEYS[i] past
// the last (nil).
var errNoKey = errors.New("ERR Lua redis lib command arguments must be strings or integers")

// counting is a counting script's call past the part every one of them
// shares: its arguments read from their packing (call), the source's field
// of the offsets read once (applied), and at the end that field written
// and the offsets' lifetime lengthened (finish). Each script's own part is
// its windows and its changes.
type counting struct {
	*call
	s    *Store
	keys argv
	// offsetsLife is how long the offsets are to live, seconds: the
	// marks' lifetime, or the longest lifetime of a usable window past it.
	offsetsLife float64
	applied     *applied
	refresh     bool // a window or a mark got its lifetime
	reply       []int64
}

// open is the prologue of a call p reads, with field the prefix of the
// source's field of the offsets: nil, and no error, when the script
// refuses the call whole (-1, -1). The call's arguments go in the Store's
// own, reused from call to call.
func open(s *Store, keys, args argv, p packing, field string) (*counting, error) {
	if !p.read(keys, args, &s.args) {
		return nil, nil
	}
	c := &counting{call: &s.args, s: s, keys: keys, offsetsLife: s.args.life}
	for i := 1; i <= c.n; i++ {
		if w := &c.windows[i]; w.usable && w.ttl > c.offsetsLife {
			c.offsetsLife = w.ttl
		}
	}
	if err := distinctKeys(c.keys); err != nil {
		return nil, err
	}
	var err error
	c.applied, err = readApplied(s, keys[0], field+c.src)
	c.reply = make([]int64, 0, 2*len(c.changes))
	return c, err
}

// refusal is the answer to a call open did not take: its error, or -1,
// -1.
func refusal(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return refused(), nil
}

// usable is whether the script takes change ch: a window index in range
// and its other values (read), and a usable window.
func (c *counting) usable(ch *change) bool { return ch.i >= 1 && c.windows[ch.i].usable }

// answer appends a change's value and flag to the reply.
func (c *counting) answer(v float64, flag int64) { c.reply = append(c.reply, integer(v), flag) }

// mark is the scripts' mark of a crossing, which gives the offsets their
// lifetime again.
func (c *counting) mark(marks, id, value string) error {
	c.refresh = true
	return mark(c.s, marks, id, value, secs(c.life))
}

// finish is the end of every counting call: the offsets' field written
// and their lifetime lengthened (applied.write); its reply.
func (c *counting) finish() (any, error) {
	if err := c.applied.write(c.s, secs(c.offsetsLife), c.refresh); err != nil {
		return nil, err
	}
	return c.reply, nil
}

// mark is the scripts' write of a crossing's mark: HSET marks id value
// (marks of another type, redis.pcall's error, deleted and written anew),
// then EXPIRE marks lifetime.
func mark(s *Store, marks, id, value string, lifetime time.Duration) error {
	err := s.hset(marks, id, value)
	if errors.Is(err, errWrongType) {
		s.del(marks)
		err = s.hset(marks, id, value)
	}
	if err != nil {
		return err
	}
	s.expire(marks, lifetime)
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
func (a *applied) write(s *Store, life time.Duration, refresh bool) error {
	if !a.dirty {
		return nil
	}
	added, err := s.hsetField(a.key, a.field, format(a.last))
	if err != nil {
		return err
	}
	if (added || refresh) && !s.expireGT(a.key, life) {
		s.expireNX(a.key, life)
	}
	return nil
}

// markOf is the scripts' tonumber(redis.pcall('HGET', marks, id)) for a
// change counted before: the value its crossing was marked with, when it
// holds a number; marks of another type are none.
func markOf(s *Store, marks, id string) (float64, bool, error) {
	mark, ok, err := s.hget(marks, id)
	if errors.Is(err, errWrongType) {
		return 0, false, nil
	}
	if err != nil || !ok {
		return 0, false, err
	}
	m, isNum, err := tonumber(mark, true)
	return m, isNum && err == nil, err
}

// loaded is a call's windows by number from 1, each loaded at its first
// change, as the scripts' window(i) does.
type loaded[W any] struct {
	got  []*W
	load func(i int) (*W, error)
}

func newLoaded[W any](n int, load func(i int) (*W, error)) *loaded[W] {
	return &loaded[W]{got: make([]*W, n+1), load: load}
}

// at is window i, loaded now if no change has named it before.
func (l *loaded[W]) at(i int) (*W, error) {
	if w := l.got[i]; w != nil {
		return w, nil
	}
	w, err := l.load(i)
	if err != nil {
		return nil, err
	}
	l.got[i] = w
	return w, nil
}

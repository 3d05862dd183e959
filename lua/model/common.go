package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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

// smallInt is a number the script has checked to be a few digits.
func smallInt(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// errNoKey is Redis's error for a script's redis.call of a KEYS[i] past
// the last (nil).
var errNoKey = errors.New("ERR Lua redis lib command arguments must be strings or integers")

// counting is a counting script's call past the part every one of them
// shares: the prologue's checks of the source and the offsets' lifetime,
// the source's field of the offsets read once (applied), and at the end
// that field written and the offsets' lifetime lengthened (finish). Each
// script's own part is its windows and its changes.
type counting struct {
	s          *Store
	keys, args argv
	src, life  string // ARGV[1] and ARGV[2], checked
	// offsetsLife is how long the offsets are to live: life, or the
	// longest lifetime of a usable window past it.
	offsetsLife string
	n           int    // the windows
	first       int    // ARGV's index of the first change
	usable      []bool // by window, from 1; nil for every window usable
	applied     *applied
	refresh     bool // a window or a mark got its lifetime
	reply       []int64
}

// layout is the shape of a call of incr_and_check, slide_and_check or
// distinct_and_check: ARGV[3] the number of windows n, KEYS the offsets
// then keysPer keys a window, ARGV from 4 argsPer arguments a window, then
// the changes, changeArgs arguments each.
type layout struct {
	keysPer, argsPer, changeArgs int
	maxWindows, maxChanges       int
	colon                        bool // the source holds a ':'
}

// head is the prologue's check of ARGV[1] (the source) and ARGV[2] (the
// offsets' lifetime, seconds).
func head(args argv, colon bool) (src, life string, ok bool) {
	src, srcOK := args.at(1)
	life, lifeOK := args.at(2)
	return src, life, srcOK && len(src) >= 1 && len(src) <= 32 && (!colon || strings.Contains(src, ":")) &&
		positive(life, lifeOK, 10)
}

// open is the prologue of a call laid out as l: nil when the call is
// refused (-1, -1). window checks the arguments of the window at ARGV[a]:
// whether it is usable, and its lifetime.
func (l layout) open(s *Store, keys, args argv, field string, window func(a int) (bool, string)) (*counting, error) {
	src, life, ok := head(args, l.colon)
	nArg, nOK := args.at(3)
	if !ok || !positive(nArg, nOK, 2) {
		return nil, nil
	}
	n := smallInt(nArg)
	if n > l.maxWindows || len(keys) != l.keysPer*n+1 {
		return nil, nil
	}
	first := 4 + l.argsPer*n
	rest := len(args) - first + 1
	if rest < l.changeArgs || rest%l.changeArgs != 0 || rest/l.changeArgs > l.maxChanges {
		return nil, nil
	}
	c := &counting{s: s, keys: keys, args: args, src: src, life: life, offsetsLife: life, n: n, first: first,
		usable: make([]bool, n+1)}
	for i := 1; i <= n; i++ {
		var ttl string
		if c.usable[i], ttl = window(4 + l.argsPer*(i-1)); c.usable[i] && duration(ttl) > duration(c.offsetsLife) {
			c.offsetsLife = ttl
		}
	}
	return c, c.start(field+src, rest/l.changeArgs)
}

// start refuses a call that names a key twice, reads the offsets' field
// and makes room for the reply's pair a change.
func (c *counting) start(field string, changes int) error {
	if err := distinctKeys(c.keys); err != nil {
		return err
	}
	var err error
	c.applied, err = readApplied(c.s, c.keys[0], field)
	c.reply = make([]int64, 0, 2*changes)
	return err
}

// refusal is the answer to a call open or start did not take: its error,
// or -1, -1.
func refusal(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return refused(), nil
}

// window is the window a change's ARGV names, when it is a usable one; 0
// when not.
func (c *counting) window(idx string, ok bool) int {
	if !positive(idx, ok, 2) {
		return 0
	}
	i := smallInt(idx)
	if i > c.n || (c.usable != nil && !c.usable[i]) {
		return 0
	}
	return i
}

// change reads what every change starts with, ARGV[a] on: its window, a
// usable one, its offset and its order's id; ok is false when one does
// not pass, and the change is answered -1, -1.
func (c *counting) change(a int) (i int, o float64, id string, ok bool) {
	i = c.window(c.args.at(a))
	off, offOK := c.args.at(a + 1)
	id, idOK := c.args.at(a + 2)
	if i < 1 || !natural(off, offOK, 15) || !idOK || len(id) != 8 {
		return 0, 0, "", false
	}
	o, _, _ = tonumber(off, true)
	return i, o, id, true
}

// answer appends a change's value and flag to the reply.
func (c *counting) answer(v float64, flag int64) { c.reply = append(c.reply, integer(v), flag) }

// mark is the scripts' mark of a crossing, which gives the offsets their
// lifetime again.
func (c *counting) mark(marks, id, value string) error {
	c.refresh = true
	return mark(c.s, marks, id, value, c.life)
}

// finish is the end of every counting call: the offsets' field written
// and their lifetime lengthened (applied.write); its reply.
func (c *counting) finish() (any, error) {
	if err := c.applied.write(c.s, c.offsetsLife, c.refresh); err != nil {
		return nil, err
	}
	return c.reply, nil
}

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

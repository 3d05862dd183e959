// Package model runs what fraudwatch's counting and alert scripts do, in Go,
// on a keyspace in memory whose clock the caller moves: a replay's Redis
// (fraudwatch backtest). It answers the very calls the lua package sends,
// through a go-redis hook (Store.Hook), so a replay runs production's engine
// and only the scripts' bodies are this package's. Each body follows its
// script line by line, Lua's numbers (doubles) and Redis's replies
// included, and its tests hold it to the script, call by call, on a real
// redis-server.
//
// Why it exists: Lua interpreted in Go (miniredis runs the scripts in
// gopher-lua) costs a replay far more than the work itself, about 100 µs an
// event, where these bodies cost a few.
package model

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// replyError is an error Redis replies: go-redis reads one as a
// redis.Error, which callers tell from a failed connection.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks it a redis.Error.
func (replyError) RedisError() {}

// Redis's error replies the model gives.
const (
	// errWrongType is Redis's reply to a command on a key of another type.
	errWrongType      = replyError("WRONGTYPE Operation against a key holding the wrong kind of value")
	errHashNotInteger = replyError("ERR hash value is not an integer")
	errOverflow       = replyError("ERR increment or decrement would overflow")
	errNotInteger     = replyError("ERR value is not an integer or out of range")
)

// Store is a keyspace of strings, hashes and sorted sets, with TTLs that run
// on a clock only SetTime moves. It is safe for concurrent use; calls run
// one at a time, as scripts do in Redis.
type Store struct {
	mu   sync.Mutex
	base time.Time     // the clock's first time
	now  time.Duration // the clock, as time after base
	keys map[string]*entry
	// When keys are due, first first, each key at most once (its first
	// due time, pushed again when it comes up if the key was re-armed
	// since): a sliding window re-arms its TTL on every call, and one
	// entry a call would grow the heap with the events.
	due DueKeys
	// args is the counting call's arguments, read from its packing; its
	// slices are reused by the next call.
	args call
	// values is incr_and_check's windows' values, by index from 1; reused.
	values []known
}

// entry is one key's value: exactly one of str, hash and zset is in use.
type entry struct {
	hash map[string]string
	zset *zset
	str  string
	kind kind
	ttl  bool          // it has a TTL
	due  time.Duration // when it expires, after base, if ttl
	// queued is when the heap holds it, if inQueue.
	queued  time.Duration
	inQueue bool
}

type kind uint8

const (
	kindString kind = iota + 1
	kindHash
	kindZSet
)

// New returns an empty Store whose clock reads now.
func New(now time.Time) *Store {
	return &Store{base: now, keys: map[string]*entry{}}
}

// SetTime moves the clock to now: every key due by then is gone, as Redis
// drops a key whose expiry time has come. A clock moved back stays where it
// was.
func (s *Store) SetTime(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := after(now.Sub(s.base), 0)
	if at <= s.now {
		return
	}
	s.now = at
	for {
		d, ok := s.due.PopDue(at)
		if !ok {
			return
		}
		// The key's own entry, when it has one: a key replaced since holds
		// its own, queued at its own time.
		e := s.keys[d.Key]
		if e == nil || !e.inQueue || e.queued != d.At {
			continue // removed, or queued again earlier
		}
		e.inQueue = false
		switch {
		case !e.ttl:
		case e.due <= at:
			delete(s.keys, d.Key)
		default:
			s.queue(d.Key, e)
		}
	}
}

// alive is how many keys are alive.
func (s *Store) alive() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.keys {
		if !e.expired(s.now) {
			n++
		}
	}
	return n
}

func (e *entry) expired(now time.Duration) bool { return e.ttl && e.due <= now }

// get is key's entry, nil when there is none or it has expired.
func (s *Store) get(key string) *entry {
	e := s.keys[key]
	if e == nil {
		return nil
	}
	if e.expired(s.now) {
		delete(s.keys, key)
		return nil
	}
	return e
}

// typed is key's entry if it holds a k, nil when there is none, and
// WRONGTYPE when it holds another kind.
func (s *Store) typed(key string, k kind) (*entry, error) {
	e := s.get(key)
	if e != nil && e.kind != k {
		return nil, errWrongType
	}
	return e, nil
}

// create is key's entry of kind k, made empty (without a TTL) when there is
// none.
func (s *Store) create(key string, k kind) (*entry, error) {
	e, err := s.typed(key, k)
	if err != nil || e != nil {
		return e, err
	}
	e = &entry{kind: k}
	switch k {
	case kindHash:
		e.hash = map[string]string{}
	case kindZSet:
		e.zset = &zset{scores: map[string]float64{}}
	}
	s.keys[strings.Clone(key)] = e
	return e, nil
}

// exists is EXISTS of one key.
func (s *Store) exists(key string) bool { return s.get(key) != nil }

// del is DEL of one key.
func (s *Store) del(key string) bool {
	if s.get(key) == nil {
		return false
	}
	delete(s.keys, key)
	return true
}

// expire is EXPIRE (or PEXPIRE) with a positive ttl: false when there is no
// key.
func (s *Store) expire(key string, ttl time.Duration) bool {
	e := s.get(key)
	if e == nil {
		return false
	}
	s.setDue(key, e, ttl)
	return true
}

func (s *Store) setDue(key string, e *entry, ttl time.Duration) {
	e.ttl, e.due = true, after(s.now, ttl)
	if !e.inQueue || e.due < e.queued {
		s.queue(key, e)
	}
}

func (s *Store) queue(key string, e *entry) {
	e.queued, e.inQueue = e.due, true
	s.due.Push(e.due, key)
}

// ttlSeconds is TTL: -2 without a key, -1 without a TTL, else the seconds
// left, rounded as Redis rounds them.
func (s *Store) ttlSeconds(key string) int64 {
	ms := s.pttl(key)
	if ms < 0 {
		return ms
	}
	return (ms + 500) / 1000
}

// pttl is PTTL: -2 without a key, -1 without a TTL, else the milliseconds
// left.
func (s *Store) pttl(key string) int64 {
	e := s.get(key)
	switch {
	case e == nil:
		return -2
	case !e.ttl:
		return -1
	}
	return (e.due - s.now).Milliseconds()
}

// after is t plus ttl, saturating as time.Time's Sub does.
func after(t, ttl time.Duration) time.Duration {
	if t > math.MaxInt64-ttl {
		return math.MaxInt64
	}
	return t + ttl
}

// String commands.

// getString is GET: ok is false without a key.
func (s *Store) getString(key string) (v string, ok bool, err error) {
	e, err := s.typed(key, kindString)
	if e == nil {
		return "", false, err
	}
	return e.str, true, nil
}

// incrby is INCRBY (a negative by: DECRBY) with Redis's checks: WRONGTYPE
// on a key of another type, the key must hold an integer as Redis writes
// one (string2ll), and the sum must not overflow. A new key has no TTL; an
// existing one keeps its own.
func (s *Store) incrby(key string, by int64) (int64, error) {
	e, err := s.typed(key, kindString)
	if err != nil {
		return 0, err
	}
	var v int64
	if e != nil {
		var ok bool
		if v, ok = parseInt(e.str); !ok {
			return 0, errNotInteger
		}
	}
	if (by > 0 && v > math.MaxInt64-by) || (by < 0 && v < math.MinInt64-by) {
		return 0, errOverflow
	}
	if e == nil {
		e, _ = s.create(key, kindString)
	}
	v += by
	e.str = strconv.FormatInt(v, 10)
	return v, nil
}

// setKeepTTL is SET key value KEEPTTL: a value of any kind is replaced,
// and the key keeps its TTL (none when it is new).
func (s *Store) setKeepTTL(key, value string) {
	if e := s.get(key); e != nil {
		e.kind, e.str, e.hash, e.zset = kindString, strings.Clone(value), nil, nil
		return
	}
	s.keys[strings.Clone(key)] = &entry{kind: kindString, str: strings.Clone(value)}
}

// setEx is SET key value EX ttl: any value of any kind is replaced.
func (s *Store) setEx(key, value string, ttl time.Duration) {
	key = strings.Clone(key)
	e := &entry{kind: kindString, str: strings.Clone(value)}
	s.keys[key] = e
	s.setDue(key, e, ttl)
}

// expireNX is EXPIRE key ttl NX: a TTL for a key that has none; false when
// there is no key or it has one.
func (s *Store) expireNX(key string, ttl time.Duration) bool {
	e := s.get(key)
	if e == nil || e.ttl {
		return false
	}
	s.setDue(key, e, ttl)
	return true
}

// expireGT is EXPIRE key ttl GT: a TTL for a key whose own ends sooner;
// false when there is no key, it has no TTL (GT counts none as infinite),
// or its own ends as late or later.
func (s *Store) expireGT(key string, ttl time.Duration) bool {
	e := s.get(key)
	if e == nil || !e.ttl || after(s.now, ttl) <= e.due {
		return false
	}
	s.setDue(key, e, ttl)
	return true
}

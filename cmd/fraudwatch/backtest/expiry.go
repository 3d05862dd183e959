package backtest

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/fraudwatch/fraudwatch/lua/model"
)

// expiry runs a replay server's clock. miniredis moves TTLs only with
// FastForward, which visits and sorts every key, so a clock stepped each
// second cost the span times the keys alive. expiry keeps due times in a
// heap instead, and at each step deletes just the keys FastForward would.
//
// A key whose due time expiry keeps has the TTL unset, which no command
// sets. Commands that may change a TTL (set, re-arm or remove one, delete
// or empty a key) have their arguments noted as they run. After the batch
// each is looked at again: a TTL other than unset was just set; none
// means no TTL, or no key.
type expiry struct {
	mr   *miniredis.Miniredis
	base time.Time // the clock's first time
	now  time.Time // the server's clock

	mu      sync.Mutex // the hook runs on the server's goroutines
	touched map[string]struct{}
	spare   map[string]struct{} // touched's other half, for settle

	// When keys are due, as time after base: a time.Time is three times
	// the size, and a replay holds one for each TTL it sets.
	due   map[string]time.Duration
	queue model.DueKeys
}

// unset is the TTL of every key whose expiry is kept in due: longer than
// any window or cooldown, and not a TTL that EXPIRE, PEXPIRE or SET gives.
// Scripts that only ask whether a key has a TTL (TTL is -1 or not) see the
// truth; one that copied a TTL (PTTL, then PEXPIRE) would copy unset:
// evidence_add does, and a replay keeps no evidence.
const unset = 100*365*24*time.Hour + time.Nanosecond

// keepsTTL lists the commands the scripts call that neither set nor drop a
// TTL, nor delete a key; any other command's arguments are looked at
// again, which costs a little and is never wrong.
var keepsTTL = map[string]bool{
	"GET": true, "EXISTS": true, "TTL": true, "PTTL": true, "TIME": true, "INCRBY": true, "DECRBY": true,
	"HGET": true, "HMGET": true, "HGETALL": true, "HLEN": true, "HVALS": true,
	"HSET": true, "HINCRBY": true, "LPUSH": true, "LRANGE": true,
	"ZADD": true, "ZCARD": true, "ZCOUNT": true, "ZSCORE": true,
	// The client's own.
	"EVALSHA": true, "EVAL": true, "SCRIPT": true, "PING": true, "HELLO": true, "CLIENT": true,
}

// newExpiry runs mr's clock from now on; it must be made before mr has a
// key.
func newExpiry(mr *miniredis.Miniredis, now time.Time) (*expiry, error) {
	// miniredis makes its server with its first connection.
	c, err := mr.Dial()
	if err != nil {
		return nil, fmt.Errorf("backtest: in-process redis: %w", err)
	}
	c.Close()
	e := &expiry{mr: mr, base: now, now: now, touched: map[string]struct{}{}, spare: map[string]struct{}{}, due: map[string]time.Duration{}}
	mr.SetTime(now)
	mr.Server().SetPreHook(e.note)
	return e, nil
}

func (e *expiry) note(_ *server.Peer, cmd string, args ...string) bool {
	if !keepsTTL[cmd] {
		e.mu.Lock()
		for _, a := range args {
			e.touched[a] = struct{}{}
		}
		e.mu.Unlock()
	}
	return false // and the command runs
}

// settle takes in the TTLs the commands since the last settle set or
// dropped; it is called when no command runs.
func (e *expiry) settle() {
	// mu is not held while miniredis is called: a command running then
	// would hold miniredis's lock and wait on mu.
	e.mu.Lock()
	touched := e.touched
	e.touched, e.spare = e.spare, nil
	e.mu.Unlock()
	for k := range touched {
		switch ttl := e.mr.TTL(k); ttl {
		case unset:
		case 0:
			delete(e.due, k)
		default:
			at := e.after(e.now, ttl)
			e.due[k] = at
			e.queue.Push(at, k)
			e.mr.SetTTL(k, unset)
		}
	}
	clear(touched)
	e.spare = touched
}

// advance moves the clock to now and deletes the keys due by then, as
// FastForward deletes a key whose time left reaches 0.
func (e *expiry) advance(now time.Time) {
	e.settle()
	e.now = now
	e.mr.SetTime(now)
	until := e.after(now, 0)
	for d, ok := e.queue.PopDue(until); ok; d, ok = e.queue.PopDue(until) {
		// A key set again since has a later entry, or none.
		if at, queued := e.due[d.Key]; queued && at == d.At {
			delete(e.due, d.Key)
			e.mr.Del(d.Key)
		}
	}
}

// after is how long after base ttl after t is. It saturates, as
// time.Time's Sub does, for inputs that span centuries.
func (e *expiry) after(t time.Time, ttl time.Duration) time.Duration {
	d := t.Sub(e.base)
	if d > math.MaxInt64-ttl {
		return math.MaxInt64
	}
	return d + ttl
}

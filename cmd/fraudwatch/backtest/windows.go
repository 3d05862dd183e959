package backtest

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/model"
)

// lives are keys' ends on a replay's clock, as its store keeps TTLs: a key
// lives until its end, and is forgotten once the clock reaches it.
type lives struct {
	base  time.Time
	now   time.Duration // the clock, after base
	end   map[string]time.Duration
	queue model.DueKeys
}

func newLives(base time.Time) lives {
	return lives{base: base, end: map[string]time.Duration{}}
}

// set gives key ttl from now.
func (l *lives) set(key string, ttl time.Duration) {
	at := l.now + ttl
	l.end[key] = at
	l.queue.Push(at, key)
}

// left is how long key has left; false when it is not alive.
func (l *lives) left(key string) (time.Duration, bool) {
	at, ok := l.end[key]
	if !ok || at <= l.now {
		return 0, false
	}
	return at - l.now, true
}

// advance moves the clock to t, forgetting the keys it reaches, each of
// which gone is told.
func (l *lives) advance(t time.Time, gone func(key string)) {
	l.now = t.Sub(l.base)
	for d, ok := l.queue.PopDue(l.now); ok; d, ok = l.queue.PopDue(l.now) {
		// A key given another end since has a later entry.
		if at, queued := l.end[d.Key]; queued && at == d.At {
			delete(l.end, d.Key)
			gone(d.Key)
		}
	}
}

// windows follows a share's windows as its scripts keep them, from their
// calls and replies (tap): when each window ends on the replay's clock,
// and which fraud orders each counted, and when. A scored backtest needs
// both: evidence_add gives a window's evidence the window's remaining life
// (evidence.go), and a fraud order counted into a crossing's window after
// the crossing, before the window ends, is caught (docs/outcomes.md).
//
// Fixed windows (incr_and_check's, and distinct_and_check's fixed ones)
// end their length after the change that starts them; sliding ones
// (slide_and_check's, distinct_and_check's) live their TTL after each
// order they count. A refund never starts a window: sales_decr keeps its
// window's end, and a sliding window's refund is followed, in any batch
// with evidence to write, by the order that renews it.
type windows struct {
	lives
	fraud   map[int64]bool
	counted map[string][]countedOrder
	err     error // the first reply read that does not fit its call
}

// countedOrder is a fraud order's event, by its offset in the replay, and
// the clock of the batch that counted it into a window.
type countedOrder struct {
	offset int64
	clock  time.Duration
}

func newWindows(base time.Time, fraud map[int64]bool) *windows {
	return &windows{lives: newLives(base), fraud: fraud, counted: map[string][]countedOrder{}}
}

// readings are how windows reads the counting calls, with the fingerprint
// of the code each follows (lua.Fingerprint: comments, blank lines and
// indentation aside): a script whose code changed is a call windows does
// not read, which fails a scored replay (checkFollowed) until this file is
// checked against the new code and the pin follows.
var readings = map[string]struct {
	name, pin string
	read      func(w *windows, c call, reply []int64)
}{
	lua.IncrAndCheckName:     {lua.IncrAndCheckName, "d3ef50b3e86ea7d8e9f9e00b94f6e6988ddedf01", (*windows).readCount},
	lua.SlideAndCheckName:    {lua.SlideAndCheckName, "1f53b62a484d3ac387146630580eeb2b7800e53a", (*windows).readSlide},
	lua.DistinctAndCheckName: {lua.DistinctAndCheckName, "84252d7787b450946b0ae3675e4d9c0fe38db572", (*windows).readDistinct},
}

// readingBySHA is readings by the SHA1s EVALSHA calls their scripts by.
var readingBySHA = func() map[string]reading {
	m := map[string]reading{}
	for _, r := range readings {
		if sha, ok := lua.SHA(r.name); ok {
			m[sha] = reading{r.name, r.read}
		}
	}
	return m
}()

type reading struct {
	name string
	read func(w *windows, c call, reply []int64)
}

// checkFollowed says which script's code changed since what a scored
// replay does of it (readings, evidence) was written.
func checkFollowed() error {
	followed := []struct{ name, pin, file string }{{lua.EvidenceAddName, evidencePin, "evidence.go"}}
	for _, r := range readings {
		followed = append(followed, struct{ name, pin, file string }{r.name, r.pin, "windows.go"})
	}
	for _, f := range followed {
		got, err := lua.Fingerprint(f.name)
		if err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
		if got != f.pin {
			return fmt.Errorf("backtest: a scored replay follows %s's code of fingerprint %s; it is now %s: check %s against it, then its pin", f.name, f.pin, got, f.file)
		}
	}
	return nil
}

// call is a script call's KEYS and ARGV as the client sends them, read
// one argument at a time: most are never needed.
type call struct{ keys, argv []any }

// int is ARGV[i] (from 0) as an int; false when there is none.
func (c call) int(i int) (int, bool) {
	if i < 0 || i >= len(c.argv) {
		return 0, false
	}
	switch v := c.argv[i].(type) {
	case int64:
		return int(v), true
	case *int64:
		return int(*v), true
	case int:
		return v, true
	}
	n, err := strconv.Atoi(text(c.argv[i]))
	return n, err == nil
}

// key is KEYS[i] (from 0); false when there is none.
func (c call) key(i int) (string, bool) {
	if i < 0 || i >= len(c.keys) {
		return "", false
	}
	return text(c.keys[i]), true
}

// readCount reads incr_and_check: a change counted into a window that is
// not alive starts it, for the window's length.
func (w *windows) readCount(c call, reply []int64) {
	n, ok := c.int(2)
	first := 3 + 2*n
	changes := (len(c.argv) - first) / 4
	for j := 0; ok && j < changes && 2*j+1 < len(reply); j++ {
		if reply[2*j] == -1 && reply[2*j+1] == -1 {
			continue // refused: nothing written
		}
		i, ok1 := c.int(first + 4*j)
		length, ok2 := c.int(3 + 2*(i-1))
		key, ok3 := c.key(2*i - 1)
		if !ok1 || !ok2 || !ok3 {
			break
		}
		if _, alive := w.left(key); !alive {
			w.set(key, time.Duration(length)*time.Second)
		}
		w.count(key, c, first+4*j+1)
	}
	w.check(ok && len(reply) == 2*changes, "incr_and_check")
}

// readSlide reads slide_and_check: an order it counted (not late, not
// refused) gives its window the window's TTL.
func (w *windows) readSlide(c call, reply []int64) {
	n, ok := c.int(2)
	first := 3 + 4*n
	changes := (len(c.argv) - first) / 5
	for j := 0; ok && j < changes && 2*j+1 < len(reply); j++ {
		amount, _ := c.int(first + 5*j + 4)
		if flag := reply[2*j+1]; reply[2*j] == -1 || (flag != 0 && flag != 1) || amount < 0 {
			continue
		}
		i, ok1 := c.int(first + 5*j)
		ttl, ok2 := c.int(3 + 4*(i-1) + 3)
		key, ok3 := c.key(2*i - 1)
		if !ok1 || !ok2 || !ok3 {
			break
		}
		w.set(key, time.Duration(ttl)*time.Second)
		w.count(key, c, first+5*j+1)
	}
	w.check(ok && len(reply) == 2*changes, "slide_and_check")
}

// readDistinct reads distinct_and_check: an order it counted starts a
// fixed window that is not alive, and renews a sliding one, each for the
// TTL the call gives it.
func (w *windows) readDistinct(c call, reply []int64) {
	n, ok := c.int(2)
	first := 3 + 5*n
	changes := (len(c.argv) - first) / 5
	for j := 0; ok && j < changes && 2*j+1 < len(reply); j++ {
		if flag := reply[2*j+1]; reply[2*j] == -1 || (flag != 0 && flag != 1) {
			continue
		}
		i, ok1 := c.int(first + 5*j)
		ttl, ok2 := c.int(3 + 5*(i-1) + 4)
		key, ok3 := c.key(3*i - 2)
		if !ok1 || !ok2 || !ok3 {
			break
		}
		if _, alive := w.left(key); !alive || text(c.argv[3+5*(i-1)]) == "sliding" {
			w.set(key, time.Duration(ttl)*time.Second)
		}
		w.count(key, c, first+5*j+1)
	}
	w.check(ok && len(reply) == 2*changes, "distinct_and_check")
}

// count notes a fraud order counted into key, its offset ARGV[i].
func (w *windows) count(key string, c call, i int) {
	if off, ok := c.int(i); ok && w.fraud[int64(off)] {
		w.counted[key] = append(w.counted[key], countedOrder{int64(off), w.now})
	}
}

// check keeps a failure to read a call, for the replay to report.
func (w *windows) check(ok bool, script string) {
	if !ok && w.err == nil {
		w.err = fmt.Errorf("backtest: a scored replay could not read a call of %s and its reply", script)
	}
}

// observe reads one command and its reply, if it is a counting call.
func (w *windows) observe(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 || cmd.Err() != nil || !strings.EqualFold(text(args[0]), "evalsha") {
		return
	}
	sha := text(args[1])
	r, ok := readingBySHA[sha]
	if !ok {
		return
	}
	var reply []int64
	var err error
	switch c := cmd.(type) {
	case *redis.IntSliceCmd: // lua.Batch's
		reply = c.Val()
	case *redis.Cmd:
		reply, err = c.Int64Slice()
	default:
		err = fmt.Errorf("a reply of %T", cmd)
	}
	nkeys, ok := call{argv: args}.int(2)
	if err != nil || !ok || 3+nkeys > len(args) {
		w.check(false, sha)
		return
	}
	c, ok := unpack(r.name, call{keys: args[3 : 3+nkeys], argv: args[3+nkeys:]})
	if !ok {
		w.check(false, r.name)
		return
	}
	r.read(w, c, reply)
}

// unpack is a counting call with its packed numbers (ARGV[2]) read into
// one argument each, the layout the readers read (model.Unpack).
func unpack(name string, c call) (call, bool) {
	keys := make([]string, len(c.keys))
	for i, k := range c.keys {
		keys[i] = text(k)
	}
	args := make([]string, len(c.argv))
	for i, a := range c.argv {
		args[i] = text(a)
	}
	unpacked, ok := model.Unpack(name, keys, args)
	argv := make([]any, len(unpacked))
	for i, a := range unpacked {
		argv[i] = a
	}
	return call{keys: c.keys, argv: argv}, ok
}

// text is a command's argument as go-redis writes it.
func text(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case *string:
		return *v
	case []byte:
		return string(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case *int64:
		return strconv.FormatInt(*v, 10)
	case int:
		return strconv.Itoa(v)
	case encoding.BinaryMarshaler:
		b, _ := v.MarshalBinary()
		return string(b)
	}
	return fmt.Sprint(a)
}

// tap is a client whose every command goes to another, the replay's
// server, and whose counting calls windows reads with their replies.
type tap struct {
	inner *redis.Client
	w     *windows
}

// tapped is a client for the scripts whose commands go to inner, read by w.
func tapped(inner *redis.Client, w *windows) *redis.Client {
	c := redis.NewClient(&redis.Options{MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("backtest: the tap has no server of its own")
		}})
	c.AddHook(tap{inner, w})
	return c
}

func (t tap) DialHook(next redis.DialHook) redis.DialHook { return next }

func (t tap) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := t.inner.Process(ctx, cmd)
		t.w.observe(cmd)
		return err
	}
}

func (t tap) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		_, err := t.inner.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, cmd := range cmds {
				if err := p.Process(ctx, cmd); err != nil {
					return err
				}
			}
			return nil
		})
		for _, cmd := range cmds {
			t.w.observe(cmd)
		}
		return err
	}
}

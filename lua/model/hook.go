package model

import (
	"context"
	"crypto/sha1"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua"
)

// script is a script's body: its reply is an int64 (a Lua number) or an
// []int64 (a table of them), as Redis would send it.
type script func(s *Store, keys, args argv) (any, error)

// followed names, for each script the model has, the fingerprint of the
// code its body follows (lua.Fingerprint: comments, blank lines and
// indentation aside) and the body. A script whose code changed has another
// fingerprint, which the model does not answer: a replay fails (Follows,
// and Eval says which) rather than run a body that no longer follows its
// script; TestModelFollowsTheScripts says which, and its body and this pin
// change together. A comment edit changes neither.
var followed = map[string]struct {
	pin  string
	body script
}{
	lua.IncrAndCheckName:     {"d3ef50b3e86ea7d8e9f9e00b94f6e6988ddedf01", incrAndCheck},
	lua.SalesDecrName:        {"a0d455eae33c2cfb66c983cf68145984a9263005", salesDecr},
	lua.SlideAndCheckName:    {"1f53b62a484d3ac387146630580eeb2b7800e53a", slideAndCheck},
	lua.DistinctAndCheckName: {"84252d7787b450946b0ae3675e4d9c0fe38db572", distinctAndCheck},
	lua.AlertClaimName:       {"92dd77b18f88e7efdfb066136b8adaa5593ca9d1", alertClaim},
	lua.AlertSettleName:      {"97126e4d0015fee91e4f2f735a7c17a59d86b934", alertSettle},
}

// scripts are the bodies the model has, by the SHA1s EVALSHA calls their
// scripts by (lua.SHA), those whose code follows its pin alone; stale says
// why each other followed script is not answered. The other scripts
// (silences, budgets, evidence) a replay never calls.
var scripts, stale = index()

// index is scripts and stale, from followed.
func index() (map[string]script, map[string]error) {
	m, bad := map[string]script{}, map[string]error{}
	for name, f := range followed {
		sha, ok := lua.SHA(name)
		if !ok {
			continue // Follows says so
		}
		if err := follows(name, f.pin); err != nil {
			bad[sha] = err
			continue
		}
		m[sha] = f.body
	}
	return m, bad
}

// follows says whether script name's code is still the one pin is of.
func follows(name, pin string) error {
	got, err := lua.Fingerprint(name)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if got != pin {
		return fmt.Errorf("model: script %s's code has changed (fingerprint %s; the model follows %s): change its body in lua/model to match, then its pin in followed",
			name, got, pin)
	}
	return nil
}

// Follows says whether every body of the model follows its script's code
// as the lua package has it: a replay on the model checks it before it
// starts.
func Follows() error {
	var errs []error
	for name, f := range followed {
		errs = append(errs, follows(name, f.pin))
	}
	return errors.Join(errs...)
}

// Eval runs the script whose SHA1 is sha, as EVALSHA would.
func (s *Store) Eval(sha string, keys, args []string) (any, error) {
	body, ok := scripts[sha]
	if !ok {
		if err := stale[sha]; err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("model: no script %s", sha)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return body(s, keys, args)
}

// Client is a go-redis client that runs the lua package's calls on s, and
// never reaches a server: every command goes to s (Hook).
func (s *Store) Client() *redis.Client {
	rdb := redis.NewClient(&redis.Options{
		MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("model: a replay's store has no server")
		},
	})
	rdb.AddHook(hook{s})
	return rdb
}

// hook answers EVALSHA and EVAL of the scripts the model has, SCRIPT LOAD
// and SCRIPT EXISTS, the commands that write an alert's seal beside its
// crossing's mark (lua.Scripts.Seal: HSET, EXPIRE NX), and HGETALL (a
// crossing's evidence, lua.Scripts.CounterEvidence); any other command
// fails. A command Redis would refuse with an error reply (WRONGTYPE) gets
// one go-redis reads as Redis's (a redis.Error).
type hook struct{ s *Store }

func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// A call whose context has ended fails, as a server's would: a replay
// that is interrupted stops at its next call.
func (h hook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := ctx.Err(); err != nil {
			cmd.SetErr(err)
			return err
		}
		h.s.process(cmd)
		return cmd.Err()
	}
}

func (h hook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var first error
		for _, cmd := range cmds {
			if err := ctx.Err(); err != nil {
				cmd.SetErr(err)
			} else {
				h.s.process(cmd)
			}
			if first == nil {
				first = cmd.Err()
			}
		}
		return first
	}
}

func (s *Store) process(cmd redis.Cmder) {
	reply, err := s.command(cmd.Args())
	if err == nil {
		err = setReply(cmd, reply)
	}
	if err != nil {
		cmd.SetErr(err)
	}
}

func (s *Store) command(args []any) (any, error) {
	strs := make([]string, len(args))
	for i, a := range args {
		v, err := text(a)
		if err != nil {
			return nil, err
		}
		strs[i] = v
	}
	if len(strs) == 0 {
		return nil, errors.New("model: empty command")
	}
	switch name := strings.ToLower(strs[0]); {
	case (name == "evalsha" || name == "eval") && len(strs) >= 3:
		sha := strs[1]
		if name == "eval" {
			sum := sha1.Sum([]byte(sha))
			sha = hex.EncodeToString(sum[:])
		}
		n, err := strconv.Atoi(strs[2])
		if err != nil || n < 0 || 3+n > len(strs) {
			return nil, fmt.Errorf("model: %s: bad number of keys %q", name, strs[2])
		}
		return s.Eval(sha, strs[3:3+n], strs[3+n:])
	case name == "script" && len(strs) == 3 && strings.EqualFold(strs[1], "load"):
		sum := sha1.Sum([]byte(strs[2]))
		sha := hex.EncodeToString(sum[:])
		if _, ok := scripts[sha]; !ok {
			return nil, errors.Join(fmt.Errorf("model: no model of script %s", sha), stale[sha])
		}
		return sha, nil
	case name == "script" && len(strs) >= 2 && strings.EqualFold(strs[1], "exists"):
		found := make([]bool, len(strs)-2)
		for i, sha := range strs[2:] {
			_, found[i] = scripts[sha]
		}
		return found, nil
	case name == "hgetall" && len(strs) == 2:
		// A fixed window's evidence, read after its crossing
		// (lua.Scripts.CounterEvidence).
		return s.hgetallCommand(strs[1])
	case name == "hset" && len(strs) >= 4 && len(strs)%2 == 0:
		return s.hsetCommand(strs[1], strs[2:])
	case name == "expire" && len(strs) == 4 && strings.EqualFold(strs[3], "nx"):
		secs, err := strconv.ParseInt(strs[2], 10, 64)
		if err != nil || secs <= 0 {
			return nil, fmt.Errorf("model: expire: a TTL of %q seconds", strs[2])
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.expireNX(strs[1], time.Duration(secs)*time.Second), nil
	default:
		return nil, fmt.Errorf("model: command %s is not modelled", strs[0])
	}
}

// hgetallCommand is HGETALL: a copy of key's hash, empty without one.
func (s *Store) hgetallCommand(key string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.hgetall(key)
	if err != nil {
		return nil, err
	}
	return maps.Clone(h), nil
}

// hsetCommand is HSET: how many of the fields are new.
func (s *Store) hsetCommand(key string, pairs []string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var added int64
	for i := 0; i < len(pairs); i += 2 {
		isNew, err := s.hsetField(key, pairs[i], pairs[i+1])
		if err != nil {
			return 0, err
		}
		if isNew {
			added++
		}
	}
	return added, nil
}

// text is an argument as go-redis writes it.
func text(a any) (string, error) {
	switch v := a.(type) {
	case string:
		return v, nil
	case *string:
		return *v, nil
	case []byte:
		return string(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case *int64:
		return strconv.FormatInt(*v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		return string(b), err
	}
	return "", fmt.Errorf("model: an argument of type %T", a)
}

// setReply gives cmd the reply, as go-redis would have read it from Redis.
func setReply(cmd redis.Cmder, reply any) error {
	switch c := cmd.(type) {
	case *redis.IntSliceCmd:
		if v, ok := reply.([]int64); ok {
			c.SetVal(v)
			return nil
		}
	case *redis.Cmd:
		switch v := reply.(type) {
		case int64:
			c.SetVal(v)
			return nil
		case []int64:
			list := make([]any, len(v))
			for i, n := range v {
				list[i] = n
			}
			c.SetVal(list)
			return nil
		}
	case *redis.StringCmd:
		if v, ok := reply.(string); ok {
			c.SetVal(v)
			return nil
		}
	case *redis.IntCmd:
		if v, ok := reply.(int64); ok {
			c.SetVal(v)
			return nil
		}
	case *redis.BoolCmd:
		if v, ok := reply.(bool); ok {
			c.SetVal(v)
			return nil
		}
	case *redis.MapStringStringCmd:
		if v, ok := reply.(map[string]string); ok {
			if v == nil {
				v = map[string]string{}
			}
			c.SetVal(v)
			return nil
		}
	case *redis.BoolSliceCmd:
		if v, ok := reply.([]bool); ok {
			c.SetVal(v)
			return nil
		}
	}
	return fmt.Errorf("model: a %T reply to a %T", reply, cmd)
}

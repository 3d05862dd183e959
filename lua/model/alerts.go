package model

import (
	"errors"
	"math"
	"strconv"
)

// seconds is alert_claim's seconds(s, zero).
func seconds(s string, ok, zero bool) bool {
	return ok && ((zero && s == "0") || positive(s, true, 10))
}

// settled are alert_claim's answers for a settled record.
var settled = map[string]int64{"sent": 2, "failed": 3, "suppressed": 0, "silenced": 4}

// alertClaim is alert_claim.lua.
func alertClaim(s *Store, keys, args argv) (any, error) {
	id, idOK := args.at(1)
	cooldown, cok := args.at(2)
	life, lok := args.at(3)
	claimant, clok := args.at(4)
	body, bok := args.at(5)
	if !(idOK && len(id) >= 1 && len(id) <= 256 && seconds(cooldown, cok, true) && seconds(life, lok, false) &&
		clok && len(claimant) >= 1 && len(claimant) <= 512 && bok && len(body) <= 1<<20 && (len(keys) == 4 || len(keys) == 6)) {
		return int64(-1), nil
	}
	// A record or an alert's hash of another type goes.
	for _, k := range []string{keys[1], keys[3]} {
		if e := s.get(k); e != nil && e.kind != kindHash {
			s.del(k)
		}
	}
	state, _, err := s.hget(keys[1], "state")
	if err != nil {
		return nil, err
	}
	if n, ok := settled[state]; ok {
		return n, nil
	}
	// redis.pcall: an old record of another type is none.
	old, _, err := s.getString(keys[2])
	if err != nil && !errors.Is(err, errWrongType) {
		return nil, err
	}
	if n, ok := settled[old]; ok {
		return n, nil
	}
	if state == "pending" {
		if holder, ok, _ := s.hget(keys[1], "claimant"); ok && holder != claimant {
			return int64(5), nil
		}
	}
	c := claiming{s: s, keys: keys, life: life, claimant: claimant}
	c.decision, _, _ = s.hget(keys[3], "decision")
	if c.decision != "send" && c.decision != "suppressed" && c.decision != "silenced" {
		c.decision = ""
	}
	if len(keys) == 6 && (c.decision == "" || state == "pending") {
		silenced, err := s.silenced(keys[4:])
		if err != nil {
			return nil, err
		}
		if silenced {
			return c.settle(4, "silenced", "silenced")
		}
	}
	switch {
	case c.decision == "suppressed":
		return c.settle(0, "", "suppressed")
	case c.decision == "silenced":
		return c.settle(4, "", "silenced")
	case c.decision == "" && cooldown != "0":
		holder, held, err := s.getString(keys[0])
		if err != nil && !errors.Is(err, errWrongType) {
			return nil, err
		}
		if !held {
			s.setEx(keys[0], id, duration(cooldown))
		} else if holder != id {
			return c.settle(0, "suppressed", "suppressed")
		}
	}
	return c.send(state, body)
}

// claiming is one alert_claim call past its settled answers.
type claiming struct {
	s                        *Store
	keys                     argv
	life, claimant, decision string
}

// decide is alert_claim's decide(d): the first decision stays.
func (c claiming) decide(d string) error {
	if c.decision != "" {
		return nil
	}
	if err := c.s.hset(c.keys[3], "decision", d); err != nil {
		return err
	}
	c.s.expire(c.keys[3], duration(c.life))
	return nil
}

// put is alert_claim's put(s).
func (c claiming) put(state string) error {
	if err := c.s.hset(c.keys[1], "state", state, "claimant", c.claimant); err != nil {
		return err
	}
	c.s.expire(c.keys[1], duration(c.life))
	return nil
}

// settle decides d (none: "") and puts state, answering n.
func (c claiming) settle(n int64, d, state string) (any, error) {
	if d != "" {
		if err := c.decide(d); err != nil {
			return nil, err
		}
	}
	return n, c.put(state)
}

// send opens the alert's life (its first decision, with a body), decides
// send, counts the receiver taken unless its claim was pending, and puts
// pending.
func (c claiming) send(state, body string) (any, error) {
	if c.decision == "" && body != "" {
		now := c.s.base.Add(c.s.now).UnixMicro() / 1000
		if err := c.s.hset(c.keys[3], "status", "open", "opened_at", strconv.FormatInt(now, 10), "alert", body); err != nil {
			return nil, err
		}
	}
	if err := c.decide("send"); err != nil {
		return nil, err
	}
	if state != "pending" {
		taken, err := c.s.count(c.keys[3], "taken")
		if err != nil {
			return nil, err
		}
		if err := c.s.hset(c.keys[3], "taken", strconv.FormatInt(taken+1, 10)); err != nil {
			return nil, err
		}
	}
	return int64(1), c.put("pending")
}

// count is the scripts' math.max(0, math.floor(tonumber(HGET) or 0)).
func (s *Store) count(key, field string) (int64, error) {
	v, ok, err := s.hget(key, field)
	if err != nil {
		return 0, err
	}
	n, isNum, err := tonumber(v, ok)
	if err != nil || !isNum {
		return 0, err
	}
	return max(0, integer(math.Floor(n))), nil
}

// silenced reports whether a silence of keys (hashes of silence id -> its
// end) runs by the store's clock, as alert_claim reads them: TIME in whole
// milliseconds, silences of another type none.
func (s *Store) silenced(keys []string) (bool, error) {
	now := float64(s.base.Add(s.now).UnixMicro() / 1000)
	for _, k := range keys {
		h, err := s.hgetall(k)
		if err != nil && !errors.Is(err, errWrongType) {
			return false, err
		}
		for _, end := range h {
			v, _, err := tonumber(end, true)
			if err != nil {
				return false, err
			}
			if v > now {
				return true, nil
			}
		}
	}
	return false, nil
}

// alertSettle is alert_settle.lua.
func alertSettle(s *Store, keys, args argv) (any, error) {
	id, idOK := args.at(1)
	outcome, ook := args.at(2)
	life, lok := args.at(3)
	claimant, clok := args.at(4)
	receipt, rok := args.at(5)
	if !(len(keys) == 3 && idOK && len(id) >= 1 && len(id) <= 256 && ook &&
		(outcome == "sent" || outcome == "failed" || outcome == "parked") && positive(life, lok, 10) &&
		clok && len(claimant) >= 1 && len(claimant) <= 512 && rok && len(receipt) <= 512 &&
		(outcome == "sent" || receipt == "")) {
		return int64(-1), nil
	}
	if e := s.get(keys[1]); e != nil && e.kind != kindHash {
		s.del(keys[1])
	}
	if outcome == "parked" {
		state, _, _ := s.hget(keys[1], "state")
		holder, held, _ := s.hget(keys[1], "claimant")
		if state != "pending" || !held || holder != claimant {
			return int64(0), nil
		}
		if err := s.hset(keys[1], "claimant", "parked"); err != nil {
			return nil, err
		}
		s.expire(keys[1], duration(life))
		return int64(1), nil
	}
	if outcome == "failed" {
		if err := giveBack(s, keys, id); err != nil {
			return nil, err
		}
	}
	if err := s.hset(keys[1], "state", outcome); err != nil {
		return nil, err
	}
	if receipt != "" {
		if err := s.hset(keys[1], "receipt", receipt); err != nil {
			return nil, err
		}
	}
	s.expire(keys[1], duration(life))
	return int64(1), nil
}

// giveBack is alert_settle's failed: the receiver leaves the alert's taken
// count if its claim was pending, and the cooldown goes back when the
// count is then 0 and the alert still holds it.
func giveBack(s *Store, keys argv, id string) error {
	var taken int64
	if e := s.get(keys[2]); e != nil && e.kind == kindHash {
		var err error
		if taken, err = s.count(keys[2], "taken"); err != nil {
			return err
		}
		if state, _, _ := s.hget(keys[1], "state"); taken > 0 && state == "pending" {
			taken--
			if err := s.hset(keys[2], "taken", strconv.FormatInt(taken, 10)); err != nil {
				return err
			}
		}
	}
	holder, held, err := s.getString(keys[0])
	if err != nil && !errors.Is(err, errWrongType) {
		return err
	}
	if taken == 0 && held && holder == id {
		s.del(keys[0])
	}
	return nil
}

package model

import "errors"

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
	if !(idOK && len(id) >= 1 && len(id) <= 256 && seconds(cooldown, cok, true) && seconds(life, lok, false) &&
		clok && len(claimant) >= 1 && len(claimant) <= 512 && (len(keys) == 3 || len(keys) == 5)) {
		return int64(-1), nil
	}
	// A record of another type goes.
	if e := s.get(keys[1]); e != nil && e.kind != kindHash {
		s.del(keys[1])
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
	put := func(state string) error {
		if err := s.hset(keys[1], "state", state, "claimant", claimant); err != nil {
			return err
		}
		s.expire(keys[1], duration(life))
		return nil
	}
	if len(keys) == 5 {
		silenced, err := s.silenced(keys[3:])
		if err != nil {
			return nil, err
		}
		if silenced {
			return int64(4), put("silenced")
		}
	}
	if cooldown != "0" {
		holder, held, err := s.getString(keys[0])
		if err != nil && !errors.Is(err, errWrongType) {
			return nil, err
		}
		if !held {
			s.setEx(keys[0], id, duration(cooldown))
		} else if holder != id {
			return int64(0), put("suppressed")
		}
	}
	return int64(1), put("pending")
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
	if !(len(keys) == 2 && idOK && len(id) >= 1 && len(id) <= 256 && ook &&
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
		holder, held, err := s.getString(keys[0])
		if err != nil && !errors.Is(err, errWrongType) {
			return nil, err
		}
		if held && holder == id {
			s.del(keys[0])
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

package model

import "errors"

// seconds is alert_claim's seconds(s, zero).
func seconds(s string, ok, zero bool) bool {
	return ok && ((zero && s == "0") || positive(s, true, 10))
}

// alertClaim is alert_claim.lua.
func alertClaim(s *Store, keys, args argv) (any, error) {
	id, idOK := args.at(1)
	cooldown, cok := args.at(2)
	life, lok := args.at(3)
	if !(idOK && len(id) >= 1 && len(id) <= 256 && seconds(cooldown, cok, true) && seconds(life, lok, false) &&
		(len(keys) == 2 || len(keys) == 4)) {
		return int64(-1), nil
	}
	// redis.pcall: keys of another type are none.
	state, _, err := s.getString(keys[1])
	if err != nil && !errors.Is(err, errWrongType) {
		return nil, err
	}
	switch state {
	case "sent":
		return int64(2), nil
	case "failed":
		return int64(3), nil
	case "suppressed":
		return int64(0), nil
	case "silenced":
		return int64(4), nil
	}
	if len(keys) == 4 {
		// TIME is the store's clock, in whole milliseconds.
		now := float64(s.base.Add(s.now).UnixMicro() / 1000)
		for _, k := range keys[2:] {
			h, err := s.hgetall(k)
			if err != nil && !errors.Is(err, errWrongType) {
				return nil, err
			}
			for _, end := range h {
				v, _, err := tonumber(end, true)
				if err != nil {
					return nil, err
				}
				if v > now {
					s.setEx(keys[1], "silenced", duration(life))
					return int64(4), nil
				}
			}
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
			s.setEx(keys[1], "suppressed", duration(life))
			return int64(0), nil
		}
	}
	s.setEx(keys[1], "pending", duration(life))
	return int64(1), nil
}

// alertSettle is alert_settle.lua.
func alertSettle(s *Store, keys, args argv) (any, error) {
	id, idOK := args.at(1)
	outcome, ook := args.at(2)
	life, lok := args.at(3)
	if !(idOK && len(id) >= 1 && len(id) <= 256 && ook && (outcome == "sent" || outcome == "failed") && positive(life, lok, 10)) {
		return int64(-1), nil
	}
	if len(keys) < 2 {
		return nil, errNoKey
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
	s.setEx(keys[1], outcome, duration(life))
	return int64(1), nil
}

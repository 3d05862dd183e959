package model

import (
	"errors"
	"strings"
	"time"
)

// rs ends each entry of a window's evidence; us separates an entry's
// fields (lua/evidence.lua).
const (
	rs = "\x1e"
	us = "\x1f"
)

// keptWindow is evidence.lua's state of one window that keeps evidence.
type keptWindow struct {
	key, win, ttl string // its key, its window's key, its window's length (seconds)
	slides        bool
	keep          int
	from          float64
	entries       []string // the call's, oldest first
	read          bool
	body          string // the evidence before the call: its entries
	have          int    // and how many its count says
}

// keptWindows is evidence.lua's check of the windows that keep evidence,
// ARGV[at..] and KEYS[keyAt+1..]: nil when the call is refused.
func keptWindows(keys, args argv, n, m, at, keyAt int, window func(i int) (win, ttl string, slides bool)) map[int]*keptWindow {
	if len(args) < at+3*m-1 {
		return nil
	}
	kept := make(map[int]*keptWindow, m)
	for j := 1; j <= m; j++ {
		a := at + 3*j - 3
		is, _ := args.at(a)
		ks, _ := args.at(a + 1)
		fs, _ := args.at(a + 2)
		if !positive(is, true, 2) || smallInt(is) > n || kept[smallInt(is)] != nil || !positive(ks, true, 2) ||
			smallInt(ks) > 20 || !positive(fs, true, 18) {
			return nil
		}
		i := smallInt(is)
		e := &keptWindow{key: keys[keyAt+j-1], keep: smallInt(ks)}
		e.from, _, _ = tonumber(fs, true)
		e.win, e.ttl, e.slides = window(i)
		kept[i] = e
	}
	return kept
}

// text is the evidence text of the change at ARGV[a]: none in a call
// without evidence.
func (c *counting) text(a int) string {
	if c.kept == nil {
		return ""
	}
	t, _ := c.args.at(a + c.stride - 1)
	return t
}

// keep is evidence.lua's keep when window i keeps evidence and the
// change's value v (flag its flag) is from the window's evidence value on
// and below threshold, or crossed it, and its text is one to keep.
func (c *counting) keep(i int, v float64, flag int64, threshold float64, text string) error {
	e := c.kept[i]
	if e == nil || !(flag == 1 || (flag == 0 && v >= e.from && v < threshold)) {
		return nil
	}
	if len(text) > 512 || strings.Contains(text, rs) {
		if flag == 1 {
			c.lists = append(c.lists, "") // not kept: its alert goes without evidence
		}
		return nil
	}
	entry := text
	if p := strings.Index(text, us+us); p >= 0 {
		entry = text[:p+1] + format(v) + text[p+1:]
	}
	e.entries = append(e.entries, entry)
	if flag != 1 {
		return nil
	}
	var list []string
	for j := len(e.entries) - 1; j >= 0 && len(list) < e.keep; j-- {
		list = append(list, e.entries[j])
	}
	s := strings.Join(list, rs) + rs
	if len(list) < e.keep {
		if err := c.readEvidence(e); err != nil {
			return err
		}
		s += e.body
	}
	c.lists = append(c.lists, s)
	return nil
}

// readEvidence is evidence.lua's read of a window's evidence: GET once, a value of another type none.
func (c *counting) readEvidence(e *keptWindow) error {
	if e.read {
		return nil
	}
	e.read = true
	old, ok, err := c.s.getString(e.key)
	if errors.Is(err, errWrongType) {
		return nil
	}
	if err != nil {
		return err
	}
	if ok && len(old) >= 1 && old[0] >= 1 && old[0] <= 20 {
		e.body, e.have = old[1:], int(old[0])
	}
	return nil
}

// writeEvidence is evidence.lua's write: each window's evidence with entries
// this call, written once.
func (c *counting) writeEvidence() error {
	for _, e := range c.kept {
		if len(e.entries) == 0 {
			continue
		}
		if err := c.readEvidence(e); err != nil {
			return err
		}
		var list []string
		for j := len(e.entries) - 1; j >= 0 && len(list) < e.keep; j-- {
			list = append(list, e.entries[j])
		}
		n, s, have, body := len(list), strings.Join(list, rs)+rs, e.have, e.body
		if n < e.keep && have > 0 {
			if n+have > e.keep {
				// The old entries past keep go: cut after the (keep - n)th RS.
				pos, found := -1, true
				for range e.keep - n {
					k := strings.Index(body[pos+1:], rs)
					if k < 0 {
						found = false
						break
					}
					pos += 1 + k
				}
				if found {
					body = body[:pos+1]
				}
				have = e.keep - n
			}
			s += body
			n += have
		}
		s = string([]byte{byte(n)}) + s
		var left int64
		if have == 0 || e.slides {
			left = c.s.pttl(e.win)
		}
		switch {
		case left > 0:
			c.s.setEx(e.key, s, time.Duration(left)*time.Millisecond)
		case have > 0:
			c.s.setKeepTTL(e.key, s)
		default:
			c.s.setEx(e.key, s, duration(e.ttl))
		}
	}
	return nil
}

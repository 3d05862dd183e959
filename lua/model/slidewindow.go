package model

import (
	"errors"
	"math"
	"math/bits"
)

// errBucketsCollide refuses a window hash in which two bucket fields are
// one bucket to the script ("7" and "007") with different values: which
// one it keeps follows HGETALL's order, which the model does not follow.
// The script never writes such a pair.
var errBucketsCollide = errors.New("model: a window hash holds one bucket under two fields")

// errTotalOrder refuses a window whose buckets the script totals past
// 2^53 in a way that rounds: its sum follows the order of Lua's pairs,
// which the model does not follow. Only saturated buckets come near.
var errTotalOrder = errors.New("model: a window total that rounds in the order of Lua's pairs")

// slideWindow is slide_and_check's state of one window.
type slideWindow struct {
	key       string
	marks     string
	span      float64
	late      float64
	threshold float64
	ttl       float64 // seconds
	// b is the buckets, by number: a number is a double in Lua, and so
	// here, bucket fields above 2^53 included.
	b         map[float64]float64
	touched   map[float64]bool
	total     float64
	newest    float64
	hasNewest bool
	// old is the old layout's last offset of the source (-1 when it does
	// not parse), hasOld whether the hash holds one; r whether it holds the
	// old layout's latest ids.
	old    float64
	hasOld bool
	r      bool
	// isNew is a hash that held nothing.
	isNew bool
	// renew is a newest bucket moved past a multiple of span: the
	// script renews the offsets' lifetime.
	renew bool
	dirty bool
	// unusable is a window key of another type (redis.pcall's error): its
	// changes answer -1, -1 and nothing is written to it.
	unusable bool
}

// luaMin is Lua 5.1's math.min of two: the first unless the second is
// less, which differs from Go's min on zeros' signs.
func luaMin(a, b float64) float64 {
	if b < a {
		return b
	}
	return a
}

// load reads the window's hash as the script does at the window's first
// change.
func (w *slideWindow) load(s *Store, src string) error {
	h, err := s.hgetall(w.key)
	if errors.Is(err, errWrongType) {
		w.unusable, w.isNew = true, true
		return nil
	}
	if err != nil {
		return err
	}
	w.b = make(map[float64]float64, len(h))
	w.touched = map[float64]bool{}
	w.isNew = len(h) == 0
	// Buckets a non-number set to nil, should another field name them.
	var nilled map[float64]bool
	for f, v := range h {
		switch {
		case f == "k":
			w.newest, w.hasNewest, err = tonumber(v, true)
		case f == src:
			var isNum bool
			w.old, isNum, err = tonumber(v, true)
			if !isNum {
				w.old = -1
			}
			w.hasOld = true
		case f == "r":
			w.r = true
		case f != "" && allDigits(f):
			// Leading zeros included, as match(f, '^%d+$') takes them.
			var j, x float64
			var isNum bool
			if j, _, err = tonumber(f, true); err != nil {
				break
			}
			if x, isNum, err = tonumber(v, true); err != nil {
				break
			}
			old, had := w.b[j]
			if (had && (!isNum || old != x)) || (isNum && nilled[j]) {
				return errBucketsCollide
			}
			if isNum {
				w.b[j] = x
			} else {
				if nilled == nil {
					nilled = map[float64]bool{}
				}
				nilled[j] = true
			}
		}
		if err != nil {
			return err
		}
	}
	if w.hasNewest {
		w.total, err = loadTotal(w.b, w.newest-w.span)
	}
	return err
}

// loadTotal is the script's total of the buckets after from, which it sums
// in the order of pairs(w.b). The model sums them in its own order, and
// answers only where every order gives that sum: two terms commute, and
// multiples of 2^e whose magnitudes sum to at most 2^(53+e) add exactly
// (short of overflow).
func loadTotal(b map[float64]float64, from float64) (float64, error) {
	total := 0.0
	terms, low, finite := 0, math.MaxInt, true
	for k, v := range b {
		if k > from {
			total += v
			switch {
			case math.IsInf(v, 0):
				terms++
				finite = false
			case v != 0:
				terms++
				low = min(low, lowBit(v))
			}
		}
	}
	if terms <= 2 {
		return total, nil
	}
	if !finite || low > 1023-53 {
		return 0, errTotalOrder
	}
	var units uint64
	for k, v := range b {
		if k > from && v != 0 {
			q := math.Ldexp(math.Abs(v), -low)
			if q > two53 {
				return 0, errTotalOrder
			}
			if units += uint64(q); units > 1<<53 {
				return 0, errTotalOrder
			}
		}
	}
	return total, nil
}

// lowBit is the exponent of the lowest bit set in v, finite and not 0.
func lowBit(v float64) int {
	frac, exp := math.Frexp(math.Abs(v))
	return exp - 53 + bits.TrailingZeros64(uint64(math.Ldexp(frac, 53)))
}

// advance is the script's move of the newest bucket to k.
func (w *slideWindow) advance(k float64) {
	if w.hasNewest && k-w.span < w.newest {
		// Lua's for starts at (init - 1) + 1: not init itself for every
		// newest with a fraction, which a hash not the script's may hold.
		for j := w.newest - w.span + 1 - 1 + 1; j <= k-w.span; j++ {
			w.total -= w.b[j]
		}
	} else {
		w.total = 0
	}
	if w.hasNewest && math.Floor(k/w.span) > math.Floor(w.newest/w.span) {
		w.renew = true
	}
	w.newest, w.hasNewest = k, true
}

// largest is the script's largest window that an order out of order at
// bucket k falls into.
func (w *slideWindow) largest(k float64) float64 {
	s := 0.0
	for j := k - w.span + 1; j <= k; j++ {
		s += w.b[j]
	}
	most := s
	last := luaMin(k+w.span-1, w.newest)
	for j := k + 1; j <= last; j++ {
		s = s + w.b[j] - w.b[j-w.span]
		if s > most {
			most = s
		}
	}
	return most
}

// add is the script's count of an order.
func (w *slideWindow) add(k, inc float64) (float64, int64) {
	before := w.total
	if k < w.newest {
		before = w.largest(k)
	}
	was := w.b[k]
	w.b[k] = luaMin(was+inc, two53)
	w.touched[k] = true
	if k > w.newest-w.span {
		w.total = w.total + w.b[k] - was
	}
	after := before + inc
	if before < w.threshold && after >= w.threshold {
		return after, 1
	}
	return after, 0
}

// take is the script's subtraction of a refund; ok is false when it took
// nothing. What it took stays taken even then, as in the script: only an
// amount so large that what it took rounds away is answered so after
// taking.
func (w *slideWindow) take(k, amount float64) (value float64, flag int64, ok bool) {
	left := amount
	for j := k; j >= k-w.span+1; j-- {
		v, had := w.b[j]
		if had && v > 0 {
			d := luaMin(v, left)
			w.b[j] = v - d
			w.touched[j] = true
			if j > w.newest-w.span {
				w.total -= d
			}
			left -= d
			if left == 0 {
				return w.total, 0, true
			}
		}
	}
	if left == amount {
		return 0, 0, false
	}
	return w.total, 3, true
}

// save is the script's write-back of a dirty window. The order of pairs only
// orders HSET's and HDEL's fields, where it changes nothing.
func (w *slideWindow) save(s *Store, src string) error {
	oldest := w.newest - 2*w.span - w.late
	set := make([]string, 0, 2+2*len(w.touched))
	set = append(set, "k", format(w.newest))
	var gone []string
	for j, v := range w.b {
		if j <= oldest || v <= 0 {
			gone = append(gone, format(j))
		} else if w.touched[j] {
			set = append(set, format(j), format(v))
		}
	}
	if w.hasOld {
		gone = append(gone, src)
	}
	if w.r {
		gone = append(gone, "r")
	}
	if err := s.hset(w.key, set...); err != nil {
		return err
	}
	if len(gone) > 0 {
		if err := s.hdel(w.key, gone...); err != nil {
			return err
		}
	}
	s.expire(w.key, secs(w.ttl))
	return nil
}

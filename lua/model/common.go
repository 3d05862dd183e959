package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
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

package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A crossing's marks hash (Keys.Marks) holds, beside each crossing's mark
// (field: the 8-byte EventID; value: the window's value, written by the
// counting script that decided the crossing), the seals of the alerts
// published of it and one field that says the hash holds seals:
//
//	<EventID>            the window's value at the crossing
//	<EventID>#<seal>     published_at in ms: this version was published
//	#                    published_at in ms of the latest seal
//
// The scripts read marks by EventID alone (8 bytes), which no other field
// is, and replace or renew the hash whole, so seals live and die with the
// marks. A crossing may have several seals: each retry of its batch
// publishes it again, its evidence and published_at perhaps changed.
const sealedField = "#"

// Seal vouches for one alert as it is published: it is written next to
// its crossing's mark.
type Seal struct {
	// Marks is the crossing's marks key (Keys.Marks), ID its event.
	Marks string
	ID    EventID
	// Hash is the alert's seal (alert.Alert.Seal), At its published_at.
	Hash []byte
	At   time.Time
}

// SealField is the field of the marks hash that holds the seal hash of an
// alert of crossing id.
func SealField(id EventID, hash []byte) string {
	return string(id[:]) + sealedField + string(hash)
}

// Seal writes seals, pipelined, one round trip for all: each alert's
// seal and the hash's sealed field, in its crossing's marks hash, which
// keeps its lifetime; and, with since (Keys.SealsSince) not empty, when
// fraudwatch began to seal in this Redis, if no seal did before. A marks hash gone meanwhile (evicted, flushed) is
// given the marks' lifetime (Retention) rather than none; its alert is
// not posted, as no mark vouches for it. An error is Redis's: the batch
// is retried, and publishes its alerts with seals of their own.
func (s *Scripts) Seal(ctx context.Context, since string, seals []Seal) error {
	if len(seals) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	if since != "" {
		// When fraudwatch began to seal here: set by the first seal, once.
		pipe.SetNX(ctx, since, strconv.FormatInt(seals[0].At.UnixMilli(), 10), 0)
	}
	for _, sl := range seals {
		at := strconv.FormatInt(sl.At.UnixMilli(), 10)
		pipe.HSet(ctx, sl.Marks, SealField(sl.ID, sl.Hash), at, sealedField, at)
		pipe.ExpireNX(ctx, sl.Marks, s.cfg.Retention)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua: write %d alerts' seals: %w", len(seals), err)
	}
	return nil
}

// Crossing is what Redis holds of one crossing.
type Crossing struct {
	// Marked is true when a counting script decided that the event
	// crossed, and Value is the window's value it marked.
	Marked bool
	Value  int64
	// Sealed is true, when Crossing was asked about a seal, when that
	// seal is held: fraudwatch published that very alert. Asked about none
	// (an alert written before alerts were sealed), it is true when the
	// marks hash holds any seal at all: fraudwatch has sealed the alerts
	// of the rule's definition and group since.
	Sealed bool
}

// Crossing reads, in one round trip, the mark of the event id that
// crossed a threshold under marksKey (Keys.Marks) and either the seal
// hash names (Seal) or, with a nil hash, whether the hash holds any seal.
// A mark that is not a number the scripts write counts as none. So an
// alert read back from the alerts topic can be told from one Redis never
// decided, and from one fraudwatch never published.
func (s *Scripts) Crossing(ctx context.Context, marksKey string, id EventID, hash []byte) (Crossing, error) {
	field := sealedField
	if hash != nil {
		field = SealField(id, hash)
	}
	pipe := s.rdb.Pipeline()
	cmd := pipe.HMGet(ctx, marksKey, string(id[:]), field)
	_, _ = pipe.Exec(ctx) // the command carries its error
	v, err := cmd.Result()
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		// A key of another type (written by another) holds no crossing.
		return Crossing{}, nil
	case err != nil:
		return Crossing{}, fmt.Errorf("lua: read a crossing mark: %w", err)
	case len(v) != 2:
		return Crossing{}, fmt.Errorf("lua: read a crossing mark: %w: %d values", ErrUnexpectedReply, len(v))
	}
	var c Crossing
	if mark, ok := v[0].(string); ok {
		if n, err := strconv.ParseInt(mark, 10, 64); err == nil && n >= 0 {
			c.Marked, c.Value = true, n
		}
	}
	_, c.Sealed = v[1].(string)
	return c, nil
}

// SealsSince is the key of when fraudwatch began to seal its alerts in
// this Redis (ms since 1970), written by the first seal: the dispatcher
// takes unsealed alerts, of the version before seals, only for an hour
// after it.
func (k Keys) SealsSince() string { return k.prefix + ":seals-since" }

// SealsSince reads when fraudwatch began to seal its alerts in this
// Redis (the engine's first Seal wrote it), and false when it has not. A
// value that is not a time in ms (written by another) reads as the zero
// time, long ago: no unsealed alert is taken on its word.
func (s *Scripts) SealsSince(ctx context.Context, key string) (time.Time, bool, error) {
	pipe := s.rdb.Pipeline()
	get := pipe.Get(ctx, key)
	_, _ = pipe.Exec(ctx) // the command carries its error
	v, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return time.Time{}, false, nil
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return time.Time{}, true, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("lua: read when sealing began: %w", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, true, nil
	}
	return time.UnixMilli(ms), true, nil
}

// ReceiverSince records at, when key holds nothing yet, as when a receiver
// first ran, and returns what key holds: the first replica's time stays.
// A value that is no time (written by another) reads as not set: the
// caller falls back to its own start.
func (s *Scripts) ReceiverSince(ctx context.Context, key string, at time.Time) (time.Time, bool, error) {
	pipe := s.rdb.Pipeline()
	pipe.SetNX(ctx, key, at.UnixMilli(), 0)
	get := pipe.Get(ctx, key)
	_, _ = pipe.Exec(ctx) // each command carries its error
	v, err := get.Result()
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("lua: read when receiver began: %w", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(ms), true, nil
}

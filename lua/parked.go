package lua

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Parked alerts are alerts whose channel Slack refuses: kept in one hash
// (alert id -> the alert's JSON) until a retry delivers them, so that the
// alerts topic moves on past them. alert_park keeps the hash within its
// cap; the rest are plain commands: one key each, no decision to race on
// but the leases, which SET NX takes.

// Parking is what Park did with an alert.
type Parking int

// Parkings.
const (
	// ParkFull: the hash holds its limit of alerts; nothing written.
	ParkFull Parking = 0
	// Parked: a new alert parked.
	Parked Parking = 1
	// ParkedAgain: an alert parked already, its copy replaced: the hash
	// holds as many alerts as before.
	ParkedAgain Parking = 2
)

// Park keeps an alert's data under id in the parked hash key, unless the
// hash already holds limit alerts. The hash lives lifetime after the last
// alert parked in it.
func (s *Scripts) Park(ctx context.Context, key, id string, data []byte, limit int, lifetime time.Duration) (Parking, error) {
	n, err := s.single(ctx, alertPark, AlertParkName, []string{key}, id, data, limit, seconds(lifetime))
	if err != nil {
		return ParkFull, err
	}
	if n < 0 || n > 2 {
		return ParkFull, s.fail(AlertParkName, fmt.Errorf("%w: %d", ErrUnexpectedReply, n))
	}
	return Parking(n), nil
}

// Parked returns the parked alerts' data by id.
func (s *Scripts) Parked(ctx context.Context, key string) (map[string]string, error) {
	pipe := s.rdb.Pipeline()
	cmd := pipe.HGetAll(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("lua: read parked alerts: %w", err)
	}
	return cmd.Val(), nil
}

// Unpark forgets parked alerts.
func (s *Scripts) Unpark(ctx context.Context, key string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	pipe.HDel(ctx, key, ids...)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua: unpark %d alerts: %w", len(ids), err)
	}
	return nil
}

// Lease takes each of keys for ttl that no one holds, pipelined: one
// replica at a time retries a parked alert. taken[i] tells whether keys[i]
// is now the caller's.
func (s *Scripts) Lease(ctx context.Context, ttl time.Duration, keys ...string) (taken []bool, err error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.SetNX(ctx, k, 1, ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("lua: take %d leases: %w", len(keys), err)
	}
	taken = make([]bool, len(keys))
	for i, c := range cmds {
		taken[i] = c.Val()
	}
	return taken, nil
}

// Release gives leases back before they run out.
func (s *Scripts) Release(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, k := range keys {
		// One DEL a key: on a cluster, the keys sit in different slots.
		pipe.Del(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua: release %d leases: %w", len(keys), err)
	}
	return nil
}

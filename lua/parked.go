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
// alerts topic moves on past them. These are plain commands: one key each,
// no decision to race on but the lease, which SET NX takes.

// Park keeps an alert's data under id in the parked hash key.
func (s *Scripts) Park(ctx context.Context, key, id string, data []byte) error {
	pipe := s.rdb.Pipeline()
	cmd := pipe.HSet(ctx, key, id, data)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua: park %s: %w", id, err)
	}
	return cmd.Err()
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

// Unpark forgets a parked alert.
func (s *Scripts) Unpark(ctx context.Context, key, id string) error {
	pipe := s.rdb.Pipeline()
	pipe.HDel(ctx, key, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua: unpark %s: %w", id, err)
	}
	return nil
}

// Lease takes key for ttl if no one holds it: one replica at a time
// retries a parked alert.
func (s *Scripts) Lease(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	pipe := s.rdb.Pipeline()
	cmd := pipe.SetNX(ctx, key, 1, ttl)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("lua: lease %s: %w", key, err)
	}
	return cmd.Val(), nil
}

// Release gives a lease back before it runs out.
func (s *Scripts) Release(ctx context.Context, key string) error {
	pipe := s.rdb.Pipeline()
	pipe.Del(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua: release %s: %w", key, err)
	}
	return nil
}

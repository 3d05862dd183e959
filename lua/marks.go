package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Crossed reads the mark a counting script wrote for the event id that
// crossed a threshold, in the same atomic call that decided the crossing.
// It returns the window's value at the crossing and true. It returns false
// when Redis never decided that this event crossed under marksKey
// (Keys.Marks), or when the mark is not a number the scripts write. So an
// alert read back from the alerts topic can be told from one Redis never
// decided.
func (s *Scripts) Crossed(ctx context.Context, marksKey string, id EventID) (int64, bool, error) {
	pipe := s.rdb.Pipeline()
	cmd := pipe.HGet(ctx, marksKey, string(id[:]))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, fmt.Errorf("lua: read a crossing mark: %w", err)
	}
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}

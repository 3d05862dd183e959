package silence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/internal/redisonce"
)

// A silence made from an alert's message (a Slack Snooze) keeps the
// message's receipt (Silence.Thread), and its end is said in that
// message's thread (Sweeper). Until it is, the silence waits in a sorted
// set of its own, scored by when it ends (or was expired): the index is
// emptied by whoever lists silences, the sweeper's set only by the
// sweeper.

// endsKey is the sorted set of the silences whose end is to be said in a
// thread: their endNote (JSON) by when they end, in milliseconds.
func (s *Store) endsKey() string { return s.keys.SilenceIndex() + ":ends" }

// leaseKey is held by the replica saying silence id's end.
func (s *Store) leaseKey(id string) string { return s.endsKey() + ":lease:" + id }

// endNote is a silence as its end's set keeps it: no group, no value, only
// where to say it. The same silence makes the same member, so that expire
// finds it.
type endNote struct {
	ID     string        `json:"id"`
	Rule   string        `json:"rule"`
	Thread alert.Receipt `json:"thread"`
	Ends   time.Time     `json:"ends"`
}

func noteOf(sil Silence) (string, error) {
	b, err := json.Marshal(endNote{ID: sil.ID, Rule: sil.Rule, Thread: sil.Thread, Ends: sil.Ends.UTC()})
	if err != nil {
		return "", fmt.Errorf("silence: %w", err)
	}
	return string(b), nil
}

// awaitEnd puts sil's end in the set, due when it ends.
func (s *Store) awaitEnd(ctx context.Context, sil Silence) error {
	member, err := noteOf(sil)
	if err != nil {
		return err
	}
	if err := s.rdb.ZAdd(ctx, s.endsKey(), redis.Z{Score: float64(sil.Ends.UnixMilli()), Member: member}).Err(); err != nil {
		return fmt.Errorf("silence: keep where its end is to be said: %w", err)
	}
	return nil
}

// endedEarly makes sil's end due at now (silence expire), if it waits.
func (s *Store) endedEarly(ctx context.Context, sil Silence, now time.Time) error {
	member, err := noteOf(sil)
	if err != nil {
		return err
	}
	err = s.rdb.ZAddArgs(ctx, s.endsKey(), redis.ZAddArgs{XX: true, Members: []redis.Z{{Score: float64(now.UnixMilli()), Member: member}}}).Err()
	if err != nil {
		return fmt.Errorf("silence: say its end: %w", err)
	}
	return nil
}

// forgetEnd removes sil's end from the set (a silence taken back).
func (s *Store) forgetEnd(ctx context.Context, sil Silence) error {
	member, err := noteOf(sil)
	if err != nil {
		return err
	}
	return s.rdb.ZRem(ctx, s.endsKey(), member).Err()
}

// EndedSilence is a silence whose end is due to be said in its thread.
type EndedSilence struct {
	ID     string
	Rule   string
	Thread alert.Receipt
	// Ends is when the silence was to end; At when it did (earlier when
	// it was expired: Early).
	Ends  time.Time
	At    time.Time
	Early bool
	// Due is how long ago it ended, by Redis's clock.
	Due    time.Duration
	member string
}

// EndedSilences takes up to limit silences whose end is due to be said,
// by Redis's clock, each for lease: another replica takes none of them
// until the lease ends, unless Done says it was said. A taker that dies
// leaves its silences to be taken again when their leases end.
func (s *Store) EndedSilences(ctx context.Context, lease time.Duration, limit int) ([]EndedSilence, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("silence: read Redis's clock: %w", err)
	}
	due, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: s.endsKey(), ByScore: true, Start: "-inf",
		Stop: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("silence: read the ended silences: %w", err)
	}
	var out []EndedSilence
	for _, z := range due {
		member, _ := z.Member.(string)
		var n endNote
		if err := json.Unmarshal([]byte(member), &n); err != nil || n.ID == "" {
			// Not one of ours: nothing to say, and nowhere.
			if err := s.rdb.ZRem(ctx, s.endsKey(), member).Err(); err != nil {
				return out, fmt.Errorf("silence: drop an unreadable ended silence: %w", err)
			}
			continue
		}
		// Sent once: resent after a lost reply, it would find its own
		// lease and leave the end unsaid until the lease ran out.
		took, err := redisonce.SetNX(ctx, s.rdb, s.leaseKey(n.ID), 1, lease)
		if err != nil {
			return out, fmt.Errorf("silence: take ended silence %s: %w", n.ID, err)
		}
		if !took {
			continue // another replica says it
		}
		at := time.UnixMilli(int64(z.Score)).UTC()
		out = append(out, EndedSilence{ID: n.ID, Rule: n.Rule, Thread: n.Thread, Ends: n.Ends, At: at,
			Early: at.Before(n.Ends), Due: now.Sub(at), member: member})
	}
	return out, nil
}

// Done forgets e: its end was said (or will never be). Its lease stays
// until it ends, so that a replica that read e before Done cannot take it.
func (s *Store) Done(ctx context.Context, e EndedSilence) error {
	if e.member == "" {
		return errors.New("silence: done with a silence EndedSilences did not give")
	}
	if err := s.rdb.ZRem(ctx, s.endsKey(), e.member).Err(); err != nil {
		return fmt.Errorf("silence: forget ended silence %s: %w", e.ID, err)
	}
	return nil
}

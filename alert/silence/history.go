package silence

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The history keeps what silences did, for whoever asks later who silenced
// what: HistoryFor at most, and the HistoryMax latest events, so that it
// stays small whatever clicks at it.
const (
	HistoryFor = 30 * 24 * time.Hour
	HistoryMax = 1000
)

// What an event of the history says.
const (
	Ended   = "ended"   // a silence ran its term
	Expired = "expired" // a silence was ended early (silence expire), By someone
	// Acknowledged: an alert was acknowledged in Slack, By someone. Versions
	// before records per receiver wrote it here; an acknowledgement now
	// goes into the alert's own record (lua.Scripts.AcknowledgeAlert), and
	// the history only shows the old ones, for as long as it keeps them.
	Acknowledged = "acknowledged"
)

// Event is one entry of the history: a silence that ended or was expired,
// or an old acknowledgement (Acknowledged), which names the alert's rule
// and group in Silence and nothing else there.
type Event struct {
	At   time.Time `json:"at"`
	What string    `json:"event"`
	By   string    `json:"by,omitempty"`
	Silence
}

// historyKey is a sorted set of events (JSON) by when they happened, in
// milliseconds since 1970.
func (s *Store) historyKey() string { return s.keys.SilenceIndex() + ":history" }

// record adds events to the history and trims it: older than HistoryFor
// before now, or past the HistoryMax latest. An event recorded twice (the
// same silence ended, seen by two listers) is one: the same JSON.
func (s *Store) record(ctx context.Context, now time.Time, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	members := make([]redis.Z, len(events))
	for i, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("silence: history: %w", err)
		}
		members[i] = redis.Z{Score: float64(e.At.UnixMilli()), Member: b}
	}
	key := s.historyKey()
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, members...)
		p.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(now.Add(-HistoryFor).UnixMilli(), 10))
		p.ZRemRangeByRank(ctx, key, 0, -HistoryMax-1)
		// Nothing written for HistoryFor: nothing left to keep.
		p.PExpire(ctx, key, HistoryFor)
		return nil
	}); err != nil {
		return fmt.Errorf("silence: write the history: %w", err)
	}
	return nil
}

// History returns the history's events of the last HistoryFor before now,
// the latest first; it moves the silences that ended meanwhile there
// first.
func (s *Store) History(ctx context.Context, now time.Time) ([]Event, error) {
	if _, err := s.List(ctx, now); err != nil {
		return nil, err
	}
	raw, err := s.rdb.ZRevRangeByScore(ctx, s.historyKey(), &redis.ZRangeBy{
		Min: strconv.FormatInt(now.Add(-HistoryFor).UnixMilli(), 10), Max: "+inf", Count: HistoryMax,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("silence: read the history: %w", err)
	}
	out := make([]Event, 0, len(raw))
	for _, r := range raw {
		var e Event
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			continue // not one of ours: nothing to show
		}
		out = append(out, e)
	}
	return out, nil
}

// GroupRef names a group (its encoding) without its values, for logs and
// the history: 12 hex digits of an HMAC of the encoding under a random
// key kept in Redis, made once. A plain hash of a card or an IP address
// would give the value back to whoever hashes the few billion there are.
func (s *Store) GroupRef(ctx context.Context, enc string) (string, error) {
	key, err := s.refKey(ctx)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(enc))
	return hex.EncodeToString(mac.Sum(nil)[:6]), nil
}

// refKeyLen is the length of the key of GroupRef.
const refKeyLen = 32

func (s *Store) refKey(ctx context.Context) ([]byte, error) {
	name := s.keys.SilenceIndex() + ":ref-key"
	key, err := s.rdb.Get(ctx, name).Bytes()
	if errors.Is(err, redis.Nil) {
		fresh := make([]byte, refKeyLen)
		_, _ = rand.Read(fresh) // never fails (crypto/rand)
		// Whoever makes it first, every replica reads the same.
		if err := s.rdb.SetNX(ctx, name, fresh, 0).Err(); err != nil {
			return nil, fmt.Errorf("silence: make the group ref key: %w", err)
		}
		key, err = s.rdb.Get(ctx, name).Bytes()
	}
	if err != nil {
		return nil, fmt.Errorf("silence: read the group ref key: %w", err)
	}
	if len(key) != refKeyLen {
		return nil, fmt.Errorf("silence: the group ref key holds %d bytes, not %d", len(key), refKeyLen)
	}
	return key, nil
}

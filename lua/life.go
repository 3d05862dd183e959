package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// An alert's hash (Keys.Alert) holds the send decision its first claim
// made and, once sent, its life: alert_claim opens it, alert_life changes
// it, alert_observe lets one reader time its acknowledgement, and
// alert_shown records in a receiver's record which change it shows. The
// index of open alerts (Keys.OpenAlerts, alert_index) lists them by id.

// Life is an alert's hash as Redis keeps it.
type Life struct {
	// Decision is the alert's send decision: send, suppressed or
	// silenced; "" before its first claim.
	Decision string
	// Status is open, acknowledged or resolved; "" when the alert has no
	// life (not sent, or its hash ended).
	Status     string
	OpenedAt   time.Time
	AckedBy    string
	AckedAt    time.Time
	ResolvedBy string
	ResolvedAt time.Time
	Assignee   string
	// Label is what a person said the alert was (fraud, legit, unclear),
	// by whom and when; "" when no one has.
	Label      string
	LabelledBy string
	LabelledAt time.Time
	// Version counts the changes since it opened (0: none).
	Version int64
	// Alert is the alert's JSON as the dispatcher that opened it trusted
	// it.
	Alert []byte
	// Taken counts the receivers that took its send and did not fail.
	Taken int64
}

// ErrNoLife is the answer for an alert without a life: never sent, or its
// hash ended with its records (Retention).
var ErrNoLife = errors.New("no such alert: never sent, or its records ended")

// lifeOf reads a hash's fields into a Life.
func lifeOf(f map[string]string) Life {
	l := Life{Decision: f["decision"], Status: f["status"], AckedBy: f["acked_by"], ResolvedBy: f["resolved_by"],
		Assignee: f["assignee"], OpenedAt: millis(f["opened_at"]), AckedAt: millis(f["acked_at"]),
		ResolvedAt: millis(f["resolved_at"]), Label: f["label"], LabelledBy: f["labelled_by"],
		LabelledAt: millis(f["labelled_at"])}
	l.Version, _ = strconv.ParseInt(f["version"], 10, 64)
	l.Taken, _ = strconv.ParseInt(f["taken"], 10, 64)
	if a, ok := f["alert"]; ok {
		l.Alert = []byte(a)
	}
	return l
}

// millis reads milliseconds since 1970; zero for anything else.
func millis(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Life reads an alert's hash; a Life with no Status when it has no life.
func (s *Scripts) Life(ctx context.Context, key string) (Life, error) {
	pipe := s.rdb.Pipeline()
	f := pipe.HGetAll(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return Life{}, fmt.Errorf("lua: read an alert's life: %w", err)
	}
	return lifeOf(f.Val()), nil
}

// LifeAndRecord reads an alert's hash and its record for one receiver in
// one round trip (one slot: both share the alert's hash tag).
func (s *Scripts) LifeAndRecord(ctx context.Context, lifeKey, recordKey string) (Life, Record, error) {
	pipe := s.rdb.Pipeline()
	l := pipe.HGetAll(ctx, lifeKey)
	r := pipe.HGetAll(ctx, recordKey)
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return Life{}, Record{}, fmt.Errorf("lua: read an alert's life and record: %w", err)
	}
	return lifeOf(l.Val()), recordOf(r.Val()), nil
}

// ChangeLife changes the life of the alert whose hash is key (alert_life):
// op is acknowledge, resolve, assign or label_fraud, label_legit,
// label_unclear, by who. It returns the life as it is now, and whether
// this call changed it (the first acknowledgement stays; a resolved alert
// is final, but for its label; the same label again changes nothing).
// ErrNoLife: the alert has none.
func (s *Scripts) ChangeLife(ctx context.Context, key, op, who string) (Life, bool, error) {
	v, err := s.run(ctx, alertLife, []string{key}, op, who).Result()
	if err != nil {
		return Life{}, false, s.redisError(ctx, AlertLifeName, err)
	}
	if n, ok := v.(int64); ok && n == -1 {
		return Life{}, false, s.fail(AlertLifeName, ErrInvalidArguments)
	}
	reply, _ := v.([]any)
	if len(reply) == 1 && reply[0] == int64(0) {
		return Life{}, false, fmt.Errorf("lua: %s: %w", AlertLifeName, ErrNoLife)
	}
	names := []string{"status", "opened_at", "acked_by", "acked_at", "resolved_by", "resolved_at", "assignee", "version",
		"label", "labelled_by", "labelled_at"}
	if len(reply) != len(names)+1 || (reply[0] != int64(1) && reply[0] != int64(2)) {
		return Life{}, false, s.fail(AlertLifeName, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
	}
	f := map[string]string{}
	for i, name := range names {
		f[name], _ = reply[i+1].(string)
	}
	return lifeOf(f), reply[0] == int64(1), nil
}

// ObserveAck lets the first reader after an alert's acknowledgement, of
// all replicas and receivers, observe its time to acknowledge: first is
// true for that one call only, with when the alert opened and was
// acknowledged.
func (s *Scripts) ObserveAck(ctx context.Context, key string) (opened, acked time.Time, first bool, err error) {
	v, err := s.run(ctx, alertObserve, []string{key}).Slice()
	if err != nil {
		return opened, acked, false, s.redisError(ctx, AlertObserveName, err)
	}
	if len(v) == 1 && v[0] == int64(0) {
		return opened, acked, false, nil
	}
	if len(v) == 3 && v[0] == int64(1) {
		o, _ := v[1].(string)
		a, _ := v[2].(string)
		return millis(o), millis(a), true, nil
	}
	return opened, acked, false, s.fail(AlertObserveName, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
}

// ShowLife records in an alert's record for one receiver that the
// receiver shows the life's version now (alert_shown): false when the
// record shows it or a later one already, or there is no record.
func (s *Scripts) ShowLife(ctx context.Context, recordKey string, version int64) (bool, error) {
	n, err := s.single(ctx, alertShown, AlertShownName, []string{recordKey}, version)
	return n == 1, err
}

// IndexAlert adds an alert, by id, to the index of open alerts (Keys.
// OpenAlerts) with its ref, keeping the index to at most limit alerts of
// at most lifetime (alert_index); an alert there already keeps its place.
func (s *Scripts) IndexAlert(ctx context.Context, index, refs, id, ref string, limit int, lifetime time.Duration) error {
	_, err := s.single(ctx, alertIndex, AlertIndexName, []string{index, refs}, id, ref, limit, seconds(lifetime))
	return err
}

// Indexed is one alert of the index of open alerts.
type Indexed struct {
	ID  string
	Ref string // as IndexAlert was given it
	At  time.Time
}

// IndexedAlerts lists up to limit alerts of the index, newest first; one
// whose ref is gone has Ref "".
func (s *Scripts) IndexedAlerts(ctx context.Context, index, refs string, limit int) ([]Indexed, error) {
	pipe := s.rdb.Pipeline()
	z := pipe.ZRevRangeWithScores(ctx, index, 0, int64(limit)-1)
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil, fmt.Errorf("lua: read the open alerts: %w", err)
	}
	out := make([]Indexed, 0, len(z.Val()))
	ids := make([]string, 0, len(z.Val()))
	for _, m := range z.Val() {
		id, _ := m.Member.(string)
		out = append(out, Indexed{ID: id, At: time.UnixMilli(int64(m.Score))})
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return out, nil
	}
	pipe = s.rdb.Pipeline()
	h := pipe.HMGet(ctx, refs, ids...)
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil, fmt.Errorf("lua: read the open alerts' refs: %w", err)
	}
	for i, v := range h.Val() {
		if i < len(out) {
			out[i].Ref, _ = v.(string)
		}
	}
	return out, nil
}

// IndexedRef is the ref of alert id in the index of open alerts; false
// when it is not there.
func (s *Scripts) IndexedRef(ctx context.Context, refs, id string) (string, bool, error) {
	pipe := s.rdb.Pipeline()
	c := pipe.HGet(ctx, refs, id)
	_, err := pipe.Exec(ctx)
	switch {
	case errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "WRONGTYPE"):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("lua: read an open alert's ref: %w", err)
	}
	return c.Val(), true, nil
}

// Unindex takes alerts out of the index of open alerts (resolved, or
// gone): the index first, then their refs (a ref left alone names nothing
// listed, and is dropped with its alert's next add or the index's end).
func (s *Scripts) Unindex(ctx context.Context, index, refs string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	pipe.ZRem(ctx, index, members...)
	pipe.HDel(ctx, refs, ids...)
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("lua: unindex %d alerts: %w", len(ids), err)
	}
	return nil
}

// Lives reads several alerts' hashes in one pipelined round trip (of
// several slots on a cluster); a Life with no Status for each without one.
func (s *Scripts) Lives(ctx context.Context, keys ...string) ([]Life, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil, fmt.Errorf("lua: read %d alerts' lives: %w", len(keys), err)
	}
	out := make([]Life, len(keys))
	for i, c := range cmds {
		out[i] = lifeOf(c.Val())
	}
	return out, nil
}

// Repeat is what alert_repeat did with a repeat crossing for a receiver.
type Repeat int

// Repeats.
const (
	// RepeatNone: no suppressed record, or nothing pending to mark
	// replied; nothing written.
	RepeatNone Repeat = 0
	// RepeatNew: counted now; with RepeatReply, its reply is the
	// claimant's to post.
	RepeatNew Repeat = 1
	// RepeatSeen: counted before (replied, or counted without a reply).
	RepeatSeen Repeat = 2
	// RepeatRetry: its reply is pending under this claimant already (an
	// attempt that crashed): post it, not counted again.
	RepeatRetry Repeat = 4
	// RepeatElsewhere: its reply is pending under another claimant.
	RepeatElsewhere Repeat = 5
)

// RepeatOp is what MarkRepeat is asked to do.
type RepeatOp string

// RepeatOps.
const (
	RepeatCount   RepeatOp = "count"   // count it, reply nowhere
	RepeatReply   RepeatOp = "reply"   // count it and claim its reply
	RepeatReplied RepeatOp = "replied" // its reply was posted
)

// MarkRepeat counts a repeat crossing (an alert suppressed because another
// alert of its group holds the cooldown) in its record for one receiver,
// once, and gives its reply in the holder's thread to claimant, once
// (alert_repeat).
func (s *Scripts) MarkRepeat(ctx context.Context, recordKey, claimant string, op RepeatOp) (Repeat, error) {
	n, err := s.single(ctx, alertRepeat, AlertRepeatName, []string{recordKey}, claimant, string(op))
	if err != nil {
		return RepeatNone, err
	}
	switch Repeat(n) {
	case RepeatNone, RepeatNew, RepeatSeen, RepeatRetry, RepeatElsewhere:
		return Repeat(n), nil
	}
	return RepeatNone, s.fail(AlertRepeatName, fmt.Errorf("%w: %d", ErrUnexpectedReply, n))
}

// CooldownHolder is the id of the alert that holds a cooldown; "" for
// none.
func (s *Scripts) CooldownHolder(ctx context.Context, key string) (string, error) {
	pipe := s.rdb.Pipeline()
	c := pipe.Get(ctx, key)
	_, err := pipe.Exec(ctx)
	switch {
	case errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "WRONGTYPE"):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("lua: read a cooldown: %w", err)
	}
	return c.Val(), nil
}

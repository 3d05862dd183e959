// Package silence keeps the silences that stop a rule's alerts, or one
// group's, for a while (`fraudwatch silence`). A silence is written where
// the alert_claim script reads it, in the slot of the alerts it stops, so
// that every replica honours it atomically when it claims an alert; its
// description is kept in an index for listing and expiring.
package silence

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// MaxFor and MinFor bound how long a silence lasts: a silence shorter than
// a second would have ended, by Redis's clock, by the time it is written.
const (
	MaxFor = 365 * 24 * time.Hour
	MinFor = time.Second
)

// Silence is one silence, as it is listed.
type Silence struct {
	ID   string `json:"id"`
	Rule string `json:"rule"`
	// Match holds the group's values by field: every group_by field of the
	// rule, or none for a silence of the whole rule.
	Match map[string]string `json:"match,omitempty"`
	// Group is the group as its keys spell it (lua.Group.Encoding), when
	// the silence came from an alert (a Slack button): its values in
	// Match may be cut for showing.
	Group string `json:"group,omitempty"`
	// GroupRef names the group where its values must not show (logs):
	// Store.GroupRef. Empty for a whole rule's silence.
	GroupRef string `json:"group_ref,omitempty"`
	// Thread is the message whose Snooze made the silence (Slack's channel
	// and ts): its end is said in that message's thread (Sweeper).
	Thread  alert.Receipt `json:"thread,omitzero"`
	Reason  string        `json:"reason,omitempty"`
	Author  string        `json:"author,omitempty"`
	Created time.Time     `json:"created,omitzero"`
	Ends    time.Time     `json:"ends,omitzero"`
}

// rediser is what the store needs of a go-redis client.
type rediser interface {
	HSet(ctx context.Context, key string, values ...any) *redis.IntCmd
	HGet(ctx context.Context, key, field string) *redis.StringCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	HDel(ctx context.Context, key string, fields ...string) *redis.IntCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Process(ctx context.Context, cmd redis.Cmder) error // redisonce.SetNX
	Time(ctx context.Context) *redis.TimeCmd
	ZRevRangeByScore(ctx context.Context, key string, opt *redis.ZRangeBy) *redis.StringSliceCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	ZAdd(ctx context.Context, key string, members ...redis.Z) *redis.IntCmd
	ZAddArgs(ctx context.Context, key string, args redis.ZAddArgs) *redis.IntCmd
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
	ZRangeArgsWithScores(ctx context.Context, z redis.ZRangeArgs) *redis.ZSliceCmd
}

// adder writes a silence where claims read it (lua.Scripts).
type adder interface {
	AddSilence(ctx context.Context, keys []string, id string, ends time.Time) error
}

// Store adds, lists and expires silences, and keeps their history.
type Store struct {
	rdb     rediser
	scripts adder
	keys    lua.Keys
}

// NewStore returns a Store on rdb under the keys' prefix.
func NewStore(rdb rediser, scripts adder, keys lua.Keys) *Store {
	return &Store{rdb: rdb, scripts: scripts, keys: keys}
}

// Spec asks for a silence.
type Spec struct {
	Rule string
	// Match gives the group's values by field, every group_by field of the
	// rule; none silences the whole rule.
	Match map[string]string
	// Group, when set, names the group by its encoding instead, and Match
	// only shows it.
	Group string
	// Thread, when set, is the message whose Snooze asks for the silence:
	// its end is said in its thread.
	Thread alert.Receipt
	For    time.Duration
	Reason string
	Author string
}

// Rules are the rules in force as silences see them: each rule's group_by
// fields, by name. (Package silence takes no rules.Rule: alerts flow from
// the rules, not back.)
type Rules map[string][]string

// Add silences a rule (one of rs) for spec.For from now: the whole rule,
// or one group. A silence Redis refuses leaves nothing behind.
func (s *Store) Add(ctx context.Context, rs Rules, spec Spec, now time.Time) (Silence, error) {
	rule, d, reason, author := spec.Rule, spec.For, spec.Reason, spec.Author
	groupBy, ok := rs[rule]
	if !ok {
		return Silence{}, usage("no rule %q in the rules", rule)
	}
	if d < MinFor || d > MaxFor {
		return Silence{}, usage("--for must be at least %v and at most %v, got %v", MinFor, MaxFor, d)
	}
	if strings.TrimSpace(reason) == "" {
		return Silence{}, usage("--reason is required: say why, for whoever finds it")
	}
	sil := Silence{ID: newID(), Rule: rule, Match: spec.Match, Group: spec.Group, Thread: spec.Thread, Reason: reason, Author: author,
		Created: now.UTC().Truncate(time.Second), Ends: now.Add(d).UTC().Truncate(time.Millisecond)}
	keys, enc, err := s.target(rule, groupBy, sil)
	if err != nil {
		return Silence{}, err
	}
	if enc != "" {
		if sil.GroupRef, err = s.GroupRef(ctx, enc); err != nil {
			return Silence{}, err
		}
	}
	desc, err := json.Marshal(sil)
	if err != nil {
		return Silence{}, fmt.Errorf("silence: %w", err)
	}
	// The index first: a silence that is in force is always listed, and so
	// can always be expired.
	if err := s.rdb.HSet(ctx, s.keys.SilenceIndex(), sil.ID, desc).Err(); err != nil {
		return Silence{}, fmt.Errorf("silence: write the index: %w", err)
	}
	if !sil.Thread.IsZero() {
		if err := s.awaitEnd(ctx, sil); err != nil {
			return Silence{}, s.refused(ctx, keys, sil, err)
		}
	}
	if err := s.scripts.AddSilence(ctx, keys, sil.ID, sil.Ends); err != nil {
		return Silence{}, s.refused(ctx, keys, sil, err)
	}
	return sil, nil
}

// refused takes back what Add wrote of a silence that silence_add refused
// (or could not write): its index entry, and for a rule's silence the
// buckets that took it before one refused. Then it says why, without a
// key or a value: errors reach logs.
func (s *Store) refused(ctx context.Context, keys []string, sil Silence, cause error) error {
	// Even when the command is being interrupted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := s.forget(ctx, keys, sil.ID)
	if err == nil && !sil.Thread.IsZero() {
		err = s.forgetEnd(ctx, sil)
	}
	if err != nil {
		return fmt.Errorf("silence: %w; then, taking it back: %w", cause, err)
	}
	if !errors.Is(cause, lua.ErrInvalidArguments) {
		return fmt.Errorf("silence: %w", cause)
	}
	if t, err := s.rdb.Time(ctx).Result(); err == nil && !sil.Ends.After(t) {
		return fmt.Errorf("silence: refused: it would end at %s, already past by Redis's clock (%s), which silences "+
			"run by: is this machine's clock behind? (%w)", stamp(sil.Ends), stamp(t), cause)
	}
	full, err := s.full(ctx, keys)
	switch {
	case err != nil:
		return fmt.Errorf("silence: %w; then, reading why: %w", cause, err)
	case full && sil.Group == "" && len(sil.Match) == 0:
		return fmt.Errorf("silence: refused: rule %s already holds %d silences of the whole rule, the most it can: "+
			"expire one first (%w)", sil.Rule, maxSilences, cause)
	case full:
		return fmt.Errorf("silence: refused: this group of rule %s already holds %d silences, the most a group can: "+
			"expire one first (%w)", sil.Rule, maxSilences, cause)
	}
	return fmt.Errorf("silence: refused, and neither of its reasons holds now (a silence ended meanwhile?): "+
		"try again (%w)", cause)
}

// maxSilences is what silence_add lets one silences hash hold.
const maxSilences = 100

// full reports whether one of keys holds maxSilences.
func (s *Store) full(ctx context.Context, keys []string) (bool, error) {
	var lens []*redis.IntCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			lens = append(lens, p.HLen(ctx, k))
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("count silences: %w", err)
	}
	return slices.ContainsFunc(lens, func(c *redis.IntCmd) bool { return c.Val() >= maxSilences }), nil
}

// forget removes silence id from keys, where claims read it, and then from
// the index.
func (s *Store) forget(ctx context.Context, keys []string, id string) error {
	if err := s.unset(ctx, keys, id); err != nil {
		return err
	}
	if err := s.rdb.HDel(ctx, s.keys.SilenceIndex(), id).Err(); err != nil {
		return fmt.Errorf("remove silence %s from the index: %w", id, err)
	}
	return nil
}

// unset removes silence id from keys, where claims read it: one round
// trip for a rule's every bucket.
func (s *Store) unset(ctx context.Context, keys []string, id string) error {
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.HDel(ctx, k, id)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("remove silence %s: %w", id, err)
	}
	return nil
}

// target checks a silence's group against its rule's group_by and names
// the keys the silence goes to, and the group's encoding ("" for a whole
// rule).
func (s *Store) target(rule string, groupBy []string, sil Silence) (keys []string, enc string, err error) {
	if sil.Group != "" {
		g, err := s.keys.ParseGroup(sil.Group)
		if err != nil {
			return nil, "", usage("%v", err)
		}
		if len(sil.Match) > 0 && !s.makes(groupBy, sil.Match, g) {
			// What the silence would show is not what it silences.
			return nil, "", usage("the group's values shown do not make the group it silences: refused")
		}
		return []string{s.keys.Silences(g, rule)}, g.Encoding(), nil
	}
	match := sil.Match
	if len(match) == 0 {
		return s.keys.AllRuleSilences(rule), "", nil
	}
	for _, f := range slices.Sorted(maps.Keys(match)) {
		if !slices.Contains(groupBy, f) {
			return nil, "", usage("rule %s does not group by %s (it groups by %s)", rule, f, strings.Join(groupBy, ", "))
		}
	}
	values := make([]string, len(groupBy))
	for j, f := range groupBy {
		v, ok := match[f]
		if !ok || v == "" {
			return nil, "", usage("rule %s groups by %s: --match needs a value for each of them, or none to silence the rule", rule, strings.Join(groupBy, ", "))
		}
		values[j] = v
	}
	g := s.keys.Group(values)
	return []string{s.keys.Silences(g, rule)}, g.Encoding(), nil
}

// makes reports whether match, a value for each of the rule's group_by
// fields and no other, makes group g: its values in group_by's order
// encode to g (Keys.Group: plainly, or hashed when long).
func (s *Store) makes(groupBy []string, match map[string]string, g lua.Group) bool {
	if len(match) != len(groupBy) {
		return false
	}
	values := make([]string, len(groupBy))
	for i, f := range groupBy {
		v, ok := match[f]
		if !ok {
			return false
		}
		values[i] = v
	}
	return s.keys.Group(values).Encoding() == g.Encoding()
}

// List returns the silences in force at now, the soonest to end first;
// the ended ones move to the history.
func (s *Store) List(ctx context.Context, now time.Time) ([]Silence, error) {
	all, err := s.rdb.HGetAll(ctx, s.keys.SilenceIndex()).Result()
	if err != nil {
		return nil, fmt.Errorf("silence: read the index: %w", err)
	}
	var out []Silence
	var ended []string
	var events []Event
	for id, desc := range all {
		var sil Silence
		if err := json.Unmarshal([]byte(desc), &sil); err != nil {
			ended = append(ended, id) // unreadable: nothing to show
			continue
		}
		if !sil.Ends.After(now) {
			ended = append(ended, id)
			events = append(events, Event{At: sil.Ends, What: Ended, Silence: sil})
			continue
		}
		out = append(out, sil)
	}
	if len(ended) > 0 {
		// History first: a lister that stops in between leaves them to
		// the next, which records the same events again, as one.
		if err := s.record(ctx, now, events...); err != nil {
			return nil, err
		}
		if err := s.rdb.HDel(ctx, s.keys.SilenceIndex(), ended...).Err(); err != nil {
			return nil, fmt.Errorf("silence: forget ended silences: %w", err)
		}
	}
	slices.SortFunc(out, func(a, b Silence) int { return cmp.Or(a.Ends.Compare(b.Ends), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// Expire ends silence id now, by who: alerts claimed from now on are not
// silenced by it, and the history says who ended it.
func (s *Store) Expire(ctx context.Context, rs Rules, id, by string, now time.Time) (Silence, error) {
	desc, err := s.rdb.HGet(ctx, s.keys.SilenceIndex(), id).Result()
	if errors.Is(err, redis.Nil) {
		return Silence{}, usage("no silence %s in force", alert.Printable(id))
	}
	if err != nil {
		return Silence{}, fmt.Errorf("silence: read the index: %w", err)
	}
	var sil Silence
	if err := json.Unmarshal([]byte(desc), &sil); err != nil {
		return Silence{}, fmt.Errorf("silence: %s: %w", id, err)
	}
	if !sil.Ends.After(now) {
		// Ended, not yet listed: it goes to the history as ended.
		if _, err := s.List(ctx, now); err != nil {
			return Silence{}, err
		}
		return Silence{}, usage("no silence %s in force: it ended at %s", id, sil.Ends.Format(time.RFC3339))
	}
	// The keys follow from the rule's group_by; a rule since removed from
	// the rules has no alerts left to silence.
	var keys []string
	if groupBy, ok := rs[sil.Rule]; ok {
		if keys, _, err = s.target(sil.Rule, groupBy, sil); err != nil {
			return Silence{}, err
		}
	}
	// Out of the claims' way first, then into the history, then out of
	// the index: until the last, expire can be run again.
	if err := s.unset(ctx, keys, id); err != nil {
		return Silence{}, fmt.Errorf("silence: expire: %w", err)
	}
	if err := s.record(ctx, now, Event{At: now.UTC(), What: Expired, By: by, Silence: sil}); err != nil {
		return Silence{}, err
	}
	if !sil.Thread.IsZero() {
		if err := s.endedEarly(ctx, sil, now); err != nil {
			return Silence{}, err
		}
	}
	if err := s.rdb.HDel(ctx, s.keys.SilenceIndex(), id).Err(); err != nil {
		return Silence{}, fmt.Errorf("silence: expire %s: %w", id, err)
	}
	return sil, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

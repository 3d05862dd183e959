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

	"github.com/fraudwatch/fraudwatch/lua"
)

// MaxFor bounds how long a silence lasts.
const MaxFor = 365 * 24 * time.Hour

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
	Group   string    `json:"group,omitempty"`
	Reason  string    `json:"reason"`
	Author  string    `json:"author,omitempty"`
	Created time.Time `json:"created"`
	Ends    time.Time `json:"ends"`
}

// rediser is what the store needs of a go-redis client.
type rediser interface {
	HSet(ctx context.Context, key string, values ...any) *redis.IntCmd
	HGet(ctx context.Context, key, field string) *redis.StringCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	HDel(ctx context.Context, key string, fields ...string) *redis.IntCmd
}

// adder writes a silence where claims read it (lua.Scripts).
type adder interface {
	AddSilence(ctx context.Context, keys []string, id string, ends time.Time) error
}

// Store adds, lists and expires silences.
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
	Group  string
	For    time.Duration
	Reason string
	Author string
}

// Rules are the rules in force as silences see them: each rule's group_by
// fields, by name. (Package silence takes no rules.Rule: alerts flow from
// the rules, not back.)
type Rules map[string][]string

// Add silences a rule (one of rs) for spec.For from now: the whole rule,
// or one group.
func (s *Store) Add(ctx context.Context, rs Rules, spec Spec, now time.Time) (Silence, error) {
	rule, d, reason, author := spec.Rule, spec.For, spec.Reason, spec.Author
	groupBy, ok := rs[rule]
	if !ok {
		return Silence{}, usage("no rule %q in the rules", rule)
	}
	if d <= 0 || d > MaxFor {
		return Silence{}, usage("--for must be more than 0 and at most %v, got %v", MaxFor, d)
	}
	if strings.TrimSpace(reason) == "" {
		return Silence{}, usage("--reason is required: say why, for whoever finds it")
	}
	sil := Silence{ID: newID(), Rule: rule, Match: spec.Match, Group: spec.Group, Reason: reason, Author: author,
		Created: now.UTC().Truncate(time.Second), Ends: now.Add(d).UTC().Truncate(time.Millisecond)}
	keys, err := s.silenceKeys(rule, groupBy, sil)
	if err != nil {
		return Silence{}, err
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
	if err := s.scripts.AddSilence(ctx, keys, sil.ID, sil.Ends); err != nil {
		return Silence{}, fmt.Errorf("silence: %w", err)
	}
	return sil, nil
}

// silenceKeys checks a silence's group against r's group_by and names the
// keys the silence goes to.
func (s *Store) silenceKeys(rule string, groupBy []string, sil Silence) ([]string, error) {
	if sil.Group != "" {
		g, err := s.keys.ParseGroup(sil.Group)
		if err != nil {
			return nil, usage("%v", err)
		}
		return []string{s.keys.Silences(g, rule)}, nil
	}
	match := sil.Match
	if len(match) == 0 {
		return s.keys.AllRuleSilences(rule), nil
	}
	for _, f := range slices.Sorted(maps.Keys(match)) {
		if !slices.Contains(groupBy, f) {
			return nil, usage("rule %s does not group by %s (it groups by %s)", rule, f, strings.Join(groupBy, ", "))
		}
	}
	values := make([]string, len(groupBy))
	for j, f := range groupBy {
		v, ok := match[f]
		if !ok || v == "" {
			return nil, usage("rule %s groups by %s: --match needs a value for each of them, or none to silence the rule", rule, strings.Join(groupBy, ", "))
		}
		values[j] = v
	}
	return []string{s.keys.Silences(s.keys.Group(values), rule)}, nil
}

// List returns the silences in force at now, the soonest to end first, and
// forgets the ended ones.
func (s *Store) List(ctx context.Context, now time.Time) ([]Silence, error) {
	all, err := s.rdb.HGetAll(ctx, s.keys.SilenceIndex()).Result()
	if err != nil {
		return nil, fmt.Errorf("silence: read the index: %w", err)
	}
	var out []Silence
	var ended []string
	for id, desc := range all {
		var sil Silence
		if err := json.Unmarshal([]byte(desc), &sil); err != nil || !sil.Ends.After(now) {
			ended = append(ended, id)
			continue
		}
		out = append(out, sil)
	}
	if len(ended) > 0 {
		if err := s.rdb.HDel(ctx, s.keys.SilenceIndex(), ended...).Err(); err != nil {
			return nil, fmt.Errorf("silence: forget ended silences: %w", err)
		}
	}
	slices.SortFunc(out, func(a, b Silence) int { return cmp.Or(a.Ends.Compare(b.Ends), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// Expire ends silence id now: alerts claimed from now on are not silenced
// by it.
func (s *Store) Expire(ctx context.Context, rs Rules, id string) (Silence, error) {
	desc, err := s.rdb.HGet(ctx, s.keys.SilenceIndex(), id).Result()
	if errors.Is(err, redis.Nil) {
		return Silence{}, usage("no silence %s in force", id)
	}
	if err != nil {
		return Silence{}, fmt.Errorf("silence: read the index: %w", err)
	}
	var sil Silence
	if err := json.Unmarshal([]byte(desc), &sil); err != nil {
		return Silence{}, fmt.Errorf("silence: %s: %w", id, err)
	}
	// The keys follow from the rule's group_by; a rule since removed from
	// the rules has no alerts left to silence.
	var keys []string
	if groupBy, ok := rs[sil.Rule]; ok {
		if keys, err = s.silenceKeys(sil.Rule, groupBy, sil); err != nil {
			return Silence{}, err
		}
	}
	for _, k := range keys {
		if err := s.rdb.HDel(ctx, k, id).Err(); err != nil {
			return Silence{}, fmt.Errorf("silence: expire %s: %w", id, err)
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

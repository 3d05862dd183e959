package lua

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Alerts waiting for their destination's budget are kept per rule, in
// one hash tag ({wait}) with an index of the rules that have some, so that
// one alert_wait call sees the index and the rule's hashes: the bound is
// over every rule, and exact.

// WaitingKeys are the keys alert_wait works on for one rule.
type WaitingKeys struct {
	// Index is every rule's count of alerts waiting, and channel.
	Index string
	// New holds the rule's alerts that came in since its last seal, Sealed
	// those a drainer is sending.
	New, Sealed string
}

// WaitingIndex is the key of the index of the rules whose alerts wait.
func (k Keys) WaitingIndex() string { return k.storePrefix() + ":{wait}:rules" }

// Waiting is the keys of rule's waiting alerts.
func (k Keys) Waiting(rule string) WaitingKeys {
	return WaitingKeys{Index: k.WaitingIndex(), New: k.storePrefix() + ":{wait}:n:" + rule, Sealed: k.storePrefix() + ":{wait}:s:" + rule}
}

// WaitingLease is the key of the lease on sending rule's waiting alerts.
func (k Keys) WaitingLease(rule string) string {
	sum := sha256.Sum256([]byte(rule))
	return k.storePrefix() + ":wait-lease:" + hex.EncodeToString(sum[:16])
}

// Wait is what Wait did with an alert.
type Wait int

// Waits.
const (
	// WaitFull: as many alerts as may wait are waiting; nothing written.
	WaitFull Wait = 0
	// Waits: the alert waits now.
	Waits Wait = 1
	// WaitsAlready: the alert was waiting already; nothing written.
	WaitsAlready Wait = 2
)

// Wait keeps a claimed alert of rule (id) until a drainer sends it, whole
// when it is the first of its rule since the last seal and compact
// otherwise, unless limit alerts wait already over every rule. channel is
// the rule's, for the index. The hashes live lifetime after the last
// alert came in.
func (s *Scripts) Wait(ctx context.Context, k WaitingKeys, rule, id string, whole, compact []byte, channel string, limit int, lifetime time.Duration) (Wait, error) {
	n, err := s.single(ctx, alertWait, AlertWaitName, []string{k.Index, k.New, k.Sealed},
		"add", rule, id, whole, compact, limit, seconds(lifetime), channel)
	if err != nil {
		return WaitFull, err
	}
	if n < 0 || n > 2 {
		return WaitFull, s.fail(AlertWaitName, fmt.Errorf("%w: %d", ErrUnexpectedReply, n))
	}
	return Wait(n), nil
}

// TakeWaiting makes rule's new alerts its sealed ones, unless some are sealed
// already (a drainer died before it was done with them), and says how many
// are sealed.
func (s *Scripts) TakeWaiting(ctx context.Context, k WaitingKeys, rule string) (int, error) {
	n, err := s.single(ctx, alertWait, AlertWaitName, []string{k.Index, k.New, k.Sealed}, "seal", rule)
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// Sealed returns rule's sealed alerts by id.
func (s *Scripts) Sealed(ctx context.Context, k WaitingKeys) (map[string]string, error) {
	pipe := s.rdb.Pipeline()
	cmd := pipe.HGetAll(ctx, k.Sealed)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("lua: read sealed alerts: %w", err)
	}
	return cmd.Val(), nil
}

// WaitDone drops settled sealed alerts of rule, and says how many of its
// alerts still wait.
func (s *Scripts) WaitDone(ctx context.Context, k WaitingKeys, rule string, ids ...string) (int, error) {
	args := make([]any, 0, 2+len(ids))
	args = append(args, "done", rule)
	for _, id := range ids {
		args = append(args, id)
	}
	n, err := s.single(ctx, alertWait, AlertWaitName, []string{k.Index, k.New, k.Sealed}, args...)
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// RuleWaiting is one rule's entry in the index of waiting alerts.
type RuleWaiting struct {
	Count   int
	Channel string // the rule's channel as its last alert came in
}

// WaitingRules reads the index of waiting alerts: rule -> its count and
// channel. An entry it cannot read counts 0 (alert_wait writes it again).
func (s *Scripts) WaitingRules(ctx context.Context, index string) (map[string]RuleWaiting, error) {
	pipe := s.rdb.Pipeline()
	cmd := pipe.HGetAll(ctx, index)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("lua: read the waiting alerts' index: %w", err)
	}
	out := make(map[string]RuleWaiting, len(cmd.Val()))
	for rule, v := range cmd.Val() {
		count, channel, _ := strings.Cut(v, ":")
		n, _ := strconv.Atoi(count)
		out[rule] = RuleWaiting{Count: n, Channel: channel}
	}
	return out, nil
}

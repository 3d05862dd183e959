package lua

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The calls of this file are ClaimAlert's, IndexAlert's and
// OpenOutcomeAlert's for many alerts at once: the drain of waiting alerts
// and the retry of parked ones claim a rule's alerts together, one
// pipeline (pipelined: its NOSCRIPT path) instead of a round trip an
// alert. Each alert is still a script call of its own, in its own slot;
// go-redis's ClusterClient splits a pipeline by slot and keeps the order
// of the calls of each.

// ClaimAlerts claims each alert as ClaimAlert does, pipelined in order,
// and answers the claims in the same order. An error fails them all: some
// may have run, and a claim asked again answers the same.
func (s *Scripts) ClaimAlerts(ctx context.Context, claims []AlertClaim) ([]Claim, error) {
	out := make([]Claim, len(claims))
	calls := make([]*claimCall, len(claims))
	for i, c := range claims {
		keys, args, err := s.claimArgs(c)
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", c.ID, err)
		}
		calls[i] = &claimCall{keys: keys, args: args, claim: &out[i]}
	}
	if len(calls) == 0 {
		return out, nil
	}
	if err := pipelined(ctx, s, calls); err != nil {
		return nil, err
	}
	return out, nil
}

// claimCall is one alert_claim call of a pipeline (ClaimAlerts).
type claimCall struct {
	keys  []string
	args  []any
	claim *Claim
}

func (c *claimCall) script() string { return AlertClaimName }

func (c *claimCall) send(ctx context.Context, pipe redis.Pipeliner, eval bool) *redis.Cmd {
	return evalOrSha(ctx, pipe, alertClaim, eval, c.keys, c.args)
}

func (c *claimCall) answer(s *Scripts, cmd *redis.Cmd) error {
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return s.fail(AlertClaimName, fmt.Errorf("%w: %v", ErrUnexpectedReply, cmd.Val()))
	case n == -1:
		return s.fail(AlertClaimName, ErrInvalidArguments)
	}
	*c.claim, err = s.claimOf(n)
	return err
}

// Indexing is an alert as IndexAlerts adds it: its id and ref.
type Indexing struct {
	ID  string
	Ref string
}

// IndexAlerts adds each alert to the index of open alerts as IndexAlert
// does, pipelined in order.
func (s *Scripts) IndexAlerts(ctx context.Context, index, refs string, alerts []Indexing, limit int, lifetime time.Duration) error {
	if len(alerts) == 0 {
		return nil
	}
	calls := make([]*indexCall, len(alerts))
	for i, a := range alerts {
		calls[i] = &indexCall{keys: []string{index, refs}, args: []any{a.ID, a.Ref, limit, seconds(lifetime)}}
	}
	return pipelined(ctx, s, calls)
}

// indexCall is one alert_index call of a pipeline (IndexAlerts).
type indexCall struct {
	keys []string
	args []any
}

func (c *indexCall) script() string { return AlertIndexName }

func (c *indexCall) send(ctx context.Context, pipe redis.Pipeliner, eval bool) *redis.Cmd {
	return evalOrSha(ctx, pipe, alertIndex, eval, c.keys, c.args)
}

func (c *indexCall) answer(s *Scripts, cmd *redis.Cmd) error {
	switch n, err := cmd.Int64(); {
	case err != nil || (n != 0 && n != 1 && n != -1):
		return s.fail(AlertIndexName, fmt.Errorf("%w: %v", ErrUnexpectedReply, cmd.Val()))
	case n == -1:
		return s.fail(AlertIndexName, ErrInvalidArguments)
	}
	return nil
}

// OpenOutcomeAlerts notes each alert as OpenOutcomeAlert does, pipelined
// in order, and answers the changes of them all: a few round trips however
// many. What the notes hold is read once for all (notesOf), and each call
// is given the candidates to drop that one call after another would read
// (candidates), so that, past the bound, each drops the oldest one left.
// On an error, the changes of the calls that ran are answered with it:
// noted again, they would answer none.
func (s *Scripts) OpenOutcomeAlerts(ctx context.Context, k OutcomeKeys, alerts []OutcomeAlert, b OutcomeBounds) ([]AlertChange, error) {
	if len(alerts) == 0 {
		return nil, nil
	}
	notes, err := s.notesOf(ctx, k, alerts)
	if err != nil {
		return nil, fmt.Errorf("lua: %s: %w", OutcomeOpenName, err)
	}
	calls := make([]*openCall, len(alerts))
	for i, drop := range notes.candidates(alerts, b.Max) {
		keys, args := openArgs(k, alerts[i], b, drop)
		calls[i] = &openCall{keys: keys, args: args}
	}
	err = pipelined(ctx, s, calls)
	var changes []AlertChange
	for _, c := range calls {
		changes = append(changes, c.changes...)
	}
	return changes, err
}

// notes is what the notes of alerts held before a batch noted more: the
// oldest noted (as many as the batch has, and 3 more), how many are
// noted, and which of the batch's alerts are noted already.
type notes struct {
	oldest []string
	count  int
	noted  []bool
}

// notesOf reads the notes before alerts are noted, in one round trip a
// readChunk of alerts.
func (s *Scripts) notesOf(ctx context.Context, k OutcomeKeys, alerts []OutcomeAlert) (notes, error) {
	n := notes{noted: make([]bool, len(alerts))}
	for start := 0; start < len(alerts); start += readChunk {
		pipe := s.rdb.Pipeline()
		var oldest *redis.StringSliceCmd
		var count *redis.IntCmd
		if start == 0 {
			oldest, count = pipe.ZRange(ctx, k.Alerts(), 0, int64(len(alerts))+2), pipe.ZCard(ctx, k.Alerts())
		}
		part := alerts[start:min(start+readChunk, len(alerts))]
		exists := make([]*redis.IntCmd, len(part))
		for i, a := range part {
			exists[i] = pipe.Exists(ctx, k.Alert(a.ID))
		}
		if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return notes{}, fmt.Errorf("read the notes: %w", err)
		}
		if start == 0 {
			n.oldest, n.count = oldest.Val(), int(count.Val())
		}
		for i, e := range exists {
			n.noted[start+i] = e.Val() == 1
		}
	}
	return n, nil
}

// candidates are the candidates to drop of each call noting alerts, as
// one call after another would read them: the 4 oldest notes the calls
// before it left. Those calls drop as outcome_open does, past bound at most
// 4 a call, oldest first; an alert noted already adds none and drops none.
// The batch's own come after every note read, when all were. A note past
// its lifetime goes too, which this does not foresee: a call then meets
// candidates gone already, past the bound no more often than it is.
func (n notes) candidates(alerts []OutcomeAlert, bound int) [][]string {
	oldest := n.oldest
	if len(oldest) >= n.count { // all read: the batch's own are next
		for i, a := range alerts {
			if !n.noted[i] {
				oldest = append(oldest, a.ID)
			}
		}
	}
	out := make([][]string, len(alerts))
	count, gone := n.count, 0
	for i := range alerts {
		out[i] = oldest[gone:min(gone+4, len(oldest))]
		if n.noted[i] {
			continue
		}
		count++
		drop := min(4, count-bound, len(out[i]))
		if drop > 0 {
			gone, count = gone+drop, count-drop
		}
	}
	return out
}

// openCall is one outcome_open call of a pipeline (OpenOutcomeAlerts).
type openCall struct {
	keys    []string
	args    []any
	changes []AlertChange
}

func (c *openCall) script() string { return OutcomeOpenName }

func (c *openCall) send(ctx context.Context, pipe redis.Pipeliner, eval bool) *redis.Cmd {
	return evalOrSha(ctx, pipe, outcomeOpen, eval, c.keys, c.args)
}

func (c *openCall) answer(s *Scripts, cmd *redis.Cmd) error {
	_, changes, err := s.openedOf(cmd.Val())
	c.changes = changes
	return err
}

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
// in order, and answers the changes of them all: two round trips however
// many. The oldest alerts noted are read once for all, and the batch's
// own follow them: the i-th call is given the i-th to (i+3)-th of these as
// its candidates to drop, so that each call, past the bound, drops the
// oldest one left, as one call after another would. On an error, the
// changes of the calls that ran are answered with it: noted again, they
// would answer none.
func (s *Scripts) OpenOutcomeAlerts(ctx context.Context, k OutcomeKeys, alerts []OutcomeAlert, b OutcomeBounds) ([]AlertChange, error) {
	if len(alerts) == 0 {
		return nil, nil
	}
	oldest, err := s.oldest(ctx, k.Alerts(), len(alerts)+3)
	if err != nil {
		return nil, fmt.Errorf("lua: %s: %w", OutcomeOpenName, err)
	}
	// Past the oldest read come the batch's own, newer than any noted.
	for _, a := range alerts {
		oldest = append(oldest, a.ID)
	}
	calls := make([]*openCall, len(alerts))
	for i, a := range alerts {
		keys, args := openArgs(k, a, b, oldest[i:min(i+4, len(oldest))])
		calls[i] = &openCall{keys: keys, args: args}
	}
	err = pipelined(ctx, s, calls)
	var changes []AlertChange
	for _, c := range calls {
		changes = append(changes, c.changes...)
	}
	return changes, err
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

// evalOrSha adds script's command to pipe: EVALSHA, or EVAL with eval.
func evalOrSha(ctx context.Context, pipe redis.Pipeliner, script *redis.Script, eval bool, keys []string, args []any) *redis.Cmd {
	if eval {
		return script.Eval(ctx, pipe, keys, args...)
	}
	return script.EvalSha(ctx, pipe, keys, args...)
}

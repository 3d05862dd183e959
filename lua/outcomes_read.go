package lua

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reads of the outcomes' keys (outcomes.go), pipelined in rounds of
// readChunk commands: a read of thousands of records is bounded by its
// caller, and goes in a few round trips.
const readChunk = 1000

// StoredOutcome is an order's outcome as Redis holds it, with the alerts
// that list the order; Label "" when it has none.
type StoredOutcome struct {
	OrderID    string
	Label      string
	Source     string
	OccurredAt time.Time
	RecordedAt time.Time
	Via        string
	By         string
	Alerts     []string
}

func storedOutcome(id string, f map[string]string) StoredOutcome {
	return StoredOutcome{OrderID: id, Label: f["label"], Source: f["source"], OccurredAt: outcomeMillis(f["occurred"]),
		RecordedAt: outcomeMillis(f["recorded"]), Via: f["via"], By: f["by"]}
}

// readErr is err unless it is a key of another type (read as none).
func readErr(what string, err error) error {
	if err == nil || redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil
	}
	return fmt.Errorf("lua: read %s: %w", what, err)
}

// StoredOutcomeOf reads an order's outcome and the alerts that list it,
// oldest first; false when Redis knows neither.
func (s *Scripts) StoredOutcomeOf(ctx context.Context, k OutcomeKeys, orderID string) (StoredOutcome, bool, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGetAll(ctx, k.Order(orderID))
	l := pipe.ZRange(ctx, k.Links(orderID), 0, -1)
	_, err := pipe.Exec(ctx)
	if err := readErr("an order's outcome", err); err != nil {
		return StoredOutcome{}, false, err
	}
	o := storedOutcome(orderID, h.Val())
	o.Alerts = l.Val()
	return o, o.Label != "" || len(o.Alerts) > 0, nil
}

// StoredOutcomes reads up to limit orders' outcomes of an index (Orders,
// by when written, or Fraud, by when labelled fraud) newer than since,
// newest first, skipping the first skip; the index's entries whose
// outcome ended are left out. read is how many entries of the index it
// read: fewer than limit, it has no more.
func (s *Scripts) StoredOutcomes(ctx context.Context, k OutcomeKeys, index string, since time.Time, skip, limit int) (outcomes []StoredOutcome, read int, err error) {
	ids, err := s.newest(ctx, index, since, skip, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]StoredOutcome, 0, len(ids))
	for start := 0; start < len(ids); start += readChunk {
		part := ids[start:min(start+readChunk, len(ids))]
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(part))
		for i, m := range part {
			cmds[i] = pipe.HGetAll(ctx, k.Order(m.Member.(string)))
		}
		_, err := pipe.Exec(ctx)
		if err := readErr("orders' outcomes", err); err != nil {
			return nil, 0, err
		}
		for i, c := range cmds {
			if o := storedOutcome(part[i].Member.(string), c.Val()); o.Label != "" {
				out = append(out, o)
			}
		}
	}
	return out, len(ids), nil
}

// newest reads up to limit members of a sorted set scored after since,
// highest first, past the first skip.
func (s *Scripts) newest(ctx context.Context, index string, since time.Time, skip, limit int) ([]redis.Z, error) {
	pipe := s.rdb.Pipeline()
	z := pipe.ZRevRangeByScoreWithScores(ctx, index, &redis.ZRangeBy{Max: "+inf",
		Min: "(" + strconv.FormatInt(since.UnixMilli(), 10), Offset: int64(skip), Count: int64(limit)})
	_, err := pipe.Exec(ctx)
	if err := readErr("an index of outcomes", err); err != nil {
		return nil, err
	}
	return z.Val(), nil
}

// StoredAlert is an alert's record as Redis holds it.
type StoredAlert struct {
	ID       string
	Rule     string
	Ref      []byte
	OpenedAt time.Time
	// Outcome is "" for none; Label its own label, by whom and when.
	Outcome    string
	Label      string
	LabelledBy string
	LabelledAt time.Time
	// Orders are the orders it lists, with their labels ("" for none).
	Orders map[string]string
}

// StoredAlertOf reads an alert's record; false when it has none.
func (s *Scripts) StoredAlertOf(ctx context.Context, k OutcomeKeys, id string) (StoredAlert, bool, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGetAll(ctx, k.Alert(id))
	_, err := pipe.Exec(ctx)
	if err := readErr("an alert's record", err); err != nil {
		return StoredAlert{}, false, err
	}
	f := h.Val()
	if len(f) == 0 {
		return StoredAlert{}, false, nil
	}
	a := StoredAlert{ID: id, Rule: f["rule"], Ref: []byte(f["ref"]), OpenedAt: outcomeMillis(f["opened"]),
		Outcome: f["outcome"], Label: f["label"], LabelledBy: f["labelled_by"], LabelledAt: outcomeMillis(f["labelled_at"]),
		Orders: map[string]string{}}
	for name, v := range f {
		if o, ok := strings.CutPrefix(name, "o:"); ok {
			a.Orders[o] = v
		}
	}
	return a, true, nil
}

// StoredAlertsSince reads up to limit alerts' records opened after since,
// newest first: their id, rule, opening and outcome (not their orders).
// Those whose record ended are left out.
func (s *Scripts) StoredAlertsSince(ctx context.Context, k OutcomeKeys, since time.Time, limit int) ([]StoredAlert, error) {
	zs, err := s.newest(ctx, k.Alerts(), since, 0, limit)
	if err != nil {
		return nil, err
	}
	out := make([]StoredAlert, 0, len(zs))
	for start := 0; start < len(zs); start += readChunk {
		part := zs[start:min(start+readChunk, len(zs))]
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, len(part))
		for i, m := range part {
			cmds[i] = pipe.HMGet(ctx, k.Alert(m.Member.(string)), "rule", "outcome")
		}
		_, err := pipe.Exec(ctx)
		if err := readErr("alerts' records", err); err != nil {
			return nil, err
		}
		for i, c := range cmds {
			v := c.Val()
			rule, _ := v[0].(string)
			outcome, _ := v[1].(string)
			if rule != "" {
				out = append(out, StoredAlert{ID: part[i].Member.(string), Rule: rule, Outcome: outcome,
					OpenedAt: time.UnixMilli(int64(part[i].Score)).UTC()})
			}
		}
	}
	return out, nil
}

// FraudOrder is an order labelled fraud, when, and the alerts that list
// it.
type FraudOrder struct {
	OrderID string
	At      time.Time
	Alerts  []string
}

// FraudOrdersSince reads up to limit orders labelled fraud after since,
// newest first, with the alerts that list each.
func (s *Scripts) FraudOrdersSince(ctx context.Context, k OutcomeKeys, since time.Time, limit int) ([]FraudOrder, error) {
	zs, err := s.newest(ctx, k.Fraud(), since, 0, limit)
	if err != nil {
		return nil, err
	}
	out := make([]FraudOrder, 0, len(zs))
	for start := 0; start < len(zs); start += readChunk {
		part := zs[start:min(start+readChunk, len(zs))]
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, len(part))
		for i, m := range part {
			cmds[i] = pipe.ZRange(ctx, k.Links(m.Member.(string)), 0, -1)
		}
		_, err := pipe.Exec(ctx)
		if err := readErr("fraud orders' alerts", err); err != nil {
			return nil, err
		}
		for i, c := range cmds {
			out = append(out, FraudOrder{OrderID: part[i].Member.(string), At: time.UnixMilli(int64(part[i].Score)).UTC(),
				Alerts: c.Val()})
		}
	}
	return out, nil
}

package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outcomes of orders, and the alerts they judge, live in one slot,
// {outcomes}: they are few (an order's outcome comes once, an alert
// opens a few times a minute at most), and one slot lets one script
// record an order's outcome and judge again every alert listing it,
// atomically (outcome_record). outcome_open notes an alert sent;
// outcome_label gives an alert its own label. docs/outcomes.md.

// OutcomeKeys names the keys of outcomes.
type OutcomeKeys struct{ base string }

// Outcomes are the keys of outcomes, under the keys' prefix.
func (k Keys) Outcomes() OutcomeKeys { return OutcomeKeys{base: k.prefix + ":{outcomes}:"} }

// Order is the key of an order's outcome (a hash).
func (k OutcomeKeys) Order(orderID string) string { return k.base + "o:" + orderID }

// Links is the key of the alerts that list an order (alert id -> when it
// opened).
func (k OutcomeKeys) Links(orderID string) string { return k.base + "l:" + orderID }

// Orders is the key of the orders with an outcome (order id -> when
// written).
func (k OutcomeKeys) Orders() string { return k.base + "orders" }

// Fraud is the key of the fraud orders (order id -> when labelled fraud).
func (k OutcomeKeys) Fraud() string { return k.base + "fraud" }

// Alert is the key of an alert's record (id: rule/event id).
func (k OutcomeKeys) Alert(id string) string { return k.base + "a:" + id }

// Alerts is the key of the alerts noted (alert id -> when it opened).
func (k OutcomeKeys) Alerts() string { return k.base + "alerts" }

// OutcomeBounds bound what the outcome scripts keep: at most Max orders'
// outcomes (outcome_record) or alerts' records (outcome_open), each for
// Lifetime.
type OutcomeBounds struct {
	Max      int
	Lifetime time.Duration
}

// OrderOutcome is an order's outcome as outcome_record takes it.
type OrderOutcome struct {
	OrderID    string
	Label      string // fraud, legit, unclear
	Source     string
	OccurredAt time.Time
	Via        string // topic, slack, cli
	By         string
}

// AlertChange is an alert whose outcome a script changed.
type AlertChange struct {
	ID       string
	Rule     string
	Previous string // "" for none
	Outcome  string
	// First says this is the alert's first outcome, Elapsed after its
	// opening.
	First   bool
	Elapsed time.Duration
}

// Recorded says what outcome_record did.
type Recorded int

// Results of RecordOutcome.
const (
	RecordedNone      Recorded = 0 // older than the order's outcome, or the same again: nothing written
	RecordedChanged   Recorded = 1 // the order's label changed, or it had none
	RecordedRefreshed Recorded = 2 // a later outcome with the same label: written, no alert changes
)

// OutcomeRecorded is what RecordOutcome did.
type OutcomeRecorded struct {
	Result Recorded
	// Dropped counts the orders dropped past the bounds.
	Dropped int
	Alerts  []AlertChange
}

// maxOutcomeTries bounds RecordOutcome's reads again when alerts listing
// the order open meanwhile.
const maxOutcomeTries = 8

// ErrOutcomeRaced is returned when alerts listing an order kept opening
// while its outcome was recorded, maxOutcomeTries times: try later.
var ErrOutcomeRaced = errors.New("alerts listing the order kept opening meanwhile")

// RecordOutcome records an order's outcome and judges again every alert
// that lists it (outcome_record): it reads the order's links and the
// oldest orders, then calls the script with their keys; when an alert
// opened between the two, it reads them again.
func (s *Scripts) RecordOutcome(ctx context.Context, k OutcomeKeys, o OrderOutcome, b OutcomeBounds) (OutcomeRecorded, error) {
	for range maxOutcomeTries {
		alerts, oldest, err := s.outcomeReads(ctx, k.Links(o.OrderID), k.Orders())
		if err != nil {
			return OutcomeRecorded{}, fmt.Errorf("lua: %s: %w", OutcomeRecordName, err)
		}
		keys := []string{k.Order(o.OrderID), k.Links(o.OrderID), k.Orders(), k.Fraud()}
		args := []any{o.OrderID, o.Label, o.Source, o.OccurredAt.UnixMilli(), o.Via, o.By, b.Max, seconds(b.Lifetime), len(alerts)}
		for _, id := range alerts {
			keys, args = append(keys, k.Alert(id)), append(args, id)
		}
		for _, id := range oldest {
			keys, args = append(keys, k.Order(id)), append(args, id)
		}
		v, err := s.run(ctx, outcomeRecord, keys, args...).Result()
		if err != nil {
			return OutcomeRecorded{}, s.redisError(ctx, OutcomeRecordName, err)
		}
		if n, ok := v.(int64); ok && n == -2 {
			continue
		}
		reply, err := s.outcomeReply(OutcomeRecordName, v, 2)
		if err != nil {
			return OutcomeRecorded{}, err
		}
		code, dropped := reply[0].(int64), reply[1].(int64)
		changes, err := alertChanges(reply[2:])
		if err != nil || code < 0 || code > 2 {
			return OutcomeRecorded{}, s.fail(OutcomeRecordName, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
		}
		return OutcomeRecorded{Result: Recorded(code), Dropped: int(dropped), Alerts: changes}, nil
	}
	return OutcomeRecorded{}, s.fail(OutcomeRecordName, ErrOutcomeRaced)
}

// outcomeReads reads the members of a sorted set of links and the 4
// oldest of an index (the candidates to drop), in one round trip.
func (s *Scripts) outcomeReads(ctx context.Context, links, index string) (members, oldest []string, err error) {
	pipe := s.rdb.Pipeline()
	l := pipe.ZRange(ctx, links, 0, -1)
	o := pipe.ZRange(ctx, index, 0, 3)
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil, nil, fmt.Errorf("read the links and the oldest: %w", err)
	}
	return l.Val(), o.Val(), nil
}

// oldest reads the n oldest of an index: the candidates to drop.
func (s *Scripts) oldest(ctx context.Context, index string, n int) ([]string, error) {
	pipe := s.rdb.Pipeline()
	o := pipe.ZRange(ctx, index, 0, int64(n)-1)
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return nil, fmt.Errorf("read the oldest: %w", err)
	}
	return o.Val(), nil
}

// outcomeReply is a script's reply as a list of at least n elements whose
// first n are integers; -1 is the error contract.
func (s *Scripts) outcomeReply(name string, v any, n int) ([]any, error) {
	if i, ok := v.(int64); ok && i == -1 {
		return nil, s.fail(name, ErrInvalidArguments)
	}
	reply, ok := v.([]any)
	if !ok || len(reply) < n {
		return nil, s.fail(name, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
	}
	for _, e := range reply[:n] {
		if _, ok := e.(int64); !ok {
			return nil, s.fail(name, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
		}
	}
	return reply, nil
}

// alertChanges reads the scripts' changes: 5 elements an alert.
func alertChanges(v []any) ([]AlertChange, error) {
	if len(v)%5 != 0 {
		return nil, ErrUnexpectedReply
	}
	var out []AlertChange
	for i := 0; i < len(v); i += 5 {
		var c AlertChange
		c.ID, _ = v[i].(string)
		c.Rule, _ = v[i+1].(string)
		c.Previous, _ = v[i+2].(string)
		c.Outcome, _ = v[i+3].(string)
		ms, ok := v[i+4].(int64)
		if !ok || c.ID == "" {
			return nil, ErrUnexpectedReply
		}
		c.First, c.Elapsed = ms >= 0, time.Duration(max(ms, 0))*time.Millisecond
		out = append(out, c)
	}
	return out, nil
}

// OutcomeAlert is an alert sent, as outcome_open notes it.
type OutcomeAlert struct {
	ID   string // rule/event id
	Rule string
	Ref  []byte // its alert.Ref's JSON
	// Orders are the orders it lists, distinct: at most MaxOutcomeOrders.
	Orders []string
	// OpenedAt is when it opened; zero: now, by Redis's clock.
	OpenedAt time.Time
}

// MaxOutcomeOrders bounds the orders an alert's record lists: the
// crossing order and MaxEvidence more.
const MaxOutcomeOrders = 32

// OpenOutcomeAlert notes an alert sent with the orders it lists
// (outcome_open): created says this call did; an alert noted before is
// left as it is. Changes hold its outcome when the orders' outcomes known
// already give it one.
func (s *Scripts) OpenOutcomeAlert(ctx context.Context, k OutcomeKeys, a OutcomeAlert, b OutcomeBounds) (created bool, changes []AlertChange, err error) {
	oldest, err := s.oldest(ctx, k.Alerts(), 4)
	if err != nil {
		return false, nil, fmt.Errorf("lua: %s: %w", OutcomeOpenName, err)
	}
	keys, args := openArgs(k, a, b, oldest)
	v, err := s.run(ctx, outcomeOpen, keys, args...).Result()
	if err != nil {
		return false, nil, s.redisError(ctx, OutcomeOpenName, err)
	}
	return s.openedOf(v)
}

// openArgs are outcome_open's keys and arguments for a, with oldest (at
// most 4) the candidates to drop.
func openArgs(k OutcomeKeys, a OutcomeAlert, b OutcomeBounds, oldest []string) (keys []string, args []any) {
	var opened int64
	if !a.OpenedAt.IsZero() {
		opened = a.OpenedAt.UnixMilli()
	}
	keys = []string{k.Alert(a.ID), k.Alerts()}
	args = []any{a.ID, a.Rule, a.Ref, opened, b.Max, seconds(b.Lifetime), len(a.Orders)}
	for _, o := range a.Orders {
		keys, args = append(keys, k.Order(o), k.Links(o)), append(args, o)
	}
	for _, id := range oldest {
		keys, args = append(keys, k.Alert(id)), append(args, id)
	}
	return keys, args
}

// openedOf reads outcome_open's reply.
func (s *Scripts) openedOf(v any) (created bool, changes []AlertChange, err error) {
	reply, err := s.outcomeReply(OutcomeOpenName, v, 1)
	if err != nil {
		return false, nil, err
	}
	changes, cerr := alertChanges(reply[1:])
	if code := reply[0].(int64); cerr != nil || (code != 1 && code != 2) || (code == 2 && len(reply) != 1) {
		return false, nil, s.fail(OutcomeOpenName, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
	}
	return reply[0].(int64) == 1, changes, nil
}

// OutcomeLabelled is what LabelOutcomeAlert did.
type OutcomeLabelled struct {
	// Found is false when the alert has no record (nothing written).
	Found bool
	// Changed says the label is new; false when it was so already, or a
	// later one stands.
	Changed bool
	// Orders are the orders the alert lists, for their outcomes.
	Orders  []string
	Changes []AlertChange
}

// LabelOutcomeAlert gives an alert's record its own label by who, given
// at (the label's time in the alert's life; zero: now, by Redis's clock),
// unless a later label stands (outcome_label); it answers the orders the
// alert lists, labelled or not before.
func (s *Scripts) LabelOutcomeAlert(ctx context.Context, k OutcomeKeys, id, label, who string, at time.Time) (OutcomeLabelled, error) {
	var ms int64
	if !at.IsZero() {
		ms = at.UnixMilli()
	}
	v, err := s.run(ctx, outcomeLabel, []string{k.Alert(id)}, id, label, who, ms).Result()
	if err != nil {
		return OutcomeLabelled{}, s.redisError(ctx, OutcomeLabelName, err)
	}
	reply, err := s.outcomeReply(OutcomeLabelName, v, 1)
	if err != nil {
		return OutcomeLabelled{}, err
	}
	if reply[0].(int64) == 0 && len(reply) == 1 {
		return OutcomeLabelled{}, nil
	}
	var n int64
	ok := len(reply) >= 2
	if ok {
		n, ok = reply[1].(int64)
	}
	if code := reply[0].(int64); !ok || (code != 1 && code != 2) || n < 0 || int(n) > len(reply)-2 {
		return OutcomeLabelled{}, s.fail(OutcomeLabelName, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
	}
	out := OutcomeLabelled{Found: true, Changed: reply[0].(int64) == 1}
	for _, o := range reply[2 : 2+n] {
		id, _ := o.(string)
		out.Orders = append(out.Orders, id)
	}
	if out.Changes, err = alertChanges(reply[2+n:]); err != nil {
		return OutcomeLabelled{}, s.fail(OutcomeLabelName, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
	}
	return out, nil
}

// outcomeMillis is a time the outcome scripts wrote.
func outcomeMillis(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

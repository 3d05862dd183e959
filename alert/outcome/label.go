package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
)

// Change changes ref's alert's life as op says, by who ("slack:U123",
// "cli:alice"): what Slack's buttons and the CLI call. A label op
// (alert.OpLabelFraud…) changes the life (its receivers show the label),
// gives the alert's record its own label, which wins over its orders',
// and labels every order it lists, from Slack or the CLI as who's prefix
// says; any other op is the life's alone. A label is written whole even
// when the life had it already, so a retry completes what a first try
// did not. An alert whose life ended is labelled still when the store
// keeps its record (the State then holds the label alone). Errors wrap
// life.ErrUnknown or ErrUnknown for an alert unknown, life.ErrNotSaid
// when all is written but the receivers were not told.
func (s *Store) Change(ctx context.Context, ref alert.Ref, op alert.Op, who string) (alert.State, error) {
	l, ok := op.Label()
	if !ok {
		return s.lives.Change(ctx, ref, op, who)
	}
	via, err := viaOf(who)
	if err != nil {
		return alert.State{}, err
	}
	return s.label(ctx, ref, l, via, string(via), who)
}

// viaOf is the way in who's prefix names.
func viaOf(who string) (Via, error) {
	switch {
	case strings.HasPrefix(who, "slack:"):
		return ViaSlack, nil
	case strings.HasPrefix(who, "cli:"):
		return ViaCLI, nil
	}
	return "", fmt.Errorf("outcome: a label given by %q: who must start with slack: or cli:", who)
}

// LabelAlert labels an alert by its id ("rule/event_id"), as Change does,
// given via, its orders' outcomes from source (as a record of the topic
// names it; "" takes via's name): any alert the store keeps a record of,
// open or not; ErrUnknown for another.
func (s *Store) LabelAlert(ctx context.Context, id string, l alert.Label, via Via, source, who string) (alert.State, error) {
	if source == "" {
		source = string(via)
	}
	if !l.Valid() || !via.valid() || who == "" || len(who) > maxBy || len(source) > MaxSourceBytes {
		return alert.State{}, fmt.Errorf("outcome: label %q via %q by %d bytes: not a label", l, via, len(who))
	}
	rec, ok, err := s.s.StoredAlertOf(ctx, s.keys, id)
	if err != nil {
		return alert.State{}, fmt.Errorf("outcome: find alert %s: %w", id, err)
	}
	var ref alert.Ref
	if !ok || json.Unmarshal(rec.Ref, &ref) != nil || ref.Rule+"/"+ref.EventID != id {
		return alert.State{}, fmt.Errorf("%w: no alert %s", ErrUnknown, id)
	}
	return s.label(ctx, ref, l, via, source, who)
}

// label labels ref's alert l via, by who: its life, its record, its
// orders, whose outcomes name source.
func (s *Store) label(ctx context.Context, ref alert.Ref, l alert.Label, via Via, source, who string) (alert.State, error) {
	id := ref.Rule + "/" + ref.EventID
	st, lifeErr := s.lives.Change(ctx, ref, alert.LabelOp(l), who)
	ended := errors.Is(lifeErr, life.ErrUnknown)
	if lifeErr != nil && !ended && !errors.Is(lifeErr, life.ErrNotSaid) {
		return st, lifeErr
	}
	if ended {
		rec, ok, err := s.s.StoredAlertOf(ctx, s.keys, id)
		var kept alert.Ref
		if err != nil || !ok || json.Unmarshal(rec.Ref, &kept) != nil || kept != ref {
			return alert.State{}, errors.Join(fmt.Errorf("%w: no alert %s", ErrUnknown, id), lifeErr, err)
		}
	}
	lab, err := s.s.LabelOutcomeAlert(ctx, s.keys, id, string(l), who, st.LabelledAt)
	if err == nil && !lab.Found {
		// Sent before there were outcomes, or its record ended: made
		// from the copy its life keeps.
		if err = s.openFromLife(ctx, ref); err == nil {
			lab, err = s.s.LabelOutcomeAlert(ctx, s.keys, id, string(l), who, st.LabelledAt)
		}
	}
	if err != nil {
		return st, fmt.Errorf("outcome: label %s: %w", id, err)
	}
	s.judged(lab.Changes)
	if ended {
		st, err = s.labelState(ctx, id)
		if err != nil {
			return st, err
		}
	}
	// The label's time by Redis's clock, the same at a retry: the
	// orders' outcomes compare alike on every replica.
	at := st.LabelledAt
	if at.IsZero() {
		at = time.Now()
	}
	for _, order := range lab.Orders {
		if _, err := s.Record(ctx, Outcome{OrderID: order, Label: l, Source: source, OccurredAt: at}, via, who); err != nil {
			return st, fmt.Errorf("outcome: label the orders of %s: %w", id, err)
		}
	}
	if lifeErr != nil && !ended {
		return st, lifeErr // ErrNotSaid: all written, the receivers not told
	}
	return st, nil
}

// openFromLife notes ref's alert from the copy its life keeps.
func (s *Store) openFromLife(ctx context.Context, ref alert.Ref) error {
	e, err := s.lives.Get(ctx, ref)
	if err != nil {
		return err
	}
	a := e.Alert
	if a.Rule != ref.Rule || a.EventID != ref.EventID {
		a = alert.Alert{Rule: ref.Rule, EventID: ref.EventID} // unreadable: no orders
	}
	return s.open(ctx, a, ref, e.State.OpenedAt)
}

// labelState is the state of an alert whose life ended: its label alone,
// as its record keeps it.
func (s *Store) labelState(ctx context.Context, id string) (alert.State, error) {
	rec, ok, err := s.s.StoredAlertOf(ctx, s.keys, id)
	if err != nil || !ok {
		return alert.State{}, errors.Join(fmt.Errorf("outcome: read alert %s: %w", id, ErrUnknown), err)
	}
	return alert.State{Label: alert.Label(rec.Label), LabelledBy: rec.LabelledBy, LabelledAt: rec.LabelledAt}, nil
}

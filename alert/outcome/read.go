package outcome

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// OrderRecord is an order's outcome as the store keeps it (its By says by
// whom): when it was written, how it came in, and the alerts that list
// the order (their ids, rule/event_id). Its Label is "" when alerts list
// the order but no outcome is known.
type OrderRecord struct {
	Outcome
	RecordedAt time.Time `json:"recorded_at,omitzero"`
	Via        Via       `json:"via,omitempty"`
	Alerts     []string  `json:"alerts,omitempty"`
}

func recordOf(o lua.StoredOutcome) OrderRecord {
	return OrderRecord{Outcome: Outcome{OrderID: o.OrderID, Label: alert.Label(o.Label), Source: o.Source, OccurredAt: o.OccurredAt, By: o.By},
		RecordedAt: o.RecordedAt, Via: Via(o.Via), Alerts: o.Alerts}
}

// Recorded reports whether the store holds o, or an outcome that replaced
// it: for an order, its outcome at o's time or later (of the same label at
// the same time); for an alert, its own label as o gives it, by o.By.
func (s *Store) Recorded(ctx context.Context, o Outcome) (bool, error) {
	if o.AlertID != "" {
		rec, ok, err := s.s.StoredAlertOf(ctx, s.keys, o.AlertID)
		if err != nil || !ok {
			return false, err
		}
		return rec.Label == string(o.Label) && rec.LabelledBy == o.By, nil
	}
	rec, err := s.Order(ctx, o.OrderID)
	if errors.Is(err, ErrUnknown) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	at := o.OccurredAt.Truncate(time.Millisecond) // as Redis keeps it
	return rec.OccurredAt.After(at) || (rec.OccurredAt.Equal(at) && rec.Label == o.Label), nil
}

// KnowsAlert reports whether the store keeps a record of the alert whose
// id is id (rule/event_id): whether LabelAlert can label it.
func (s *Store) KnowsAlert(ctx context.Context, id string) (bool, error) {
	_, ok, err := s.s.StoredAlertOf(ctx, s.keys, id)
	if err != nil {
		return false, fmt.Errorf("outcome: find alert %s: %w", id, err)
	}
	return ok, nil
}

// Order reads an order's outcome and the alerts that list it; ErrUnknown
// when the store knows neither.
func (s *Store) Order(ctx context.Context, orderID string) (OrderRecord, error) {
	if orderID == "" || len(orderID) > MaxOrderIDBytes {
		return OrderRecord{}, fmt.Errorf("%w: an order id of %d bytes", ErrUnknown, len(orderID))
	}
	o, ok, err := s.s.StoredOutcomeOf(ctx, s.keys, orderID)
	if err != nil {
		return OrderRecord{}, fmt.Errorf("outcome: read an order: %w", err)
	}
	if !ok {
		return OrderRecord{}, fmt.Errorf("%w: no outcome of the order, and no alert lists it", ErrUnknown)
	}
	return recordOf(o), nil
}

// ListOptions choose what List shows.
type ListOptions struct {
	// Since leaves out outcomes written before it (for Label fraud:
	// labelled fraud before it); zero: none.
	Since time.Time
	// Label, when set, shows only outcomes of that label.
	Label alert.Label
	// Limit bounds the outcomes shown: 1 to MaxList (0: DefaultList).
	Limit int
}

// Bounds of List.
const (
	DefaultList = 100
	MaxList     = 1000
	// maxScan bounds the outcomes a List of one label reads past those of
	// other labels.
	maxScan = 10 * MaxList
)

// List returns the outcomes kept, newest written first (for Label fraud,
// newest labelled first), as `fraudwatch label list` shows them. Their
// alerts are not read (Order reads them).
func (s *Store) List(ctx context.Context, opts ListOptions) ([]OrderRecord, error) {
	if opts.Label != "" && !opts.Label.Valid() {
		return nil, fmt.Errorf("outcome: list outcomes of %q: not a label", opts.Label)
	}
	limit := opts.Limit
	if limit == 0 {
		limit = DefaultList
	}
	limit = min(max(limit, 1), MaxList)
	index := s.keys.Orders()
	if opts.Label == alert.LabelFraud {
		index = s.keys.Fraud()
	}
	var out []OrderRecord
	for skip := 0; len(out) < limit && skip < maxScan; {
		page, read, err := s.s.StoredOutcomes(ctx, s.keys, index, opts.Since, skip, limit)
		if err != nil {
			return nil, fmt.Errorf("outcome: list outcomes: %w", err)
		}
		for _, o := range page {
			if (opts.Label == "" || alert.Label(o.Label) == opts.Label) && len(out) < limit {
				out = append(out, recordOf(o))
			}
		}
		if read < limit {
			break
		}
		skip += read
	}
	return out, nil
}

package outcome

import (
	"context"
	"fmt"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// OrderRecord is an order's outcome as the store keeps it: when it was
// written, how it came in and by whom, and the alerts that list the
// order (their ids, rule/event_id). Its Label is "" when alerts list the
// order but no outcome is known.
type OrderRecord struct {
	Outcome
	RecordedAt time.Time `json:"recorded_at,omitzero"`
	Via        Via       `json:"via,omitempty"`
	By         string    `json:"by,omitempty"`
	Alerts     []string  `json:"alerts,omitempty"`
}

func recordOf(o lua.StoredOutcome) OrderRecord {
	return OrderRecord{Outcome: Outcome{OrderID: o.OrderID, Label: alert.Label(o.Label), Source: o.Source, OccurredAt: o.OccurredAt},
		RecordedAt: o.RecordedAt, Via: Via(o.Via), By: o.By, Alerts: o.Alerts}
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

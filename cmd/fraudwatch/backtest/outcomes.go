package backtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
)

// IsOutcomeLine says whether a line of an input is an outcome record (a
// JSON object whose "type" is "outcome"), not an event: `fraudwatch demo
// --record` writes its chargebacks there. Event lines are told apart
// cheaply, without decoding.
func IsOutcomeLine(line []byte) bool {
	if !bytes.Contains(line, []byte(`"`+outcome.Type+`"`)) {
		return false
	}
	var head struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(line, &head) == nil && head.Type == outcome.Type
}

// Outcomes are what became of orders, as a scored backtest judges alerts
// by them (docs/outcomes.md, Definitions): the latest outcome of each
// order, and what was read. Records are added in the order they are read:
// an input's outcome lines, then --outcomes FILE's, then the outcomes
// topic's, partition by partition.
type Outcomes struct {
	now     time.Time
	byOrder map[string]outcome.Outcome
	// Read counts every record added, refused or not; Refused those
	// refused, by reason (outcome.Decode's); Replaced those that a later
	// outcome of their order replaced (or that came after a later one).
	Read     int
	Refused  map[outcome.Reason]int
	Replaced int
}

// NewOutcomes returns empty Outcomes whose records are checked as the
// outcomes topic's consumer checks them at now: an outcome more than a day
// after now is refused (invalid_occurred_at).
func NewOutcomes(now time.Time) *Outcomes {
	return &Outcomes{now: now, byOrder: map[string]outcome.Outcome{}, Refused: map[outcome.Reason]int{}}
}

// Add reads one record. A refused one is counted by its reason; an outcome
// of an order that has one replaces it when it happened later: of two of
// one time, the first read stays, as the outcomes' store keeps the first
// written (docs/outcomes.md).
func (o *Outcomes) Add(record []byte) {
	o.Read++
	out, err := outcome.Decode(record, o.now)
	if err != nil {
		reason := outcome.ReasonMalformed
		if inv, ok := errors.AsType[*outcome.InvalidError](err); ok {
			reason = inv.Reason
		}
		o.Refused[reason]++
		return
	}
	if old, ok := o.byOrder[out.OrderID]; ok {
		o.Replaced++
		if !out.OccurredAt.After(old.OccurredAt) {
			return
		}
	}
	o.byOrder[out.OrderID] = out
}

// Label is the order's outcome; false when it has none.
func (o *Outcomes) Label(order string) (alert.Label, bool) {
	if o == nil {
		return "", false
	}
	out, ok := o.byOrder[order]
	return out.Label, ok
}

// Orders is how many orders have an outcome.
func (o *Outcomes) Orders() int { return len(o.byOrder) }

// ReadLines adds the records of JSON lines, one a line (--outcomes FILE).
// Blank lines are skipped; a line longer than outcome.MaxRecordBytes is
// refused as oversized, however long, and the lines after it are read as
// ever.
func (o *Outcomes) ReadLines(in io.Reader) error {
	br := bufio.NewReaderSize(in, outcome.MaxRecordBytes+3)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			o.Read++
			o.Refused[outcome.ReasonOversized]++
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			line = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("backtest: read outcomes: %w", err)
		}
		// Without its line end, which Decode would count in its bound.
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) > 0 {
			o.Add(line)
		}
		if err != nil {
			return nil
		}
	}
}

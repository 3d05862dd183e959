// Package backtest replays recorded events, in event-time order, through
// the rules and the script calls production's engine makes. It reports what
// the rules would have done: crossings, alerts after cooldowns, the groups
// that crossed most, and the alert list. It is what `fraudwatch backtest`
// runs.
//
// The calls are answered inside this process, never by the production
// Redis, with the rules shared out among several in-process servers. The
// scripts' Go model (lua/model) answers them, or, for Lua, the Lua scripts
// themselves in miniredis.
package backtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer"
	"github.com/fraudwatch/fraudwatch/event"
)

// Events is a replay's input, in event-time order. It keeps each event as
// the bytes it came as, and decodes them again, a batch at a time, as they
// are replayed: a decoded event takes more than twice its message's bytes,
// and a replay holds every event at once, since it sorts them first.
type Events struct {
	list []record
	// Invalid counts the lines that are not events, by reason.
	Invalid map[event.Reason]int
	// Retried counts the second records of events, a producer's retries,
	// not replayed (see consumer.Retries).
	Retried int
	Orders  int
	Refunds int
	// RuleSets are the rules lines of the input, in its order: the rules
	// a recording ran under (see RulesType).
	RuleSets []RuleSet
	// OutcomeLines are the outcome lines of the input (IsOutcomeLine), in
	// its order, as they came: a scored backtest decodes them (Outcomes).
	OutcomeLines [][]byte
}

// Len is how many events there are.
func (e *Events) Len() int { return len(e.list) }

// record is one valid event as it came: its bytes, the type its topic
// implies ("" for a line, which must say), and its time; and an order's
// id ("" for a refund), which a scored backtest judges it by.
type record struct {
	data  []byte
	typ   event.Type
	at    time.Time
	order string
}

// decoded decodes events from to to, which are one partition in event-time
// order: the windows take their offsets as the order of the events. They
// share their allocations, which live as long as any of them does.
func (e *Events) decoded(from, to int) ([]*event.Event, error) {
	values := make([][]byte, to-from)
	for i, r := range e.list[from:to] {
		values[i] = r.data
	}
	b := event.NewBatch(values)
	evs := make([]*event.Event, len(values))
	for i, r := range e.list[from:to] {
		ev, err := b.Decode(i, r.typ)
		if err != nil {
			// Every record was decoded once, when it was read.
			return nil, fmt.Errorf("backtest: event %d no longer decodes: %w", from+i, err)
		}
		ev.Source = event.Source{Topic: "backtest", Partition: 0, Offset: int64(from + i), Time: r.at}
		evs[i] = ev
	}
	return evs, nil
}

// reader builds Events: it checks each event as it comes, counts the
// invalid ones, and keeps the valid ones' bytes in large blocks, so that
// a record costs its bytes and a few words.
type reader struct {
	evs Events
	// maxBytes bounds an event, as kafka.max_event_bytes bounds the
	// consumer's messages: a larger one is oversized, as it would be there.
	maxBytes int
	// retries catches a producer's retries in the partition being read,
	// as the consumer does, within retryWindow records.
	retries     *consumer.Retries
	retryWindow int
	last        time.Time // the time of the event before
	block       []byte
}

// blockSize is the size of the blocks records are kept in.
const blockSize = 1 << 20

func newReader(maxBytes, retryWindow int) *reader {
	return &reader{evs: Events{Invalid: map[event.Reason]int{}}, maxBytes: maxBytes,
		retries: consumer.NewRetries(retryWindow), retryWindow: retryWindow}
}

// partition starts another partition: retries are caught within one.
func (r *reader) partition() { r.retries = consumer.NewRetries(r.retryWindow) }

// add checks one event: its bytes, the type its topic implies ("" for a
// line, which must say), its offset in its partition (a line's number) and
// its record's time (zero for a line). Its time is its occurred_at, else
// its record's time, else the time of the event before. data is copied.
func (r *reader) add(data []byte, typ event.Type, offset int64, recordTime time.Time) {
	if len(data) > r.maxBytes {
		r.evs.Invalid[event.ReasonOversized]++
		return
	}
	ev, err := event.Decode(data, typ)
	if err != nil {
		reason := event.ReasonMalformedJSON
		if inv, ok := errors.AsType[*event.InvalidError](err); ok {
			reason = inv.Reason
		}
		r.evs.Invalid[reason]++
		return
	}
	retry := r.retries.Seen(ev.EventID, offset)
	r.retries.Commit()
	if retry {
		r.evs.Retried++
		return
	}
	switch {
	case !ev.OccurredAt.IsZero():
		r.last = ev.OccurredAt
	case !recordTime.IsZero():
		r.last = recordTime
	}
	order := ""
	if ev.Type == event.Refund {
		r.evs.Refunds++
	} else {
		r.evs.Orders++
		order = strings.Clone(ev.OrderID) // not the line's whole copy
	}
	if cap(r.block)-len(r.block) < len(data) {
		r.block = make([]byte, 0, max(blockSize, len(data)))
	}
	n := len(r.block)
	r.block = append(r.block, data...)
	r.evs.list = append(r.evs.list, record{data: r.block[n:len(r.block):len(r.block)], typ: typ, at: r.last, order: order})
}

// done puts the events in event-time order, those of one time in the order
// they came.
func (r *reader) done() *Events {
	slices.SortStableFunc(r.evs.list, func(a, b record) int { return a.at.Compare(b.at) })
	r.evs.list = slices.Clip(r.evs.list)
	return &r.evs
}

// Read reads JSON-lines events, one a line with its "type", as
// `fraudwatch produce` takes them, and puts them in event-time order:
//
//   - An event's time is its occurred_at, else the line before's.
//   - Blank lines are skipped; other invalid lines are counted by reason.
//   - A line longer than maxBytes (kafka.max_event_bytes) is oversized, as
//     its message would be, and is not kept whole.
//   - Rules lines (RulesType) go to RuleSets. One that is unusable, or not
//     later than the one before, fails the read.
//   - Outcome lines (IsOutcomeLine) go to OutcomeLines, not yet decoded.
//   - A line whose event_id a line at most kafka.retry_window (default)
//     before had is a producer's retry: counted in Retried, not replayed,
//     as the consumer would with line numbers for offsets.
func Read(in io.Reader, maxBytes int) (*Events, error) {
	return readEvents(in, maxBytes, config.Default().Kafka.RetryWindow)
}

// readEvents is Read with a retry window (0: off).
func readEvents(in io.Reader, maxBytes, retryWindow int) (*Events, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("backtest: an event's bound must be positive, not %d", maxBytes)
	}
	// Room for the longest event, its \r\n, and one byte more that tells
	// a longer line.
	br := bufio.NewReaderSize(in, maxBytes+3)
	r := newReader(maxBytes, retryWindow)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			r.evs.Invalid[event.ReasonOversized]++
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			line = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("backtest: read: %w", err)
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case IsRulesLine(line):
			if err := r.addRules(line, n); err != nil {
				return nil, err
			}
		case IsOutcomeLine(line):
			r.evs.OutcomeLines = append(r.evs.OutcomeLines, bytes.Clone(line))
		case len(bytes.TrimSpace(line)) > 0:
			r.add(line, "", int64(n), time.Time{})
		}
		if err != nil {
			return r.done(), nil
		}
	}
}

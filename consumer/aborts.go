package consumer

import (
	"cmp"
	"io"
	"slices"

	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

var eof = io.EOF

// controlAbort is the type of a control record that ends an aborted
// transaction (1 ends a committed one).
const controlAbort = 0

// aborts follows, through one fetch's batches in offset order, which
// producers are inside an aborted transaction, as the Java consumer does:
// the broker lists each aborted transaction overlapping the answer by its
// producer and first offset, and the transaction lasts until that
// producer's abort marker.
type aborts struct {
	pending []fetchAPI.ResponseTransaction // by first offset, not yet reached
	open    map[int64]struct{}             // producers inside an aborted transaction
}

func newAborts(txns []fetchAPI.ResponseTransaction) *aborts {
	pending := slices.Clone(txns)
	slices.SortFunc(pending, func(a, b fetchAPI.ResponseTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &aborts{pending: pending, open: map[int64]struct{}{}}
}

// aborted reports whether a transactional batch of producer starting at
// offset belongs to an aborted transaction. A transaction's first offset
// is the start of its producer's first batch in it, so transactions that
// began at or before offset are the ones that can hold this batch.
func (a *aborts) aborted(producer, offset int64) bool {
	for len(a.pending) > 0 && a.pending[0].FirstOffset <= offset {
		a.open[a.pending[0].ProducerID] = struct{}{}
		a.pending = a.pending[1:]
	}
	_, ok := a.open[producer]
	return ok
}

// ended records producer's abort marker.
func (a *aborts) ended(producer int64) { delete(a.open, producer) }

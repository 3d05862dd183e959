package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

// kafka-go's Reader asks for read_committed but does not do the client's
// half of it: it hands over the records of aborted transactions and the
// transactions' markers as if they were messages (segmentio/kafka-go#1332).
// FetchCommitted does that half, as the Java client does, on kafka-go's
// protocol package.

// FetchRequest is one fetch of one partition.
type FetchRequest struct {
	Topic     string
	Partition int
	Offset    int64
	// MaxBytes bounds the answer (a record batch larger than it still
	// comes whole); MaxWait is how long the broker may wait for a first
	// record. The round trip itself is bounded by ctx.
	MaxBytes int
	MaxWait  time.Duration
}

// Fetched is what one fetch read: the committed records at and after the
// offset asked for, in order, and where the next fetch starts. Next is
// past every record the answer covered, handed over or not: transaction
// markers and aborted records use offsets too.
type Fetched struct {
	Messages      []kafka.Message
	Next          int64
	HighWaterMark int64
	// Markers and Aborted count the records skipped: transaction markers
	// (control records) and records of aborted transactions.
	Markers, Aborted int

	arena []byte // where the messages' keys and values are copied
}

// FetchCommitted fetches req's partition once, read committed: records up
// to the last stable offset, without the markers and without the records
// of aborted transactions. A broker's error for the partition is returned
// as a kafka.Error (kafka.OffsetOutOfRange, say).
func FetchCommitted(ctx context.Context, rt kafka.RoundTripper, addr net.Addr, req FetchRequest) (Fetched, error) {
	m, err := rt.RoundTrip(ctx, addr, &fetchAPI.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(req.MaxWait.Milliseconds()),
		MinBytes:       1,
		MaxBytes:       int32(req.MaxBytes),
		IsolationLevel: int8(kafka.ReadCommitted),
		SessionID:      -1,
		SessionEpoch:   -1,
		Topics: []fetchAPI.RequestTopic{{
			Topic: req.Topic,
			Partitions: []fetchAPI.RequestPartition{{
				Partition:          int32(req.Partition),
				CurrentLeaderEpoch: -1,
				FetchOffset:        req.Offset,
				LogStartOffset:     -1,
				PartitionMaxBytes:  int32(req.MaxBytes),
			}},
		}},
	})
	if err != nil {
		return Fetched{}, err
	}
	res, ok := m.(*fetchAPI.Response)
	if !ok || len(res.Topics) != 1 || len(res.Topics[0].Partitions) != 1 {
		return Fetched{}, errors.New("fetch: the broker answered for other partitions than asked")
	}
	if res.ErrorCode != 0 {
		return Fetched{}, kafka.Error(res.ErrorCode)
	}
	p := &res.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return Fetched{}, kafka.Error(p.ErrorCode)
	}
	out := Fetched{Next: req.Offset, HighWaterMark: p.HighWatermark}
	if err := out.read(req, p); err != nil {
		return Fetched{}, fmt.Errorf("fetch: reading %s/%d at %d: %w", req.Topic, req.Partition, out.Next, err)
	}
	return out, nil
}

// read takes the records of p's batches, skipping markers and the batches
// of aborted transactions.
func (f *Fetched) read(req FetchRequest, p *fetchAPI.ResponsePartition) error {
	batches := batchesOf(p.RecordSet.Records)
	ab := newAborts(p.AbortedTransactions)
	for _, b := range batches {
		switch b := b.(type) {
		case *protocol.ControlBatch:
			n, err := f.marker(b, ab)
			f.Markers += n
			if err != nil {
				return err
			}
		case *protocol.RecordBatch:
			if b.Attributes.Transactional() && ab.aborted(b.ProducerID, b.BaseOffset) {
				n, err := f.skip(b)
				f.Aborted += n
				if err != nil {
					return err
				}
				continue
			}
			if err := f.take(req, b); err != nil {
				return err
			}
		default: // a message set of the old formats: no transactions
			if err := f.take(req, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchesOf lists a record set's batches: kafka-go decodes a fetch's
// records into a stream of them.
func batchesOf(r protocol.RecordReader) []protocol.RecordReader {
	switch r := r.(type) {
	case nil:
		return nil
	case *protocol.RecordStream:
		return r.Records
	default:
		return []protocol.RecordReader{r}
	}
}

// marker reads a control batch: an abort marker ends its producer's
// aborted transaction.
func (f *Fetched) marker(b *protocol.ControlBatch, ab *aborts) (int, error) {
	n := 0
	for {
		rec, err := b.Records.ReadRecord()
		if errors.Is(err, eof) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
		f.Next = max(f.Next, rec.Offset+1)
		cr, err := protocol.ReadControlRecord(rec)
		if err == nil && cr.Type == controlAbort {
			ab.ended(b.ProducerID)
		}
	}
}

// skip passes over an aborted batch's records.
func (f *Fetched) skip(b protocol.RecordReader) (int, error) {
	n := 0
	for {
		rec, err := b.ReadRecord()
		if errors.Is(err, eof) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		closeRecord(rec)
		n++
		f.Next = max(f.Next, rec.Offset+1)
	}
}

// take hands over a batch's records from the offset asked for on (a
// broker answers from the start of the batch holding it).
func (f *Fetched) take(req FetchRequest, b protocol.RecordReader) error {
	for {
		rec, err := b.ReadRecord()
		if errors.Is(err, eof) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Offset < req.Offset {
			closeRecord(rec)
			continue
		}
		msg, err := f.message(req, rec)
		if err != nil {
			return err
		}
		msg.HighWaterMark = f.HighWaterMark
		f.Messages = append(f.Messages, msg)
		f.Next = max(f.Next, rec.Offset+1)
	}
}

// message copies rec out of the fetch's buffers, into f's arena.
func (f *Fetched) message(req FetchRequest, rec *protocol.Record) (kafka.Message, error) {
	defer closeRecord(rec)
	key, err := f.copyOut(rec.Key)
	if err != nil {
		return kafka.Message{}, err
	}
	value, err := f.copyOut(rec.Value)
	if err != nil {
		return kafka.Message{}, err
	}
	return kafka.Message{
		Topic:     req.Topic,
		Partition: req.Partition,
		Offset:    rec.Offset,
		Key:       key,
		Value:     value,
		Headers:   rec.Headers,
		Time:      rec.Time,
	}, nil
}

// A fetch copies its records' keys and values into chunks: a record's key
// and value were an allocation each, two an event. The first chunk is
// small, each next twice the last up to arenaChunk, so that a fetch of a
// few records (at low load) takes little. A message holds on to its
// chunk, which its batch's others share: they are let go of together.
const (
	firstChunk = 2 << 10
	arenaChunk = 32 << 10
)

// copyOut copies b (nil: none) into the arena, as a slice of its own
// capacity, so that no append to it runs into its neighbour's.
func (f *Fetched) copyOut(b protocol.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	n := b.Len()
	if cap(f.arena)-len(f.arena) < n {
		f.arena = make([]byte, 0, max(n, min(2*cap(f.arena), arenaChunk), firstChunk))
	}
	start := len(f.arena)
	f.arena = f.arena[:start+n]
	s := f.arena[start : start+n : start+n]
	_, err := io.ReadFull(b, s)
	return s, err
}

func closeRecord(rec *protocol.Record) {
	if rec.Key != nil {
		rec.Key.Close()
	}
	if rec.Value != nil {
		rec.Value.Close()
	}
}

package consumer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// roundTripMargin is how much longer than its MaxWait a fetch may take
// before it is given up as timed out. kafka-go's Reader leaves a quarter of
// a MaxWait under a second (25 ms of the 100 ms it had here) for the
// broker's answer to arrive, and every answer later than that was an i/o
// timeout and a new connection: about 50 a minute on an idle replica.
const roundTripMargin = 10 * time.Second

// chunk is what one fetch handed over, and where the partition stands
// after it (past the markers and aborted records it skipped too).
type chunk struct {
	msgs     []kafka.Message
	next, hw int64
	// asked and answered are when its fetch was sent and answered.
	asked, answered time.Time
}

// partitionReader reads one partition, read committed, one fetch ahead of
// the loop that handles its messages: the next fetch is in flight while
// the loop handles the last, which waits, unbuffered, until it is taken.
type partitionReader struct {
	g         *Group
	topic     string
	partition int
	log       *slog.Logger

	chunks  chan chunk
	pending chunk  // the part of the last chunk not handed over yet
	holding bool   // whether pending is one
	spans   []span // which fetch brought each message of the batch next makes
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// newPartitionReader starts reading topic's partition at offset.
func (c *Group) newPartitionReader(ctx context.Context, topic string, partition int, offset int64, log *slog.Logger) *partitionReader {
	ctx, cancel := context.WithCancel(ctx)
	r := &partitionReader{
		g: c, topic: topic, partition: partition, log: log,
		chunks: make(chan chunk), cancel: cancel, done: make(chan struct{}),
	}
	go r.run(ctx, offset)
	return r
}

// Close stops the reader and waits for its fetch loop to end; an
// in-flight fetch is abandoned, not waited for.
func (r *partitionReader) Close() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

func (r *partitionReader) run(ctx context.Context, offset int64) {
	defer close(r.done)
	failures := 0
	for {
		started := time.Now()
		f, err := r.fetchOnce(ctx, offset)
		answered := time.Now()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			offset = r.failed(ctx, offset, err, failures)
			if !sleep(ctx, fetchBackoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		r.g.fetch.skipped(r.topic, f.Markers, f.Aborted)
		if f.Next == offset {
			// Nothing new: the broker waited MaxWait. An answer that came
			// back early with nothing is not asked again at once.
			if time.Since(started) < r.g.cfg.FetchMaxWait/2 && !sleep(ctx, fetchBackoff(1)) {
				return
			}
			continue
		}
		select {
		case r.chunks <- chunk{msgs: f.Messages, next: f.Next, hw: f.HighWaterMark, asked: started, answered: answered}:
		case <-ctx.Done():
			return
		}
		offset = f.Next
	}
}

func (r *partitionReader) fetchOnce(ctx context.Context, offset int64) (Fetched, error) {
	ctx, cancel := context.WithTimeout(ctx, r.g.cfg.FetchMaxWait+roundTripMargin)
	defer cancel()
	return FetchCommitted(ctx, r.g.transport, kafka.TCP(r.g.cfg.Brokers...), FetchRequest{
		Topic: r.topic, Partition: r.partition, Offset: offset,
		MaxBytes: r.g.cfg.FetchMaxBytes, MaxWait: r.g.cfg.FetchMaxWait,
	})
}

// failed counts a failed fetch and returns where to fetch next: the same
// offset, or, when the broker no longer has it, the nearest it has. A
// failure that lasts is a WARN (about once a minute); a passing one only
// a count and a DEBUG line.
func (r *partitionReader) failed(ctx context.Context, offset int64, err error, failures int) int64 {
	reason := fetchReason(err)
	r.g.fetch.failed(r.topic, reason)
	if reason == "offset_out_of_range" {
		return r.outOfRange(ctx, offset)
	}
	if failures%persistentFailures == 0 {
		r.log.Warn("fetching the partition keeps failing; retrying", "offset", offset, "failures", failures, "reason", reason, "err", err)
	} else {
		r.log.Debug("fetch failed; retrying", "offset", offset, "reason", reason, "err", err)
	}
	return offset
}

// persistentFailures failures in a row (about a minute at the backoff's
// ceiling) make a failing partition worth a WARN.
const persistentFailures = 60

// outOfRange moves offset into the partition's log: up to its first
// offset when retention deleted records before they were read (they are
// lost, which an operator must know), or back to its end when the log was
// cut short below it (an unclean leader election).
func (r *partitionReader) outOfRange(ctx context.Context, offset int64) int64 {
	first, err := r.g.resolveOffset(ctx, r.topic, r.partition, kafka.FirstOffset)
	if err != nil {
		return offset
	}
	if offset < first {
		r.log.Warn("records were deleted before they were read; skipping them", "offset", offset, "to", first, "skipped", first-offset)
		return first
	}
	last, err := r.g.resolveOffset(ctx, r.topic, r.partition, kafka.LastOffset)
	if err != nil || offset <= last {
		return offset
	}
	r.log.Warn("the partition's log ends before the offset to read; reading from its end", "offset", offset, "to", last)
	return last
}

// fetchReason is a fetch error's bounded label.
func fetchReason(err error) string {
	var kerr kafka.Error
	var nerr net.Error
	switch {
	case errors.Is(err, kafka.OffsetOutOfRange):
		return "offset_out_of_range"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &kerr):
		return "broker_error"
	case errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	case errors.As(err, &nerr), errors.Is(err, eof), errors.Is(err, net.ErrClosed):
		return "connection"
	}
	return "other"
}

// fetchBackoff is the wait after the n-th failure in a row: 100 ms
// growing to a second.
func fetchBackoff(n int) time.Duration {
	return min(time.Duration(n)*100*time.Millisecond, time.Second)
}

// sleep waits d unless ctx ends first; it reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// next appends to batch the partition's next messages, up to max: it
// waits for a first fetch, then takes what the following ones bring until
// linger has passed. It returns where the partition stands after them:
// past the markers and aborted records skipped as well (a fetch of
// nothing else leaves the batch empty and moves it on).
func (r *partitionReader) next(ctx context.Context, batch []kafka.Message, max int, linger time.Duration) ([]kafka.Message, chunk, error) {
	if len(batch) == 0 {
		r.spans = r.spans[:0]
	}
	if !r.holding {
		select {
		case c := <-r.chunks:
			r.pending, r.holding = c, true
		case <-ctx.Done():
			return batch, chunk{}, ctx.Err()
		}
	}
	batch, at := r.take(batch, max)
	if len(batch) == 0 || len(batch) >= max {
		return batch, at, nil
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	for len(batch) < max {
		select {
		case c := <-r.chunks:
			r.pending, r.holding = c, true
			batch, at = r.take(batch, max)
		case <-t.C:
			return batch, at, nil
		case <-ctx.Done():
			return batch, at, nil
		}
	}
	return batch, at, nil
}

// take moves up to max-len(batch) messages of the pending chunk into
// batch, and says where the partition stands after them.
func (r *partitionReader) take(batch []kafka.Message, max int) ([]kafka.Message, chunk) {
	n := min(len(r.pending.msgs), max-len(batch))
	batch = append(batch, r.pending.msgs[:n]...)
	if n > 0 {
		r.spans = append(r.spans, span{n: n, asked: r.pending.asked, answered: r.pending.answered})
	}
	r.pending.msgs = r.pending.msgs[n:]
	at := chunk{next: r.pending.next, hw: r.pending.hw}
	if len(r.pending.msgs) > 0 {
		at.next = r.pending.msgs[0].Offset
	} else {
		r.pending, r.holding = chunk{}, false
	}
	return batch, at
}

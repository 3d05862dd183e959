package dispatch

import (
	"context"
	"hash/fnv"
	"sync"

	"github.com/segmentio/kafka-go"
)

// HandleMessages settles a batch of the alerts topic's messages: the
// dispatcher is the alerts group's handler. A message's key is its alert's
// cooldown key (one rule and group: Topic, PublishUpdate), and the messages
// of one key are settled in order, one after the other; those of different
// keys are spread over up to Lanes lanes that run at once. A message costs
// a few Redis round trips and little CPU, so on a loaded machine a
// partition read one message at a time falls behind a flood of one channel
// and holds the alerts of every other channel behind it (docs/alerts.md,
// Floods); lanes keep them moving. Posts (and the budget taken for them)
// still go one at a time a batch. It returns how many messages may be
// committed: every message before the first one not settled. An error (see
// ErrNotDelivered) means that one must come round again; later messages of
// other lanes may have been settled already, and a settled alert delivered
// again is settled again without a second post (its record), as after a
// crash.
func (d *Dispatcher) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	lanes := laneIndices(msgs, d.cfg.Lanes)
	b := &batch{}
	undone := make([]int, len(lanes)) // each lane's first message not settled
	errs := make([]error, len(lanes))
	run := func(l int) {
		undone[l] = len(msgs)
		for _, i := range lanes[l] {
			if b.aborted() {
				undone[l] = i
				return
			}
			if err := d.handleMessage(ctx, msgs[i], b); err != nil {
				undone[l], errs[l] = i, err
				b.abort()
				return
			}
		}
	}
	if len(lanes) == 1 {
		run(0)
	} else {
		var wg sync.WaitGroup
		for l := range lanes {
			wg.Go(func() { run(l) })
		}
		wg.Wait()
	}
	// A lane stops short only after a failure, so err is set whenever
	// done is short: the error of the first message that failed.
	done, first := len(msgs), len(msgs)
	var err error
	for l := range lanes {
		done = min(done, undone[l])
		if errs[l] != nil && undone[l] < first {
			first, err = undone[l], errs[l]
		}
	}
	return done, err
}

// laneIndices spreads msgs over at most lanes lanes by key, keeping each
// key's messages in order in one lane; the lanes are returned without
// empty ones.
func laneIndices(msgs []kafka.Message, lanes int) [][]int {
	if lanes <= 1 || len(msgs) <= 1 {
		idx := make([]int, len(msgs))
		for i := range idx {
			idx[i] = i
		}
		return [][]int{idx}
	}
	byLane := make([][]int, lanes)
	for i, m := range msgs {
		l := laneOf(m.Key, lanes)
		byLane[l] = append(byLane[l], i)
	}
	out := byLane[:0]
	for _, idx := range byLane {
		if len(idx) > 0 {
			out = append(out, idx)
		}
	}
	return out
}

// laneOf is the lane of a message keyed key, of lanes.
func laneOf(key []byte, lanes int) int {
	h := fnv.New32a()
	_, _ = h.Write(key)
	return int(h.Sum32() % uint32(lanes))
}

// batch is what a batch's lanes share: posting, which lets one post at a
// time; whether a lane failed, after which the others stop at their next
// message; and whether a post failed, after which no other post of the
// batch is tried (the receiver is likely down, and each try would wait
// through its retries).
type batch struct {
	posting sync.Mutex
	mu      sync.Mutex
	stopped bool
	postErr error
}

func (b *batch) abort() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
}

func (b *batch) aborted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}

// postEnded notes how a post ended; called under posting.
func (b *batch) postEnded(err error) {
	if err != nil {
		b.postErr = err
	}
}

// failedPost is the error of a post of the batch that failed; called under
// posting.
func (b *batch) failedPost() error { return b.postErr }

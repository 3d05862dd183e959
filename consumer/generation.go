package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// generation is one generation of the group's membership: the partitions
// kafka-go assigned in it, a loop per partition, the offsets those loops
// have handled and the lag of their partitions. It ends when kafka-go
// closes its context (a rebalance, or the group closing) and every loop
// has returned.
type generation struct {
	*Group
	gen *kafka.Generation
	rs  *runState
	// work is the context messages are handled in. It outlives the
	// generation by at most half the rebalance timeout (cutShort): the
	// member must rejoin within it, or the group moves on without it while
	// it still works on partitions that are no longer its own. Work cut
	// short is not committed and is redelivered.
	work     context.Context
	cutShort context.CancelFunc
	offsets  *offsets
	held     *held
	loops    sync.WaitGroup
}

// startGeneration starts a loop per assigned partition, a lag refresher
// and a committer on gen, and returns at once.
func (c *Group) startGeneration(work context.Context, rs *runState, gen *kafka.Generation) {
	g := &generation{Group: c, gen: gen, rs: rs, offsets: newOffsets(), held: newHeld(c.lag)}
	g.work, g.cutShort = context.WithCancel(work)
	n := 0
	for topic, parts := range gen.Assignments {
		for _, p := range parts {
			n++
			g.loops.Add(1)
			gen.Start(func(ctx context.Context) {
				defer g.loops.Done()
				g.consume(ctx, topic, p)
			})
		}
	}
	c.ready.Store(true)
	c.log.Info("joined consumer group", "group", c.cfg.GroupID, "generation", gen.ID, "partitions", n)
	// Lag is refreshed on a timer too, not only after a message succeeds:
	// while a message is retried (Redis down) the gauge must keep growing
	// with new events, and a partition whose first message is still
	// pending must have a series. It runs apart from the committer so that
	// a slow broker answer never delays a commit.
	gen.Start(g.lagLoop)
	gen.Start(g.commitLoop)
}

// commitLoop commits every CommitInterval and, when the generation ends,
// once more after every partition loop has finished its message.
func (g *generation) commitLoop(ctx context.Context) {
	t := time.NewTicker(g.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.commit()
		case <-ctx.Done():
			g.setStatus("rebalancing")
			g.ready.Store(false)
			grace := time.AfterFunc(g.cfg.RebalanceTimeout/2, g.cutShort)
			// The generation's connection stays open until every function
			// started on it has returned, so this last commit still
			// reaches the coordinator.
			g.loops.Wait()
			grace.Stop()
			g.cutShort()
			g.commit()
			g.log.Info("left consumer group generation", "group", g.cfg.GroupID, "generation", g.gen.ID)
			return
		}
	}
}

func (g *generation) commit() {
	pending := g.offsets.pending()
	if len(pending) == 0 {
		return
	}
	start := time.Now()
	err := g.gen.CommitOffsets(pending)
	g.commits.Observe(time.Since(start).Seconds())
	if err != nil {
		// Not fatal: the offsets stay pending for the next commit, and if
		// the partitions moved on, their new owner re-processes (at least
		// once).
		g.log.Warn("commit failed", "group", g.cfg.GroupID, "generation", g.gen.ID, "err", err)
		return
	}
	g.offsets.committed(pending)
}

// consume fetches and handles one partition's messages in order until the
// generation ends.
func (g *generation) consume(ctx context.Context, topic string, p kafka.PartitionAssignment) {
	log := g.log.With("topic", topic, "partition", p.ID)
	defer g.held.release(topic, p.ID)
	clock := g.stalled.hold(topic, p.ID)
	defer g.stalled.release(topic, p.ID, clock)

	start, err := g.startOffset(ctx, topic, p, log)
	if err != nil {
		return // the generation ended
	}
	mem, _ := g.handler.(partitionMemory)
	from := start
	if mem != nil {
		mem.assigned(topic, p.ID)
		defer mem.released(topic, p.ID)
		from = g.readBackFrom(ctx, log, topic, p.ID, start, mem.readBack())
	}
	r := g.newPartitionReader(ctx, topic, p.ID, from, log)
	defer r.Close()
	g.held.assign(topic, p.ID, start)
	log.Debug("consuming partition", "offset", start, "read_back_from", from)
	batch := make([]kafka.Message, 0, g.cfg.BatchSize)
	for {
		var at chunk
		var err error
		if batch, at, err = r.next(ctx, batch[:0], g.cfg.BatchSize, g.cfg.BatchLinger); err != nil {
			return // the generation ended
		}
		// Records before the start offset are read back to be remembered,
		// never handled: they were handled before.
		if batch = recall(mem, batch, start); len(batch) == 0 {
			// Only markers, aborted records or records read back: past
			// the start offset, the partition moves on all the same.
			if at.next > start {
				g.passed(topic, p.ID, at)
			}
			continue
		}
		handed := time.Now()
		if g.stages != nil {
			g.stages.handed(batch, r.spans, handed)
		}
		switch out, left := g.process(ctx, batch, at, clock, handed); out {
		case aborted:
			// A rebalance cutting work short while running is routine (the
			// next owner redelivers); during shutdown it makes Run fail.
			if g.rs.stopping.Err() != nil {
				g.rs.aborted.Add(int64(left))
			}
			return // not committed, redelivered later
		case givenUp:
			return // not committed, redelivered later
		}
	}
}

// passed marks the partition handled up to at.next.
func (g *generation) passed(topic string, partition int, at chunk) {
	g.offsets.mark(topic, partition, at.next)
	g.held.advance(topic, partition, at.next, at.hw)
}

// startOffset is where a partition's loop starts: the committed offset,
// or for a new group the earliest or latest one, resolved and committed at
// once, so that events arriving before this group's first commit are not
// skipped if the partition moves to another member meanwhile. Resolving
// is retried until the generation ends: a partition given up here would
// sit unread until the next rebalance. Topics just created answer "not
// leader" for a moment, which is no news (DEBUG); a failure that lasts is
// a WARN.
func (g *generation) startOffset(ctx context.Context, topic string, p kafka.PartitionAssignment, log *slog.Logger) (int64, error) {
	if p.Offset >= 0 {
		return p.Offset, nil
	}
	for failures := 1; ; failures++ {
		abs, err := g.resolveOffset(ctx, topic, p.ID, p.Offset)
		if err == nil {
			g.offsets.mark(topic, p.ID, abs)
			g.commit()
			return abs, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if failures%persistentFailures == 0 {
			log.Warn("resolving the start offset keeps failing; retrying", "failures", failures, "err", err)
		} else {
			log.Debug("resolving the start offset failed; retrying", "err", err)
		}
		if !sleep(ctx, fetchBackoff(failures)) {
			return 0, ctx.Err()
		}
	}
}

// lagLoop updates the lag of the held partitions every LagInterval, until
// the generation ends.
func (g *generation) lagLoop(ctx context.Context) {
	t := time.NewTicker(g.cfg.LagInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.updateLag(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// outcome is how process left a batch.
type outcome int

const (
	succeeded outcome = iota
	// givenUp: an attempt failed and the generation has ended; the
	// partition's next owner retries the messages.
	givenUp
	// aborted: the work context was cancelled (drain timeout, or work cut
	// short after a rebalance) and the last attempt failed.
	aborted
)

// handle hands msgs to the handler in the work context, and in ctx, the
// generation's, to a generationHandler.
func (g *generation) handle(ctx context.Context, msgs []kafka.Message) (int, error) {
	if h, ok := g.handler.(generationHandler); ok {
		return h.HandleMessagesIn(g.work, ctx, msgs)
	}
	return g.handler.HandleMessages(g.work, msgs)
}

// process hands a batch over until all of it is handled, marking each
// message's offset once it is done (and at, where the partition stands
// after the batch, once all of it is); or gives up on the rest uncommitted
// when work is aborted, or when an attempt failed and the generation (ctx)
// has ended. The stall clock runs from the batch's first handover until
// all of it is handled: its first message not handled yet was handed over
// then, however many calls and retries it takes.
func (g *generation) process(ctx context.Context, msgs []kafka.Message, at chunk, clock *stallClock, handed time.Time) (out outcome, left int) {
	backoff := g.cfg.RetryMin
	clock.handed(handed)
	for {
		n, err := g.handle(ctx, msgs)
		if err == nil {
			n = len(msgs)
		}
		if n > 0 {
			last := msgs[n-1]
			done := chunk{next: last.Offset + 1, hw: last.HighWaterMark}
			if n == len(msgs) {
				done = at // past what the fetch skipped after the last one too
			}
			g.passed(last.Topic, last.Partition, done)
			msgs = msgs[n:]
		}
		if err == nil || len(msgs) == 0 {
			clock.settled()
			return succeeded, 0
		}
		log := g.log.With("topic", msgs[0].Topic, "partition", msgs[0].Partition, "offset", msgs[0].Offset)
		if g.work.Err() != nil {
			log.Warn("messages aborted uncommitted", "messages", len(msgs), "err", err)
			return aborted, len(msgs)
		}
		if ctx.Err() != nil {
			log.Warn("messages abandoned uncommitted", "messages", len(msgs), "err", err)
			return givenUp, len(msgs)
		}
		log.Warn("processing failed; retrying", "messages", len(msgs), "retry_in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-g.work.Done():
		case <-ctx.Done():
		}
		backoff = min(2*backoff, g.cfg.RetryMax)
	}
}

package consumer

import (
	"context"
	"fmt"
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
	if err := g.gen.CommitOffsets(pending); err != nil {
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

	start, err := g.startOffset(ctx, topic, p)
	if err != nil {
		log.Warn("resolving start offset failed; rejoining", "err", err)
		return
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        g.cfg.Brokers,
		Topic:          topic,
		Partition:      p.ID,
		Dialer:         g.dialer,
		MinBytes:       1,
		MaxBytes:       g.cfg.MaxMessageBytes,
		MaxWait:        500 * time.Millisecond,
		ReadBackoffMin: 100 * time.Millisecond,
		ReadBackoffMax: time.Second,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			log.Warn("kafka reader: " + fmt.Sprintf(msg, args...))
		}),
	})
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		log.Error("setting the reader offset failed", "offset", start, "err", err)
		return
	}
	g.held.assign(topic, p.ID, start)
	log.Debug("consuming partition", "offset", start)
	for {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("fetch failed; rejoining", "err", err)
			}
			return
		}
		switch g.process(ctx, g.work, msg) {
		case aborted:
			// A rebalance cutting work short while running is routine (the
			// next owner redelivers); during shutdown it makes Run fail.
			if g.rs.stopping.Err() != nil {
				g.rs.aborted.Add(1)
			}
			return // not committed, redelivered later
		case givenUp:
			return // not committed, redelivered later
		}
		g.offsets.mark(topic, p.ID, msg.Offset+1)
		g.held.advance(topic, p.ID, msg.Offset+1, msg.HighWaterMark)
	}
}

// startOffset is where a partition's loop starts: the committed offset,
// or for a new group the earliest or latest one, resolved and committed at
// once, so that events arriving before this group's first commit are not
// skipped if the partition moves to another member meanwhile.
func (g *generation) startOffset(ctx context.Context, topic string, p kafka.PartitionAssignment) (int64, error) {
	if p.Offset >= 0 {
		return p.Offset, nil
	}
	abs, err := g.resolveOffset(ctx, topic, p.ID, p.Offset)
	if err != nil {
		return 0, err
	}
	g.offsets.mark(topic, p.ID, abs)
	g.commit()
	return abs, nil
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

// outcome is how process left a message.
type outcome int

const (
	succeeded outcome = iota
	// givenUp: an attempt failed and the generation has ended; the
	// partition's next owner retries the message.
	givenUp
	// aborted: the work context was cancelled (drain timeout, or work cut
	// short after a rebalance) and the last attempt failed.
	aborted
)

// process handles one message until it succeeds, or gives up on it
// uncommitted when work is aborted or when an attempt failed and the
// generation (genCtx) has ended.
func (c *Group) process(genCtx, work context.Context, msg kafka.Message) outcome {
	backoff := c.cfg.RetryMin
	for {
		err := c.handler.HandleMessage(work, msg)
		if err == nil {
			return succeeded
		}
		log := c.log.With("topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
		if work.Err() != nil {
			log.Warn("message aborted uncommitted", "err", err)
			return aborted
		}
		if genCtx.Err() != nil {
			log.Warn("message abandoned uncommitted", "err", err)
			return givenUp
		}
		log.Warn("processing failed; retrying", "retry_in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-work.Done():
		case <-genCtx.Done():
		}
		backoff = min(2*backoff, c.cfg.RetryMax)
	}
}

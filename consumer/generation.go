package consumer

import (
	"context"
	"fmt"
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
	g.stalled.hold(topic, p.ID)
	defer g.stalled.release(topic, p.ID)

	start, err := g.startOffset(ctx, topic, p)
	if err != nil {
		log.Warn("resolving start offset failed; rejoining", "err", err)
		return
	}
	mem, _ := g.handler.(partitionMemory)
	from := start
	if mem != nil {
		mem.assigned(topic, p.ID)
		defer mem.released(topic, p.ID)
		from = g.readBackFrom(ctx, log, topic, p.ID, start, mem.readBack())
	}
	r := g.reader(topic, p.ID, log)
	defer r.Close()
	if err := r.SetOffset(from); err != nil {
		log.Error("setting the reader offset failed", "offset", from, "err", err)
		return
	}
	g.held.assign(topic, p.ID, start)
	log.Debug("consuming partition", "offset", start, "read_back_from", from)
	batch := make([]kafka.Message, 0, g.cfg.BatchSize)
	for {
		var err error
		if batch, err = g.fetch(ctx, r, batch[:0]); err != nil {
			if ctx.Err() == nil {
				log.Warn("fetch failed; rejoining", "err", err)
			}
			return
		}
		// Records before the start offset are read back to be remembered,
		// never handled: they were handled before.
		if batch = recall(mem, batch, start); len(batch) == 0 {
			continue
		}
		switch out, left := g.process(ctx, batch); out {
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

// reader reads one partition of topic.
func (g *generation) reader(topic string, partition int, log *slog.Logger) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:   g.cfg.Brokers,
		Topic:     topic,
		Partition: partition,
		Dialer:    g.dialer,
		MinBytes:  1,
		MaxBytes:  g.cfg.MaxMessageBytes,
		// Under load, fetches sometimes waited their whole MaxWait though
		// messages had arrived (a 500ms MaxWait was a 500ms p999 latency
		// in make bench): a short one bounds that, for an empty fetch of an
		// idle partition every 100ms.
		MaxWait:        100 * time.Millisecond,
		QueueCapacity:  g.cfg.BatchSize,
		ReadBackoffMin: 100 * time.Millisecond,
		ReadBackoffMax: time.Second,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			log.Warn("kafka reader: " + fmt.Sprintf(msg, args...))
		}),
	})
}

// fetch waits for a message, then takes those that follow it as long as
// they come at once, up to BatchSize, or until BatchLinger has passed.
func (g *generation) fetch(ctx context.Context, r *kafka.Reader, batch []kafka.Message) ([]kafka.Message, error) {
	msg, err := r.FetchMessage(ctx)
	if err != nil {
		return batch, err
	}
	batch = append(batch, msg)
	linger, cancel := context.WithTimeout(ctx, g.cfg.BatchLinger)
	defer cancel()
	for len(batch) < g.cfg.BatchSize {
		// A fetch the linger ends leaves its message to the next one:
		// kafka-go keeps it queued.
		msg, err := r.FetchMessage(linger)
		if err != nil {
			break
		}
		batch = append(batch, msg)
	}
	return batch, nil
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
// message's offset once it is done; or gives up on the rest uncommitted
// when work is aborted, or when an attempt failed and the generation (ctx)
// has ended.
func (g *generation) process(ctx context.Context, msgs []kafka.Message) (out outcome, left int) {
	backoff := g.cfg.RetryMin
	for {
		started := time.Now()
		n, err := g.handle(ctx, msgs)
		if err == nil {
			n = len(msgs)
		}
		if n > 0 {
			last := msgs[n-1]
			g.offsets.mark(last.Topic, last.Partition, last.Offset+1)
			g.held.advance(last.Topic, last.Partition, last.Offset+1, last.HighWaterMark)
			g.stalled.flowing(last.Topic, last.Partition)
			msgs = msgs[n:]
		}
		if err != nil && len(msgs) > 0 {
			g.stalled.failing(msgs[0].Topic, msgs[0].Partition, started)
		}
		if err == nil || len(msgs) == 0 {
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

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/cmd/fraudwatch/backtest"
	"github.com/segmentio/kafka-go"
)

// topics are where the traffic goes.
type topics struct {
	orders, refunds, outcomes string
}

// message turns a planned event or outcome into a Kafka message, stamped
// now.
func (p planned) message(to topics, now time.Time) (kafka.Message, error) {
	msg := kafka.Message{Topic: to.orders, Key: []byte(p.key)}
	switch p.kind {
	case kindRefund:
		msg.Topic = to.refunds
	case kindOutcome:
		o := *p.outcome
		o.OccurredAt = now.UTC()
		msg.Topic, msg.Value = to.outcomes, o.Record()
		return msg, nil
	}
	if p.ev == nil {
		msg.Value = []byte(p.raw)
		return msg, nil
	}
	ev := *p.ev
	ev.OccurredAt = now.UTC().Format(time.RFC3339Nano)
	v, err := json.Marshal(ev)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("encode event: %w", err)
	}
	msg.Value = v
	return msg, nil
}

// messageWriter is the part of a kafka.Writer the traffic needs.
type messageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// recorder writes each message's value, a line each, once w has written
// them, and the rules lines (backtest.RulesType) it is given between
// them. The traffic's turn keeps the two apart. Outcomes are lines of
// their own type (outcome.Type), which a backtest reads as outcomes.
type recorder struct {
	w   messageWriter
	out io.Writer
	// outcomes is the outcomes topic, whose messages are counted apart.
	outcomes string
	// events and labels count the messages written; sets describes the
	// rules lines.
	events, labels int
	sets           []string
}

func (r *recorder) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if err := r.w.WriteMessages(ctx, msgs...); err != nil {
		return err
	}
	for _, m := range msgs {
		if _, err := r.out.Write(append(append([]byte(nil), m.Value...), '\n')); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		if m.Topic == r.outcomes {
			r.labels++
		} else {
			r.events++
		}
	}
	return nil
}

// rules records a rules file's text, content, in force from at; what
// describes it in the summary.
func (r *recorder) rules(at time.Time, from string, content []byte, what string) error {
	line, err := backtest.RulesLine(at, from, content)
	if err != nil {
		return err
	}
	if _, err := r.out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("record the rules: %w", err)
	}
	r.sets = append(r.sets, what)
	return nil
}

// sender runs the generator against Kafka.
type sender struct {
	g  *generator
	w  messageWriter
	to topics
	// turn is held by each step (stamping, writing, counting): whoever
	// holds it keeps the traffic waiting, and knows that every event
	// stamped so far is written and counted.
	turn sync.Locker
	// report is called after each acknowledged batch.
	report func(produced)
	// settled, when set, waits until the pipeline has processed the
	// given number of events, and says whether it has: a message planned
	// after its step (planned.settle) waits for it.
	settled func(ctx context.Context, sent int) bool
}

// send runs the generator against Kafka until ctx ends, and returns what
// Kafka acknowledged.
func (sd sender) send(ctx context.Context) (produced, error) {
	var done produced
	start := time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		sd.turn.Lock()
		err := sd.sendDue(ctx, start, &done)
		sd.turn.Unlock()
		if err != nil {
			return done, err
		}
		select {
		case <-ctx.Done():
			return done, nil
		case <-t.C:
		}
	}
}

// sendDue sends the messages due now, stamped when written, counts them
// into done, and notes in the generator's truth what was sent. A message
// that must follow what came before it through the pipeline (one topic's
// event after another topic's) is written once the pipeline has processed
// everything sent before it.
func (sd sender) sendDue(ctx context.Context, start time.Time, done *produced) error {
	due := sd.g.step(time.Since(start))
	for len(due) > 0 {
		n := 1
		for n < len(due) && !due[n].settle {
			n++
		}
		if due[0].settle && sd.settled != nil {
			sd.settled(ctx, done.total())
		}
		if err := sd.write(ctx, due[:n], done); err != nil {
			return err
		}
		due = due[n:]
	}
	return nil
}

// write writes msgs, stamped now, and counts them into done.
func (sd sender) write(ctx context.Context, due []planned, done *produced) error {
	now := time.Now()
	msgs := make([]kafka.Message, 0, len(due))
	for _, p := range due {
		m, err := p.message(sd.to, now)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	// A batch is written whole even when ctx ends meanwhile, so that the
	// counts say exactly what Kafka holds.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	err := sd.w.WriteMessages(wctx, msgs...)
	cancel()
	if err != nil {
		return fmt.Errorf("produce %d events: %w", len(msgs), err)
	}
	for _, p := range due {
		p.sent()
		done.count(p)
	}
	sd.report(*done)
	return nil
}

// count counts one acknowledged message.
func (p *produced) count(m planned) {
	switch m.kind {
	case kindOrder:
		p.orders++
	case kindRefund:
		p.refunds++
	case kindInvalid:
		p.invalid++
	case kindOutcome:
		switch m.outcome.Label {
		case alert.LabelFraud:
			p.fraud++
		case alert.LabelLegit:
			p.legit++
		default:
			p.unclear++
		}
	}
}

// summary says what was recorded, and what replays it.
func (r *recorder) summary(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nRecorded %s", plural(int64(r.events), "event"))
	if r.labels > 0 {
		fmt.Fprintf(&b, " and %s", plural(int64(r.labels), "outcome"))
	}
	fmt.Fprintf(&b, " to %s", name)
	switch len(r.sets) {
	case 0:
		b.WriteString(", without the rules (they came from code, not a file)\n")
		return b.String()
	case 1:
		fmt.Fprintf(&b, ", and the rules they ran under: %s\n", r.sets[0])
		fmt.Fprintf(&b, "`fraudwatch backtest --input %s` replays them under these rules\n", name)
	default:
		fmt.Fprintf(&b, ", and the rules they ran under: %s, reloaded %s\n", r.sets[0], strings.Join(r.sets[1:], ", then "))
		fmt.Fprintf(&b, "`fraudwatch backtest --input %s` replays them under these rules, reloaded at the same point\n", name)
	}
	return b.String()
}

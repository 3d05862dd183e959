package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/event"
)

// ProduceStats counts what Produce sent.
type ProduceStats struct {
	Orders  int
	Refunds int
	// Rules counts the rules lines skipped.
	Rules int
	// Lines counts the lines ProduceRaw sent.
	Lines int
}

// total is what was sent.
func (s ProduceStats) total() int { return s.Orders + s.Refunds + s.Lines }

// rulesType is the "type" of a rules line, which a demo's recording holds
// among its events (backtest.RulesType): not an event, it is skipped.
const rulesType = "rules"

// InputError is a line of input that cannot be sent.
type InputError struct {
	Line int
	Msg  string
	// Sent counts the events (or, raw, the lines) sent before the bad
	// line.
	Sent int
	Unit string // "events" or "lines"
}

func (e *InputError) Error() string {
	return fmt.Sprintf("line %d: %s (%d %s before it were sent)", e.Line, e.Msg, e.Sent, e.Unit)
}

const produceBatch = 500

// Produce sends JSON-lines events to the configured topics: each line's
// "type" ("order" or "refund") picks the topic, and its customer_id, when
// it has one, becomes the message key. Lines are sent as they are, so that
// invalid events can be replayed too; only a line that is not a JSON object
// with a known type stops the run, after the lines before it are sent, so
// that the count it reports is what the topics hold. Blank lines and rules
// lines ("type": "rules") are skipped.
func Produce(ctx context.Context, k config.Kafka, in io.Reader) (ProduceStats, error) {
	b, err := newBatcher(k, "events")
	if err != nil {
		return ProduceStats{}, err
	}
	defer b.w.Close()

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		value := bytes.TrimSpace(sc.Bytes())
		if len(value) == 0 {
			continue
		}
		msg, typ, bad := route(k, value)
		if typ == rulesType {
			b.sent.Rules++
			continue
		}
		if bad != "" {
			err := b.badLine(ctx, line, bad)
			return b.sent, err
		}
		if err := b.add(ctx, msg, typ); err != nil {
			return b.sent, err
		}
	}
	if err := sc.Err(); err != nil {
		err := b.badLine(ctx, line+1, scanError(err))
		return b.sent, err
	}
	err = b.flush(ctx)
	return b.sent, err
}

// route makes the message of one line: its topic from its type, its key
// from its customer_id. bad says why a line cannot be sent.
func route(k config.Kafka, value []byte) (msg kafka.Message, typ event.Type, bad string) {
	var head struct {
		Type       any `json:"type"`
		CustomerID any `json:"customer_id"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		return kafka.Message{}, "", "not a JSON object"
	}
	switch head.Type {
	case string(event.Order):
		msg.Topic, typ = k.OrdersTopic, event.Order
	case string(event.Refund):
		msg.Topic, typ = k.RefundsTopic, event.Refund
	case rulesType:
		return kafka.Message{}, rulesType, ""
	default:
		return kafka.Message{}, "", `"type" must be "order" or "refund"`
	}
	msg.Value = append([]byte(nil), value...)
	if id, ok := head.CustomerID.(string); ok && id != "" {
		msg.Key = []byte(id)
	}
	return msg, typ, ""
}

// maxLine bounds a line of produce's input.
const maxLine = 16 << 20

// batcher writes messages in batches and counts what was acknowledged.
type batcher struct {
	w       *kafka.Writer
	unit    string // what it sends: "events" or "lines"
	batch   []kafka.Message
	pending ProduceStats // in batch
	sent    ProduceStats // sent and acknowledged
}

func newBatcher(k config.Kafka, unit string) (*batcher, error) {
	tc, mech, err := kafkaSecurity(k)
	if err != nil {
		return nil, err
	}
	return &batcher{unit: unit, w: &kafka.Writer{
		Addr:         kafka.TCP(k.Brokers...),
		Balancer:     &kafka.Murmur2Balancer{}, // the Java client's default: same key, same partition
		RequiredAcks: kafka.RequireAll,
		BatchSize:    produceBatch,
		BatchTimeout: 10 * time.Millisecond,
		Transport:    &kafka.Transport{ClientID: k.ClientID, TLS: tc, SASL: mech},
	}}, nil
}

func (b *batcher) add(ctx context.Context, msg kafka.Message, typ event.Type) error {
	b.batch = append(b.batch, msg)
	switch typ {
	case event.Order:
		b.pending.Orders++
	case event.Refund:
		b.pending.Refunds++
	default: // a raw line
		b.pending.Lines++
	}
	if len(b.batch) < produceBatch {
		return nil
	}
	return b.flush(ctx)
}

func (b *batcher) flush(ctx context.Context) error {
	if len(b.batch) == 0 {
		return nil
	}
	if err := b.w.WriteMessages(ctx, b.batch...); err != nil {
		return fmt.Errorf("write after %d %s: %w", b.sent.total(), b.unit, err)
	}
	b.sent.Orders += b.pending.Orders
	b.sent.Refunds += b.pending.Refunds
	b.sent.Lines += b.pending.Lines
	b.pending = ProduceStats{}
	b.batch = b.batch[:0]
	return nil
}

// badLine ends the run at a line that cannot be sent, once the lines before
// it are.
func (b *batcher) badLine(ctx context.Context, line int, msg string) error {
	if err := b.flush(ctx); err != nil {
		return err
	}
	return &InputError{Line: line, Msg: msg, Sent: b.sent.total(), Unit: b.unit}
}

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
}

// InputError is a line of input that cannot be sent.
type InputError struct {
	Line int
	Msg  string
	// Sent counts the events sent before the bad line.
	Sent int
}

func (e *InputError) Error() string {
	return fmt.Sprintf("line %d: %s (%d events before it were sent)", e.Line, e.Msg, e.Sent)
}

const produceBatch = 500

// Produce sends JSON-lines events to the configured topics: each line's
// "type" ("order" or "refund") picks the topic, and its customer_id, when
// it has one, becomes the message key. Lines are sent as they are, so that
// invalid events can be replayed too; only a line that is not a JSON object
// with a known type stops the run. Blank lines are skipped.
func Produce(ctx context.Context, k config.Kafka, in io.Reader) (ProduceStats, error) {
	tc, mech, err := kafkaSecurity(k)
	if err != nil {
		return ProduceStats{}, fmt.Errorf("produce: %w", err)
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(k.Brokers...),
		Balancer:     &kafka.Murmur2Balancer{}, // the Java client's default: same key, same partition
		RequiredAcks: kafka.RequireAll,
		BatchSize:    produceBatch,
		BatchTimeout: 10 * time.Millisecond,
		Transport:    &kafka.Transport{ClientID: k.ClientID, TLS: tc, SASL: mech},
	}
	defer w.Close()

	var (
		stats   ProduceStats // sent and acknowledged
		pending ProduceStats // in batch
		batch   []kafka.Message
		sent    int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := w.WriteMessages(ctx, batch...); err != nil {
			return fmt.Errorf("produce: write after %d events: %w", sent, err)
		}
		stats.Orders += pending.Orders
		stats.Refunds += pending.Refunds
		pending = ProduceStats{}
		sent += len(batch)
		batch = batch[:0]
		return nil
	}

	// A bad line ends the run; the lines before it are sent first, so that
	// the count the error reports is what the topics hold.
	badLine := func(line int, msg string) error {
		if err := flush(); err != nil {
			return err
		}
		return &InputError{Line: line, Msg: msg, Sent: sent}
	}

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		value := bytes.TrimSpace(sc.Bytes())
		if len(value) == 0 {
			continue
		}
		var head struct {
			Type       any `json:"type"`
			CustomerID any `json:"customer_id"`
		}
		if err := json.Unmarshal(value, &head); err != nil {
			err := badLine(line, "not a JSON object")
			return stats, err
		}
		var topic string
		switch head.Type {
		case string(event.Order):
			topic = k.OrdersTopic
			pending.Orders++
		case string(event.Refund):
			topic = k.RefundsTopic
			pending.Refunds++
		default:
			err := badLine(line, `"type" must be "order" or "refund"`)
			return stats, err
		}
		msg := kafka.Message{Topic: topic, Value: append([]byte(nil), value...)}
		if id, ok := head.CustomerID.(string); ok && id != "" {
			msg.Key = []byte(id)
		}
		batch = append(batch, msg)
		if len(batch) == produceBatch {
			if err := flush(); err != nil {
				return stats, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		err := badLine(line+1, err.Error())
		return stats, err
	}
	return stats, flush()
}

package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/consumer"
)

// TopicConfig names the alerts topic and how to reach it.
type TopicConfig struct {
	Brokers []string
	Topic   string
	// Transport carries TLS and SASL settings; nil uses kafka-go's default.
	Transport *kafka.Transport
}

// Validate reports settings that cannot work.
func (c *TopicConfig) Validate() error {
	if len(c.Brokers) == 0 || c.Topic == "" {
		return errors.New("alert: the alerts topic needs brokers and a name")
	}
	return nil
}

// Topic writes alerts to the alerts topic. Publish returns once every
// in-sync replica has the alert, so that the source event's offset may be
// committed: from then on the alert survives a crash of this process.
type Topic struct {
	w         *kafka.Writer
	closeOnce sync.Once
	closeErr  error
}

// NewTopic returns a writer for the alerts topic.
func NewTopic(cfg TopicConfig) (*Topic, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &kafka.Writer{
		Addr:  kafka.TCP(cfg.Brokers...),
		Topic: cfg.Topic,
		// Keyed by the (rule, group) cooldown key: one group's alerts stay
		// in order on one partition, so its dispatcher sees them in turn.
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		// Crossings from several partitions may share a batch; none waits
		// long for company.
		BatchTimeout: 2 * time.Millisecond,
		BatchBytes:   alert.MaxMessageBytes,
	}
	if cfg.Transport != nil {
		w.Transport = cfg.Transport
	}
	return &Topic{w: w}, nil
}

// Publish writes alerts and waits for all in-sync replicas to have every
// one of them. Alerts refused for their size are reported in a
// *TooLargeError, once every other alert is written.
func (t *Topic) Publish(ctx context.Context, alerts ...alert.Alert) error {
	msgs := make([]kafka.Message, len(alerts))
	for i, a := range alerts {
		value, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("alert: encode %s: %w", a.ID, err)
		}
		msgs[i] = kafka.Message{Key: []byte(a.CooldownKey), Value: value}
	}
	err := t.w.WriteMessages(ctx, msgs...)
	if err == nil {
		return nil
	}
	if !consumer.TooLarge(err) {
		return fmt.Errorf("alert: write %d alerts to %s: %w", len(alerts), t.w.Topic, err)
	}
	// A batch is refused whole, and may be refused for the size of all
	// its alerts together: only an alert refused on its own is too large.
	// Those of a batch that was written are not written again.
	written, _ := errors.AsType[kafka.WriteErrors](err)
	tl := &alert.TooLargeError{}
	for i, m := range msgs {
		if i < len(written) && written[i] == nil {
			continue
		}
		if err := t.w.WriteMessages(ctx, m); err != nil {
			if !consumer.TooLarge(err) {
				return fmt.Errorf("alert: write an alert of rule %s to %s: %w", alerts[i].Rule, t.w.Topic, err)
			}
			tl.Refused = append(tl.Refused, i)
			// The error travels in logs and dead-letter headers: it names
			// the rule, never the event.
			tl.Err = fmt.Errorf("alert: write an alert of rule %s to %s: %w", alerts[i].Rule, t.w.Topic, err)
		}
	}
	if len(tl.Refused) == 0 {
		return nil
	}
	return tl
}

// Close flushes and closes the writer. It is idempotent.
func (t *Topic) Close() error {
	t.closeOnce.Do(func() {
		if err := t.w.Close(); err != nil {
			t.closeErr = fmt.Errorf("alert: close alerts topic writer: %w", err)
		}
	})
	return t.closeErr
}

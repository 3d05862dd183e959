package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
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
	}
	if cfg.Transport != nil {
		w.Transport = cfg.Transport
	}
	return &Topic{w: w}, nil
}

// Publish writes alerts and waits for all in-sync replicas to have every
// one of them.
func (t *Topic) Publish(ctx context.Context, alerts ...Alert) error {
	msgs := make([]kafka.Message, len(alerts))
	for i, a := range alerts {
		value, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("alert: encode %s: %w", a.ID, err)
		}
		msgs[i] = kafka.Message{Key: []byte(a.CooldownKey), Value: value}
	}
	if err := t.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("alert: write %d alerts to %s: %w", len(alerts), t.w.Topic, err)
	}
	return nil
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

// Decode reads an alert from an alerts-topic message value.
func Decode(value []byte) (Alert, error) {
	var a Alert
	if err := json.Unmarshal(value, &a); err != nil {
		return Alert{}, fmt.Errorf("alert: decode: %w", err)
	}
	if a.ID == "" || a.Rule == "" || a.CooldownKey == "" || a.RecordKey == "" {
		return Alert{}, errors.New("alert: decode: id, rule, cooldown_key and record_key are required")
	}
	return a, nil
}

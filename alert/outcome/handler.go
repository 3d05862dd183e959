package outcome

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
)

// HandlerConfig tunes a Handler. Zero values take the defaults.
type HandlerConfig struct {
	// Now is the clock a record's occurred_at is checked against (at most
	// a day ahead); default time.Now.
	Now func() time.Time
}

func (c *HandlerConfig) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
}

// recorder is what the handler needs of the Store.
type recorder interface {
	Record(ctx context.Context, o Outcome, via Via, by string) (bool, error)
	LabelAlert(ctx context.Context, id string, l alert.Label, via Via, source, who string) (alert.State, error)
}

// deadLetterer takes the records the handler refuses
// (consumer.Consumer's dead-letter topic).
type deadLetterer interface {
	DeadLetter(ctx context.Context, msg kafka.Message, why string) error
}

// Handler reads the outcomes topic (a consumer.MessageHandler): each
// record is decoded (Decode) and recorded in the Store; a record refused
// is counted by reason (fraudwatch_outcomes_invalid_total), logged and
// dead-lettered, and never stops its partition.
type Handler struct {
	cfg     HandlerConfig
	store   recorder
	log     *slog.Logger
	invalid *prometheus.CounterVec
	dead    atomic.Pointer[deadLetterer]
}

// NewHandler returns a handler that records the topic's outcomes in
// store, and exports fraudwatch_outcomes_invalid_total on reg (nil: not
// registered).
func NewHandler(cfg HandlerConfig, store recorder, log *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	cfg.setDefaults()
	if store == nil {
		return nil, errors.New("outcome: nil store")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	invalid := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_outcomes_invalid_total",
		Help: "Records of the outcomes topic refused, by reason, and dead-lettered.",
	}, []string{"reason"})
	for _, r := range Reasons {
		invalid.WithLabelValues(string(r))
	}
	if reg != nil {
		if err := reg.Register(invalid); err != nil {
			return nil, fmt.Errorf("outcome: register metrics: %w", err)
		}
	}
	return &Handler{cfg: cfg, store: store, log: log, invalid: invalid}, nil
}

// SetDeadLetters makes the handler write the records it refuses to a
// dead-letter topic; without one they are only counted and logged.
func (h *Handler) SetDeadLetters(dl deadLetterer) { h.dead.Store(&dl) }

// HandleMessages records a batch of one partition's records in order.
// A Redis error stops it there: done counts the records handled, and the
// group hands the rest over again (recording one twice changes nothing).
func (h *Handler) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	for i, msg := range msgs {
		o, err := Decode(msg.Value, h.cfg.Now())
		if err == nil {
			err = h.record(ctx, o)
		}
		var bad *InvalidError
		switch {
		case errors.As(err, &bad):
			if err := h.refuse(ctx, msg, bad); err != nil {
				return i, err
			}
		case err != nil:
			return i, fmt.Errorf("outcome: record %s/%d@%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
		}
	}
	return len(msgs), nil
}

// record records o: an order's outcome, or an alert's label (and so its
// orders'), which must name an alert the store keeps.
func (h *Handler) record(ctx context.Context, o Outcome) error {
	// fraudwatch label add writes its records by cli:<who>: counted as
	// the CLI's (a label only; nothing else trusts it).
	via := ViaTopic
	if strings.HasPrefix(o.By, "cli:") {
		via = ViaCLI
	}
	if o.AlertID == "" {
		_, err := h.store.Record(ctx, o, via, o.By)
		return err
	}
	who := o.By
	if who == "" {
		who = "topic:" + o.Source
	}
	_, err := h.store.LabelAlert(ctx, o.AlertID, o.Label, via, o.Source, who)
	if errors.Is(err, ErrUnknown) {
		return invalid(ReasonInvalidAlert, "alert_id", "names no alert fraudwatch keeps")
	}
	if errors.Is(err, life.ErrNotSaid) {
		// Recorded; the receivers show it at the alert's next change.
		h.log.Warn("an alert labelled from the outcomes topic, not said to its receivers", "alert_id", o.AlertID, "err", err)
		return nil
	}
	return err
}

// refuse counts, logs and dead-letters a record refused; why names the
// reason and the field, never a value.
func (h *Handler) refuse(ctx context.Context, msg kafka.Message, bad *InvalidError) error {
	if dl := h.dead.Load(); dl != nil {
		if err := (*dl).DeadLetter(ctx, msg, "outcome "+bad.Error()); err != nil {
			return fmt.Errorf("outcome: dead-letter a refused record (%s): %w", bad.Reason, err)
		}
	}
	h.invalid.WithLabelValues(string(bad.Reason)).Inc()
	h.log.Warn("outcome record refused", "topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
		"reason", string(bad.Reason), "err", bad.Error())
	return nil
}

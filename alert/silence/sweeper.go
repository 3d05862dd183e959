package silence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
)

// noter says text in the thread of a message (alert.Threader's Note:
// Slack's bot).
type noter interface {
	Note(ctx context.Context, parent alert.Receipt, text string) error
}

// SweeperConfig paces the Sweeper. Its zero values are its defaults.
type SweeperConfig struct {
	// Every is how often it looks for ended silences (10 s).
	Every time.Duration
	// Lease is how long one replica holds a silence it is saying the end
	// of (1 min): if it dies, another says it after that.
	Lease time.Duration
	// Batch bounds the silences one pass says (20).
	Batch int
	// Late is how long after its end a silence's end is still worth
	// saying (24 h); a later one is dropped, and logged.
	Late time.Duration
}

func (c *SweeperConfig) setDefaults() {
	if c.Every == 0 {
		c.Every = 10 * time.Second
	}
	if c.Lease == 0 {
		c.Lease = time.Minute
	}
	if c.Batch == 0 {
		c.Batch = 20
	}
	if c.Late == 0 {
		c.Late = 24 * time.Hour
	}
}

// Validate reports a pace that cannot work.
func (c *SweeperConfig) Validate() error {
	if c.Every < 0 || c.Lease < 0 || c.Batch < 0 || c.Late < 0 {
		return errors.New("silence: the sweeper's every, lease, batch and late must not be negative")
	}
	return nil
}

// Sweeper says in the thread of an alert's message that the silence its
// Snooze made has ended, or was ended early (silence expire): once a
// silence across replicas (each takes a silence with a lease), again only
// if the replica that said it died before it could forget it.
type Sweeper struct {
	cfg   SweeperConfig
	store *Store
	notes noter
	log   *slog.Logger
	said  *prometheus.CounterVec
}

// NewSweeper returns a sweeper of store's silences, saying their ends
// through n. reg may be nil.
func NewSweeper(cfg SweeperConfig, store *Store, n noter, log *slog.Logger, reg prometheus.Registerer) (*Sweeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || n == nil {
		return nil, errors.New("silence: a sweeper needs a store and a noter")
	}
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	said := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fraudwatch_silence_end_notes_total",
		Help: "Ends of silences made from an alert's message, by outcome: said in its thread (said), failed (tried again after the lease), given up (the receiver refused it for good), late (dropped: it ended too long ago).",
	}, []string{"outcome"})
	if reg != nil {
		if err := reg.Register(said); err != nil {
			return nil, fmt.Errorf("silence: register the sweeper's metric: %w", err)
		}
	}
	for _, o := range []string{"said", "failed", "given_up", "late"} {
		said.WithLabelValues(o)
	}
	return &Sweeper{cfg: cfg, store: store, notes: n, log: log, said: said}, nil
}

// Run sweeps every cfg.Every until ctx ends. A failed pass is logged and
// tried again at the next.
func (w *Sweeper) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Every)
	defer t.Stop()
	for {
		if _, err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("silence ends: sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep says the ends due now, up to cfg.Batch of them, and returns how
// many it said.
func (w *Sweeper) Sweep(ctx context.Context) (int, error) {
	ended, err := w.store.EndedSilences(ctx, w.cfg.Lease, w.cfg.Batch)
	said := 0
	for _, e := range ended {
		if w.say(ctx, e) {
			said++
		}
	}
	return said, err
}

// say says e's end, and forgets it once said, given up or too late. It
// logs the silence's id and rule: no group, no value.
func (w *Sweeper) say(ctx context.Context, e EndedSilence) bool {
	attrs := []any{"silence_id", e.ID, "rule", e.Rule}
	if e.Due > w.cfg.Late {
		w.said.WithLabelValues("late").Inc()
		w.log.Warn("silence end not said in its thread: it ended too long ago", append(attrs, "ended", e.At.Format(time.RFC3339))...)
		w.done(ctx, e, attrs)
		return false
	}
	err := w.notes.Note(ctx, e.Thread, endText(e))
	if err != nil {
		if retry, _ := alert.RetryPolicy(err); retry {
			// Its lease ends, and a pass takes it again.
			w.said.WithLabelValues("failed").Inc()
			w.log.Warn("silence end not said in its thread yet", append(attrs, "err", err)...)
			return false
		}
		w.said.WithLabelValues("given_up").Inc()
		w.log.Warn("silence end not said in its thread: refused", append(attrs, "err", err)...)
		w.done(ctx, e, attrs)
		return false
	}
	w.said.WithLabelValues("said").Inc()
	w.log.Info("silence end said in its thread", attrs...)
	w.done(ctx, e, attrs)
	return true
}

func (w *Sweeper) done(ctx context.Context, e EndedSilence, attrs []any) {
	if err := w.store.Done(ctx, e); err != nil {
		// Taken again after its lease: said twice at worst.
		w.log.Warn("silence end: could not forget it", append(attrs, "err", err)...)
	}
}

// endText is what the thread is told: plain text (the noter escapes it).
// The message's own line says who snoozed.
func endText(e EndedSilence) string {
	if e.Early {
		return fmt.Sprintf(":alarm_clock: Snooze ended early, at %s (silence %s expired): this group's alerts post again.",
			stamp(e.At), e.ID)
	}
	return fmt.Sprintf(":alarm_clock: Snooze of this group ended at %s (silence %s): its alerts post again.", stamp(e.Ends), e.ID)
}

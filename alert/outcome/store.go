package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/lua"
)

// The Store keeps outcomes in Redis, shared by every replica, in one slot
// (lua.Keys.Outcomes; docs/outcomes.md, How outcomes are kept): each
// order's latest outcome, and a record of each alert sent with the orders
// it lists, judged again, atomically, at each outcome of one of them.

// StoreConfig tunes a Store. Zero values take the defaults.
type StoreConfig struct {
	// KeyPrefix starts the Redis keys (redis.key_prefix; default "fw").
	KeyPrefix string
	// Retention is how long an order's outcome is kept after it was last
	// written, and an alert's record after it opened (outcomes.retention;
	// default 180 days).
	Retention time.Duration
	// MaxOrders bounds the orders with an outcome, and the alerts'
	// records: past it the oldest go first (outcomes.max_orders; default
	// 1,000,000).
	MaxOrders int
	// MaxRead bounds what one Quality reads: the newest MaxRead alerts and
	// fraud orders of its longest period (default 20,000).
	MaxRead int
}

// Defaults of StoreConfig.
const (
	DefaultRetention = 180 * 24 * time.Hour
	DefaultMaxOrders = 1_000_000
	DefaultMaxRead   = 20_000
)

func (c *StoreConfig) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "fw"
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.MaxOrders == 0 {
		c.MaxOrders = DefaultMaxOrders
	}
	if c.MaxRead == 0 {
		c.MaxRead = DefaultMaxRead
	}
}

// Validate reports settings that cannot work.
func (c *StoreConfig) Validate() error {
	switch {
	case c.Retention < time.Second:
		return errors.New("outcome: retention must be at least a second")
	case c.MaxOrders < 1 || c.MaxOrders > 10_000_000:
		return errors.New("outcome: max orders must be 1 to 10,000,000")
	case c.MaxRead < 1:
		return errors.New("outcome: max read must be positive")
	}
	return nil
}

// scripts is what the store needs of package lua.
type scripts interface {
	RecordOutcome(ctx context.Context, k lua.OutcomeKeys, o lua.OrderOutcome, b lua.OutcomeBounds) (lua.OutcomeRecorded, error)
	OpenOutcomeAlert(ctx context.Context, k lua.OutcomeKeys, a lua.OutcomeAlert, b lua.OutcomeBounds) (bool, []lua.AlertChange, error)
	OpenOutcomeAlerts(ctx context.Context, k lua.OutcomeKeys, alerts []lua.OutcomeAlert, b lua.OutcomeBounds) ([]lua.AlertChange, error)
	LabelOutcomeAlert(ctx context.Context, k lua.OutcomeKeys, id, label, who string, at time.Time) (lua.OutcomeLabelled, error)
	StoredOutcomeOf(ctx context.Context, k lua.OutcomeKeys, orderID string) (lua.StoredOutcome, bool, error)
	StoredOutcomes(ctx context.Context, k lua.OutcomeKeys, index string, since time.Time, skip, limit int) ([]lua.StoredOutcome, int, error)
	StoredAlertOf(ctx context.Context, k lua.OutcomeKeys, id string) (lua.StoredAlert, bool, error)
	StoredAlertsSince(ctx context.Context, k lua.OutcomeKeys, since time.Time, limit int) ([]lua.StoredAlert, error)
	FraudOrdersSince(ctx context.Context, k lua.OutcomeKeys, since time.Time, limit int) ([]lua.FraudOrder, error)
}

// lives is what the store needs of alerts' lives (life.Store): a label is
// a change of the alert's life, which its receivers show.
type lives interface {
	Change(ctx context.Context, ref alert.Ref, op alert.Op, who string) (alert.State, error)
	Get(ctx context.Context, ref alert.Ref) (life.Entry, error)
}

// Store keeps outcomes and judges alerts by them. It is safe for
// concurrent use.
type Store struct {
	cfg   StoreConfig
	s     scripts
	keys  lua.OutcomeKeys
	lives lives
	log   *slog.Logger
	m     *metrics
}

// ErrUnknown is the answer for an order or an alert the store knows
// nothing of.
var ErrUnknown = errors.New("outcome: unknown")

// NewStore returns a store on s (lua.Scripts) whose labels of alerts
// change their lives in lives (life.Store), and exports its metrics on
// reg (nil: not registered).
func NewStore(cfg StoreConfig, s scripts, lives lives, log *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil || lives == nil {
		return nil, errors.New("outcome: nil scripts or lives")
	}
	keys, err := lua.NewKeys(cfg.KeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("outcome: key prefix: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, s: s, keys: keys.Outcomes(), lives: lives, log: log, m: m}, nil
}

func (s *Store) bounds() lua.OutcomeBounds {
	return lua.OutcomeBounds{Max: s.cfg.MaxOrders, Lifetime: s.cfg.Retention}
}

// maxBy bounds who gives an outcome, as alert_life bounds who acts.
const maxBy = 256

// Record records o, come in via by whom ("" for the topic, "cli:alice",
// "slack:U123"): a later outcome of the order (by OccurredAt) replaces
// the earlier; an older one, the same again, or another of the same time
// (the first written stays) changes nothing; a later one with the same
// label is kept without counting. Every alert listing the order is judged again at once.
// changed says the order's label changed (or it had none). An invalid o
// is an error wrapping an *InvalidError.
func (s *Store) Record(ctx context.Context, o Outcome, via Via, by string) (changed bool, err error) {
	if err := o.Validate(time.Now()); err != nil {
		return false, err
	}
	if !via.valid() || len(by) > maxBy {
		return false, fmt.Errorf("outcome: via %q, by of %d bytes: not a way in", via, len(by))
	}
	r, err := s.s.RecordOutcome(ctx, s.keys, lua.OrderOutcome{OrderID: o.OrderID, Label: string(o.Label), Source: o.Source,
		OccurredAt: o.OccurredAt, Via: string(via), By: by}, s.bounds())
	if err != nil {
		return false, fmt.Errorf("outcome: record an order's outcome: %w", err)
	}
	if r.Dropped > 0 {
		s.m.dropped.Add(float64(r.Dropped))
	}
	if r.Result == lua.RecordedChanged {
		s.m.recorded.WithLabelValues(string(via), string(o.Label)).Inc()
	}
	s.judged(r.Alerts)
	return r.Result == lua.RecordedChanged, nil
}

func (v Via) valid() bool { return v == ViaTopic || v == ViaSlack || v == ViaCLI }

// judged counts the alerts whose outcome changed.
func (s *Store) judged(changes []lua.AlertChange) {
	for _, c := range changes {
		if c.Outcome == "" {
			continue
		}
		s.m.alertOutcomes.WithLabelValues(c.Rule, c.Outcome).Inc()
		if c.First {
			s.m.outcomeSeconds.WithLabelValues(c.Rule).Observe(c.Elapsed.Seconds())
		}
		s.log.Debug("alert judged", "rule", c.Rule, "alert_id", c.ID, "previous", c.Previous, "outcome", c.Outcome)
	}
}

// Opened notes an alert sent, named by ref, with the orders it lists (its
// crossing order and its evidence's), so that their outcomes judge it.
// Idempotent: the dispatcher calls it at every claim that sends it.
func (s *Store) Opened(ctx context.Context, a alert.Alert, ref alert.Ref) error {
	return s.open(ctx, a, ref, time.Time{})
}

// OpenedAll notes alerts sent as Opened does each, refs[i] naming
// alerts[i], pipelined (a drain pass's alerts): a few round trips however
// many.
func (s *Store) OpenedAll(ctx context.Context, alerts []alert.Alert, refs []alert.Ref) error {
	if len(alerts) != len(refs) {
		return fmt.Errorf("outcome: note %d alerts: %d refs", len(alerts), len(refs))
	}
	noted := make([]lua.OutcomeAlert, len(alerts))
	for i, a := range alerts {
		var err error
		if noted[i], err = noteOf(a, refs[i], time.Time{}); err != nil {
			return err
		}
	}
	// The changes of the notes that ran count also when others failed:
	// noted again, they answer none.
	changes, err := s.s.OpenOutcomeAlerts(ctx, s.keys, noted, s.bounds())
	s.judged(changes)
	if err != nil {
		return fmt.Errorf("outcome: note %d alerts: %w", len(alerts), err)
	}
	return nil
}

// open is Opened, of an alert that opened at opened (zero: now).
func (s *Store) open(ctx context.Context, a alert.Alert, ref alert.Ref, opened time.Time) error {
	noted, err := noteOf(a, ref, opened)
	if err != nil {
		return err
	}
	_, changes, err := s.s.OpenOutcomeAlert(ctx, s.keys, noted, s.bounds())
	if err != nil {
		return fmt.Errorf("outcome: note %s: %w", noted.ID, err)
	}
	s.judged(changes)
	return nil
}

// noteOf is the note of an alert named by ref, opened at opened.
func noteOf(a alert.Alert, ref alert.Ref, opened time.Time) (lua.OutcomeAlert, error) {
	if ref.Rule == "" || ref.EventID == "" || a.Rule != ref.Rule || a.EventID != ref.EventID {
		return lua.OutcomeAlert{}, fmt.Errorf("outcome: note an alert: its ref names another (%s/%s)", ref.Rule, ref.EventID)
	}
	id := ref.Rule + "/" + ref.EventID
	text, err := json.Marshal(ref)
	if err != nil {
		return lua.OutcomeAlert{}, fmt.Errorf("outcome: note %s: %w", id, err)
	}
	return lua.OutcomeAlert{ID: id, Rule: ref.Rule, Ref: text, Orders: ordersOf(a), OpenedAt: opened}, nil
}

// ordersOf are the orders an alert lists: its crossing order and its
// evidence's, once each. An id no outcome can name (too long, clipped,
// unprintable) is left out.
func ordersOf(a alert.Alert) []string {
	var out []string
	add := func(id string) {
		if id == "" || len(id) > MaxOrderIDBytes || !printable(id) || len(out) == lua.MaxOutcomeOrders {
			return
		}
		for _, o := range out {
			if o == id {
				return
			}
		}
		out = append(out, id)
	}
	add(a.OrderID)
	for _, e := range a.Evidence {
		add(e.OrderID)
	}
	return out
}

// Package dispatch delivers alerts, each posted once however often it is
// delivered. Topic carries crossings durably from the rules to the
// dispatchers. The Dispatcher reads the topic back and trusts nothing it
// has not checked against the crossing Redis decided, the seal the engine
// wrote beside it, and the rule in force. It claims each alert in Redis (taking the cooldown of its rule
// and group), sends it through an alert.Notifier (alert/slack, the log,
// the demo's console) and records the outcome.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// RuleSettings are what the dispatcher takes from a rule in force, and
// never from an alert's message: whether it notifies, its cooldown and
// channel, and everything an alert shows of its rule.
type RuleSettings struct {
	Mode     alert.Mode
	Cooldown time.Duration
	Channel  string

	Description string
	Severity    alert.Severity
	Threshold   int64
	// Fingerprint names the rule's definition (rules.Rule.Fingerprint):
	// Metric, Field, GroupBy, Window and WindowType are its, and an alert
	// that crossed under another definition (before a reload) keeps its
	// own.
	Fingerprint string
	Metric      alert.Metric
	Field       string
	GroupBy     []string
	Window      time.Duration
	WindowType  alert.WindowType

	// Receivers are the receivers the routes send the rule's alerts to
	// (config's routes), by name: a dispatcher delivers an alert only when
	// its receiver is among them. Nil routes the rule to every receiver.
	Receivers []string
	// Links are the rule's link templates (its `links`).
	Links []alert.LinkTemplate
}

// claims is what the dispatcher needs from Redis: the crossing marks the
// counting scripts wrote and the seals the engine wrote beside them, a
// decision per alert that every redelivery of it gets again, its outcome,
// the alert budgets, and the parked alerts.
type claims interface {
	Crossing(ctx context.Context, marksKey string, id lua.EventID, seal []byte) (lua.Crossing, error)
	SealsSince(ctx context.Context, key string) (time.Time, bool, error)
	ClaimAlerts(ctx context.Context, c []lua.AlertClaim) ([]lua.Claim, error)
	SettleAlerts(ctx context.Context, end lua.Ending, alerts ...lua.Settlement) error
	Retention() time.Duration
	TakeBudget(ctx context.Context, channelKey, overallKey string, channel, overall lua.Budget) (bool, time.Duration, error)
	Park(ctx context.Context, key, id string, data []byte, limit int, lifetime time.Duration) (lua.Parking, error)
	Parked(ctx context.Context, key string) (map[string]string, error)
	Unpark(ctx context.Context, key string, ids ...string) error
	Lease(ctx context.Context, ttl time.Duration, keys ...string) ([]bool, error)
	Release(ctx context.Context, keys ...string) error
	waitingStore
	lifeStore
	repeatStore
}

// Dispatcher delivers alerts through a Notifier, once each. It checks that
// Redis decided each crossing, claims the alert in Redis (taking the
// (rule, group)'s cooldown), sends it within the alert budget, and records
// the outcome. The alerts topic is at least once: the record keeps an
// alert delivered again from being posted twice or suppressed by its own
// cooldown. It is safe for concurrent use.
type Dispatcher struct {
	cfg      DispatcherConfig
	notifier alert.Notifier
	receiver string // the notifier's name: its records' keys end with it
	claims   claims
	keys     lua.Keys
	// stores are the keys of the receiver's own budgets, parked and
	// waiting alerts (lua.Keys.ForReceiver).
	stores  lua.Keys
	rules   atomic.Pointer[map[string]RuleSettings]
	removed removedRules
	dead    atomic.Pointer[deadLetterer]
	// outcomes notes each alert sent (SetOutcomes); nil: none.
	outcomes atomic.Pointer[outcomeNoter]
	log      *slog.Logger
	m        dispatcherMetrics
	recent   recent
	seen     firstSeen
	// sealsSince is when fraudwatch began to seal alerts in this Redis,
	// once read (unsealedTaken).
	sealsSince atomic.Pointer[time.Time]
	// started is when this dispatcher was made; since, when its receiver
	// first ran, once read (SkipHistory).
	started time.Time
	since   atomic.Pointer[time.Time]
	// defaultChannel is where the notifier sends a message without a
	// channel, when it says (defaultDestination).
	defaultChannel string
	// parking orders this replica's parks and its counts of the parked
	// alerts, so that fraudwatch_alerts_parked is what Redis holds.
	parking sync.Mutex
	waits   waits
	// unbudgeted: the notifier has no budget to keep (Unbudgeted: the
	// log), and its alerts never wait.
	unbudgeted bool
}

// Unbudgeted is a Notifier that has no budget to keep, whose alerts never
// wait: the log's. Any other keeps to ChannelBudget and OverallBudget.
type Unbudgeted interface {
	Unbudgeted() bool
}

// NewDispatcher returns a dispatcher that delivers through n and claims
// alerts with c.
func NewDispatcher(cfg DispatcherConfig, n alert.Notifier, c claims, log *slog.Logger, reg prometheus.Registerer) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n == nil || c == nil {
		return nil, errors.New("alert: dispatcher needs a notifier and the claim scripts")
	}
	if err := lua.ValidReceiver(n.Name()); err != nil {
		return nil, fmt.Errorf("alert: the notifier's %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newDispatcherMetrics(reg, n.Name())
	if err != nil {
		return nil, err
	}
	keys, err := lua.NewKeysIn(cfg.KeyPrefix, cfg.Buckets)
	if err != nil {
		return nil, fmt.Errorf("alert: counting keys: %w", err)
	}
	d := &Dispatcher{cfg: cfg, notifier: n, receiver: n.Name(), claims: c, keys: keys, stores: keys.ForReceiver(n.Name()), log: log, m: m,
		started: time.Now()}
	if u, ok := n.(Unbudgeted); ok {
		d.unbudgeted = u.Unbudgeted()
	}
	if dd, ok := n.(defaultDestination); ok {
		d.defaultChannel = dd.DefaultDestination()
	}
	d.rules.Store(&map[string]RuleSettings{})
	return d, nil
}

// SetRules replaces the rules whose alerts the dispatcher delivers, by
// name, and exports their metrics from zero. A rule it removes is still
// delivered for UnknownRuleGrace, under its last settings.
func (d *Dispatcher) SetRules(rules map[string]RuleSettings) {
	rs := maps.Clone(rules)
	for name, r := range rs {
		r.GroupBy = slices.Clone(r.GroupBy) // alerts get copies of it
		rs[name] = r
		d.m.repeats.WithLabelValues(name)
		d.m.track(name) // series at 0, so that dashboards and rate() see it before its first alert
		// A series at 0 for each channel in use, so that an alert on
		// parked alerts has something to evaluate before the first one.
		d.m.parked.WithLabelValues(destinationLabel(d.destination(r.Channel)))
		d.m.waiting.WithLabelValues(destinationLabel(d.destination(r.Channel)))
	}
	d.removed.update(*d.rules.Load(), rs, d.cfg.UnknownRuleGrace, time.Now())
	d.rules.Store(&rs)
}

// HandleMessages settles a batch of the alerts topic's messages, in order:
// the dispatcher is the alerts group's handler. An update of an alert's
// life is shown where the receiver delivered the alert (handleUpdate). An
// alert whose rule routes to other receivers is skipped. Every alert takes
// from its destination's budget; one past it, or of a destination whose
// alerts wait already, waits in Redis, claimed, for DrainWaitingEvery,
// which sends them when the budget allows (each rule's as one digest, to
// a Digester; one by one, to any other), and its message is done: a flood
// of one destination never holds the alerts of another on the partition.
// It returns how many messages may be committed, and an error (see
// ErrNotDelivered) when the next must come round again.
func (d *Dispatcher) HandleMessages(ctx context.Context, msgs []kafka.Message) (int, error) {
	for i, msg := range msgs {
		if isUpdate(msg.Value) {
			if err := d.handleUpdate(ctx, msg); err != nil {
				return i, err
			}
			continue
		}
		a, ok, err := d.accept(ctx, msg)
		if err != nil {
			return i, err
		}
		if !ok {
			continue
		}
		if rs, _ := d.ruleOf(a.Rule); !routes(rs.Receivers, d.receiver) {
			d.m.elsewhere.WithLabelValues(a.Rule).Inc()
			continue
		}
		if before, err := d.beforeReceiver(ctx, a); err != nil || before {
			if err != nil {
				return i, err
			}
			d.m.history.WithLabelValues(a.Rule).Inc()
			continue
		}
		// The message's place claims it: a forger cannot write another
		// message there, and a crash delivers this one again as it is.
		a.Claimant = lua.ClaimantOf(msg.Topic, msg.Partition, msg.Offset)
		claim, err := d.claimed(ctx, a)
		if err == nil && claim == lua.ClaimSuppressed && !a.Shadow() {
			err = d.repeat(ctx, a)
		}
		if errors.Is(err, lua.ErrInvalidArguments) {
			// The script will refuse it every time: retrying would hold
			// the partition for ever.
			err = d.drop(ctx, msg, DroppedRefused, err, "rule", a.Rule)
		}
		if err != nil {
			return i, err
		}
		if claim != lua.ClaimSend {
			continue
		}
		if !d.unbudgeted {
			waits, err := d.pastBudget(ctx, a)
			if err != nil {
				return i, err
			}
			if waits {
				continue
			}
		}
		if err := d.send(ctx, a); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// pastBudget takes one message from the budget of a's destination, unless
// alerts of that destination wait already (as far as this replica knows:
// its own, and what the last drain pass read), and otherwise keeps a
// waiting in Redis: true when it waits. The alerts that wait take their
// turns at the budget through the drainer, not against every new alert.
func (d *Dispatcher) pastBudget(ctx context.Context, a alert.Alert) (bool, error) {
	dest := d.destination(a.Channel)
	if !d.waits.busy(dest) {
		ok, err := d.takeBudget(ctx, a.Channel)
		if err != nil || ok {
			return false, err
		}
	}
	return true, d.wait(ctx, a, dest)
}

// takeBudget takes one message from the budgets of channel's destination
// and of all destinations: false when either is spent.
func (d *Dispatcher) takeBudget(ctx context.Context, channel string) (bool, error) {
	return d.takeBudgetOf(ctx, d.destination(channel))
}

// takeBudgetOf is takeBudget for a destination named already.
func (d *Dispatcher) takeBudgetOf(ctx context.Context, dest string) (bool, error) {
	chKey, allKey := d.stores.Budget(dest)
	ok, _, err := d.claims.TakeBudget(ctx, chKey, allKey, d.cfg.ChannelBudget, d.cfg.OverallBudget)
	if err != nil {
		return false, fmt.Errorf("alert: budget: %w", err)
	}
	return ok, nil
}

// Package life keeps an alert's life after its post, as every replica and
// receiver shares it: open when the dispatcher decides to send it, then
// acknowledged, resolved, assigned, by whoever acts (a Slack button, the
// CLI). The state lives in Redis, in the alert's hash beside its cooldown
// (lua.Keys.Alert); an index of open alerts (lua.Keys.OpenAlerts) lists
// them by id. A change is written to Redis, then said on the alerts topic
// (Publisher), where each receiver's dispatcher reads it and shows the new
// state where it delivered the alert (alert.Updater).
package life

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// Config tunes a Store. Zero values take the defaults.
type Config struct {
	// KeyPrefix starts the Redis keys (redis.key_prefix; default "fw").
	KeyPrefix string
	// Retention is how long alerts' records and hashes live (the lua
	// scripts' Retention; default lua.DefaultRetention): the open alerts
	// counted are those opened within it.
	Retention time.Duration
	// MaxOpen is how many of the index's alerts the gauge counts at most
	// (the dispatcher's MaxOpen; default 10,000).
	MaxOpen int
	// CountEvery is how often CountOpenEvery sets fraudwatch_alerts_open
	// (default 30 s).
	CountEvery time.Duration
}

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "fw"
	}
	if c.Retention == 0 {
		c.Retention = lua.DefaultRetention
	}
	if c.MaxOpen == 0 {
		c.MaxOpen = 10000
	}
	if c.CountEvery == 0 {
		c.CountEvery = 30 * time.Second
	}
}

// Validate reports settings that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Retention < time.Second || c.CountEvery <= 0:
		return errors.New("life: retention must be at least a second and the count interval positive")
	case c.MaxOpen < 1 || c.MaxOpen > 1000000:
		return errors.New("life: max open alerts must be 1 to 1,000,000")
	}
	return nil
}

// Publisher says on the alerts topic that an alert's life changed, keyed
// by key (the alert's cooldown key, which its messages are keyed by) so
// that it follows the alert on its partition: dispatch.Topic.
type Publisher interface {
	PublishUpdate(ctx context.Context, key string, ref alert.Ref) error
}

// scripts is what the store needs of package lua.
type scripts interface {
	ChangeLife(ctx context.Context, key, op, who string) (lua.Life, bool, error)
	Lives(ctx context.Context, keys ...string) ([]lua.Life, error)
	IndexedAlerts(ctx context.Context, index, refs string, limit int) ([]lua.Indexed, error)
	IndexedRef(ctx context.Context, refs, id string) (string, bool, error)
	Unindex(ctx context.Context, index, refs string, ids ...string) error
}

// Store reads and changes alerts' lives. It is safe for concurrent use.
type Store struct {
	cfg  Config
	s    scripts
	keys lua.Keys
	pub  Publisher
	log  *slog.Logger
	open *prometheus.GaugeVec
}

// ErrUnknown is the answer for an alert that has no life (never sent, or
// its records ended), or an id no open alert has.
var ErrUnknown = errors.New("life: no such alert")

// New returns a store on s (lua.Scripts) that says each change through
// pub (nil: changes are not said, and receivers show them only at their
// next post), and exports fraudwatch_alerts_open on reg (nil: not
// registered).
func New(cfg Config, s scripts, pub Publisher, log *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("life: nil scripts")
	}
	keys, err := lua.NewKeys(cfg.KeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("life: key prefix: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	open := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fraudwatch_alerts_open",
		Help: "Alerts sent and not resolved (open or acknowledged), by rule, as the index of open alerts held them at this replica's last count.",
	}, []string{"rule"})
	if reg != nil {
		if err := reg.Register(open); err != nil {
			return nil, fmt.Errorf("life: register metrics: %w", err)
		}
	}
	return &Store{cfg: cfg, s: s, keys: keys, pub: pub, log: log, open: open}, nil
}

// Entry is one alert's life.
type Entry struct {
	ID    string      `json:"id"`
	Ref   alert.Ref   `json:"-"` // names its keys; its group is personal data
	State alert.State `json:"state"`
	// Alert is the alert as the dispatcher that opened it trusted it.
	Alert alert.Alert `json:"-"`
}

// maxWho bounds who acts, as alert_life takes it.
const maxWho = 256

// Change changes ref's alert's life as op says, by who ("slack:U123",
// "cli:alice"), and returns its state now: the first acknowledgement
// stays, a resolved alert is final but for its label, an assignment
// replaces the assignee, a label replaces another (alert.OpLabelFraud…;
// what it does to the alert's orders is package outcome's).
// Then it says so on the alerts topic, changed or not (a retry of a
// change whose word was lost says it again; receivers show each state
// once). An error after the change in Redis wraps ErrNotSaid.
func (s *Store) Change(ctx context.Context, ref alert.Ref, op alert.Op, who string) (alert.State, error) {
	if _, label := op.Label(); !label && op != alert.OpAcknowledge && op != alert.OpResolve && op != alert.OpAssign {
		return alert.State{}, fmt.Errorf("life: unknown change %q", op)
	}
	if who == "" || len(who) > maxWho {
		return alert.State{}, fmt.Errorf("life: who acts must be 1 to %d bytes", maxWho)
	}
	g, err := s.group(ref)
	if err != nil {
		return alert.State{}, err
	}
	l, _, err := s.s.ChangeLife(ctx, s.keys.Alert(g, ref.Rule, ref.EventID), string(op), who)
	if errors.Is(err, lua.ErrNoLife) {
		return alert.State{}, fmt.Errorf("%w: %s/%s", ErrUnknown, ref.Rule, ref.EventID)
	}
	if err != nil {
		return alert.State{}, fmt.Errorf("life: %s %s/%s: %w", op, ref.Rule, ref.EventID, err)
	}
	st := stateOf(l)
	var errs []error
	if st.Status == alert.StatusResolved {
		index, refs := s.keys.OpenAlerts()
		if err := s.s.Unindex(ctx, index, refs, ref.Rule+"/"+ref.EventID); err != nil {
			errs = append(errs, err) // the next list drops it
		}
	}
	if s.pub != nil {
		if err := s.pub.PublishUpdate(ctx, s.keys.Cooldown(g, ref.Rule), ref); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrNotSaid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("life: %s %s/%s: %w", op, ref.Rule, ref.EventID, err)
	}
	return st, nil
}

// ErrNotSaid wraps a failure to say a change on the alerts topic: Redis
// holds the change; the receivers show it at the next change said.
var ErrNotSaid = errors.New("the change is made, but not said to the receivers")

// group is the group ref names, refused unless it is one a rule's values
// make; the rule and event are bounded as alerts' are.
func (s *Store) group(ref alert.Ref) (lua.Group, error) {
	if ref.Rule == "" || len(ref.Rule) > 64 || strings.ContainsAny(ref.Rule, ":{} ./") ||
		ref.EventID == "" || len(ref.EventID) > 128 {
		return lua.Group{}, fmt.Errorf("%w: not an alert's ref", ErrUnknown)
	}
	g, err := s.keys.ParseGroup(ref.Group)
	if err != nil {
		return lua.Group{}, fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	return g, nil
}

// Get reads ref's alert's life; ErrUnknown when it has none.
func (s *Store) Get(ctx context.Context, ref alert.Ref) (Entry, error) {
	g, err := s.group(ref)
	if err != nil {
		return Entry{}, err
	}
	ls, err := s.s.Lives(ctx, s.keys.Alert(g, ref.Rule, ref.EventID))
	if err != nil {
		return Entry{}, fmt.Errorf("life: read %s/%s: %w", ref.Rule, ref.EventID, err)
	}
	e, ok := entryOf(ref, ls[0])
	if !ok {
		return Entry{}, fmt.Errorf("%w: %s/%s", ErrUnknown, ref.Rule, ref.EventID)
	}
	return e, nil
}

// entryOf is the entry of ref's life; false when it has none.
func entryOf(ref alert.Ref, l lua.Life) (Entry, bool) {
	if l.Status == "" {
		return Entry{}, false
	}
	e := Entry{ID: ref.Rule + "/" + ref.EventID, Ref: ref, State: stateOf(l)}
	_ = json.Unmarshal(l.Alert, &e.Alert) // what the dispatcher wrote; unreadable shows none
	return e, true
}

// ByID is the ref of the open alert whose id is id (rule/event id), as
// `fraudwatch alert list` shows it; ErrUnknown when no open alert has it.
func (s *Store) ByID(ctx context.Context, id string) (alert.Ref, error) {
	_, refs := s.keys.OpenAlerts()
	text, ok, err := s.s.IndexedRef(ctx, refs, id)
	if err != nil {
		return alert.Ref{}, fmt.Errorf("life: find %s: %w", id, err)
	}
	var ref alert.Ref
	if !ok || json.Unmarshal([]byte(text), &ref) != nil || ref.Rule+"/"+ref.EventID != id {
		return alert.Ref{}, fmt.Errorf("%w: no open alert %s", ErrUnknown, id)
	}
	return ref, nil
}

func stateOf(l lua.Life) alert.State {
	return alert.State{Status: alert.Status(l.Status), OpenedAt: l.OpenedAt, AckedBy: l.AckedBy, AckedAt: l.AckedAt,
		ResolvedBy: l.ResolvedBy, ResolvedAt: l.ResolvedAt, Assignee: l.Assignee, Label: alert.Label(l.Label),
		LabelledBy: l.LabelledBy, LabelledAt: l.LabelledAt}
}

package outcome_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// said records the alerts whose life changes a life.Store said.
type said struct {
	mu   sync.Mutex
	refs []alert.Ref
}

func (p *said) PublishUpdate(_ context.Context, _ string, ref alert.Ref) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refs = append(p.refs, ref)
	return nil
}

func (p *said) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.refs)
}

type env struct {
	s       *outcome.Store
	lives   *life.Store
	scripts *lua.Scripts
	keys    lua.Keys
	pfx     string
	rdb     redis.UniversalClient
	pub     *said
	reg     *prometheus.Registry
}

func newEnv(t *testing.T, cfg outcome.StoreConfig) *env {
	t.Helper()
	e := &env{rdb: redistest.Client(t), pub: &said{}, reg: prometheus.NewRegistry()}
	var err error
	if e.scripts, err = lua.New(lua.Config{}, e.rdb, nil); err != nil {
		t.Fatal(err)
	}
	pfx := redistest.Prefix(t)
	e.pfx = pfx
	if e.keys, err = lua.NewKeys(pfx); err != nil {
		t.Fatal(err)
	}
	if e.lives, err = life.New(life.Config{KeyPrefix: pfx}, e.scripts, e.pub, nil, nil); err != nil {
		t.Fatal(err)
	}
	cfg.KeyPrefix = pfx
	if e.s, err = outcome.NewStore(cfg, e.scripts, e.lives, nil, e.reg); err != nil {
		t.Fatal(err)
	}
	return e
}

// send sends an alert of rule for group's value that lists orders (the
// first its crossing order) as the dispatcher does: its claim opens its
// life, then the store notes it.
func (e *env) send(t *testing.T, rule, value, eventID string, orders ...string) (alert.Alert, alert.Ref) {
	t.Helper()
	a, ref := e.claim(t, rule, value, eventID, orders...)
	if err := e.s.Opened(t.Context(), a, ref); err != nil {
		t.Fatalf("opened %s: %v", a.ID, err)
	}
	return a, ref
}

// claim opens an alert's life, and nothing more: an alert sent before
// there were outcomes.
func (e *env) claim(t *testing.T, rule, value, eventID string, orders ...string) (alert.Alert, alert.Ref) {
	t.Helper()
	g := e.keys.Group([]string{value})
	a := alert.Alert{ID: rule + "/" + eventID, Rule: rule, EventID: eventID, Severity: alert.SeverityHigh, Group: g.Encoding()}
	if len(orders) > 0 {
		a.OrderID = orders[0]
	}
	for _, o := range orders {
		a.Evidence = append(a.Evidence, alert.Evidence{OrderID: o, EventID: "ev-" + o})
	}
	body, _ := json.Marshal(a)
	c := lua.AlertClaim{CooldownKey: e.keys.Cooldown(g, rule), RecordKey: e.keys.Record(g, rule, eventID, "slack"),
		LegacyKey: e.keys.AlertRecord(g, rule, eventID), AlertKey: e.keys.Alert(g, rule, eventID), Alert: body,
		ID: a.ID, Claimant: "alerts/0/1"}
	if got, err := e.scripts.ClaimAlert(t.Context(), c); err != nil || got != lua.ClaimSend {
		t.Fatalf("claim %s: %v, %v", a.ID, got, err)
	}
	return a, alert.Ref{Rule: rule, Group: g.Encoding(), EventID: eventID}
}

// record records an outcome from the topic.
func (e *env) record(t *testing.T, order string, l alert.Label, occurred time.Time) bool {
	t.Helper()
	changed, err := e.s.Record(t.Context(), outcome.Outcome{OrderID: order, Label: l, Source: "chargeback", OccurredAt: occurred},
		outcome.ViaTopic, "")
	if err != nil {
		t.Fatalf("record %s %s: %v", order, l, err)
	}
	return changed
}

// counter is a counter's value.
func (e *env) counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m.GetLabel(), labels) {
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount())
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

type labelPair interface {
	GetName() string
	GetValue() string
}

func hasLabels[L labelPair](got []L, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range got {
			found = found || (l.GetName() == want[i] && l.GetValue() == want[i+1])
		}
		if !found {
			return false
		}
	}
	return true
}

// outcomeOf is an alert's outcome as the store's record holds it.
func (e *env) outcomeOf(t *testing.T, id string) string {
	t.Helper()
	st, ok, err := e.scripts.StoredAlertOf(t.Context(), e.keys.Outcomes(), id)
	if err != nil || !ok {
		t.Fatalf("record of %s: %v, %v", id, ok, err)
	}
	return st.Outcome
}

package outcome_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// deadLetters records what a handler dead-letters.
type deadLetters struct {
	mu      sync.Mutex
	offsets []int64
	whys    []string
	err     error
}

func (d *deadLetters) DeadLetter(_ context.Context, msg kafka.Message, why string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	d.offsets, d.whys = append(d.offsets, msg.Offset), append(d.whys, why)
	return nil
}

func messages(values ...string) []kafka.Message {
	out := make([]kafka.Message, len(values))
	for i, v := range values {
		out[i] = kafka.Message{Topic: "fraudwatch.outcomes", Partition: 0, Offset: int64(i), Value: []byte(v)}
	}
	return out
}

func newHandler(t *testing.T, store *outcome.Store, reg prometheus.Registerer) (*outcome.Handler, *deadLetters) {
	t.Helper()
	h, err := outcome.NewHandler(outcome.HandlerConfig{}, store, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	dl := &deadLetters{}
	h.SetDeadLetters(dl)
	return h, dl
}

// The topic's records are recorded; those refused are counted by reason
// and dead-lettered with a reason and a field, never a value, and stop
// nothing; an order no alert listed is kept (a missed fraud).
func TestTheHandlerRecordsAndRefuses(t *testing.T) {
	e := newEnv(t, outcome.StoreConfig{})
	h, dl := newHandler(t, e.s, e.reg)
	good := `{"type":"outcome","order_id":"o-1","outcome":"fraud","source":"chargeback","occurred_at":"2026-12-01T10:00:00Z"}`
	with := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	msgs := messages(
		good,
		`{"type":"outcome","order_id":"SECRET-9"`,
		with(`"fraud"`, `"SECRET-maybe"`),
		with(`"o-1"`, `"`+strings.Repeat("S", 5000)+`"`),
		with(`"source":"chargeback",`, ``),
		with(`2026-12-01T10:00:00Z`, time.Now().Add(48*time.Hour).UTC().Format(time.RFC3339)),
		with(`"o-1"`, `"SECRET\u0001"`),
		with(`"fraud"`, `"legit"`),                                       // the same time, another label: the first stays
		strings.Replace(with(`"fraud"`, `"legit"`), "10:00", "11:00", 1), // later: replaces
		good, // older: changes nothing
	)
	done, err := h.HandleMessages(t.Context(), msgs)
	if err != nil || done != len(msgs) {
		t.Fatalf("handled %d of %d, %v", done, len(msgs), err)
	}
	wantWhys := []string{"outcome malformed_json: ", "outcome invalid_outcome: outcome", "outcome oversized: ",
		"outcome missing_field: source", "outcome invalid_occurred_at: occurred_at", "outcome invalid_order_id: order_id"}
	if len(dl.whys) != len(wantWhys) || dl.offsets[0] != 1 || dl.offsets[5] != 6 {
		t.Fatalf("dead letters at %v: %q; want offsets 1 to 6", dl.offsets, dl.whys)
	}
	for i, why := range dl.whys {
		if !strings.HasPrefix(why, wantWhys[i]) || strings.Contains(why, "SECRET") {
			t.Errorf("dead letter %d says %q, want it to start %q and quote no value", i, why, wantWhys[i])
		}
	}
	for _, r := range []outcome.Reason{outcome.ReasonMalformed, outcome.ReasonInvalidLabel, outcome.ReasonOversized,
		outcome.ReasonMissingField, outcome.ReasonInvalidTime, outcome.ReasonInvalidOrder} {
		if got := e.counter(t, "fraudwatch_outcomes_invalid_total", "reason", string(r)); got != 1 {
			t.Errorf("%s counted %v, want 1", r, got)
		}
	}
	o, err := e.s.Order(t.Context(), "o-1")
	if err != nil || o.Label != alert.LabelLegit || o.Via != outcome.ViaTopic || o.By != "" || len(o.Alerts) != 0 {
		t.Errorf("o-1: %+v, %v; want legit, from the topic, listed by no alert", o, err)
	}
	if f, l := e.counter(t, "fraudwatch_outcomes_recorded_total", "via", "topic", "outcome", "fraud"),
		e.counter(t, "fraudwatch_outcomes_recorded_total", "via", "topic", "outcome", "legit"); f != 1 || l != 1 {
		t.Errorf("recorded fraud %v, legit %v; want 1 each", f, l)
	}
}

// A Redis error stops the batch at its record, for the group to hand the
// rest over again; a dead letter that cannot be written does too.
func TestTheHandlerStopsAtAnError(t *testing.T) {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: redistest.Addrs(t), IsClusterMode: redistest.Cluster()})
	_ = rdb.Close() // every call fails
	scripts, err := lua.New(lua.Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, outcome.StoreConfig{})
	down, err := outcome.NewStore(outcome.StoreConfig{KeyPrefix: e.pfx}, scripts, e.lives, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, dl := newHandler(t, down, nil)
	good := `{"type":"outcome","order_id":"o-1","outcome":"fraud","source":"chargeback","occurred_at":"2026-12-01T10:00:00Z"}`
	done, err := h.HandleMessages(t.Context(), messages(`[]`, good, `[]`))
	if done != 1 || err == nil || len(dl.whys) != 1 {
		t.Errorf("with Redis down: done %d, %v, %d dead letters; want 1, an error, 1", done, err, len(dl.whys))
	}
	dl.err = errors.New("broker down")
	if done, err := h.HandleMessages(t.Context(), messages(`[]`)); done != 0 || err == nil {
		t.Errorf("with the dead-letter topic down: done %d, %v; want 0 and an error", done, err)
	}
}

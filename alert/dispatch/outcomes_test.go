package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/dispatch"
	"github.com/fraudwatch/fraudwatch/alert/life"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
)

// failingNoter refuses every note.
type failingNoter struct{}

func (failingNoter) OpenedAll(context.Context, []alert.Alert, []alert.Ref) error {
	return errors.New("redis down")
}

// An alert sent is noted in the outcomes store with the orders it lists,
// by each receiver's claim that sends it (once: the note is idempotent);
// an alert suppressed is not; a note that fails fails the claim, for the
// message to come round again.
func TestAnAlertSentReachesTheOutcomes(t *testing.T) {
	slack := &lifeNotifier{name: "slack"}
	first := testDispatcher(t, slack, dispatch.DispatcherConfig{})
	first.knowRule()
	hook := &plainNotifier{name: "hook"}
	second := first.second(t, hook, dispatch.DispatcherConfig{})
	lives, err := life.New(life.Config{KeyPrefix: first.pfx}, first.scripts, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := outcome.NewStore(outcome.StoreConfig{KeyPrefix: first.pfx}, first.scripts, lives, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.d.SetOutcomes(store)
	second.d.SetOutcomes(store)

	a := first.alert("card-1", "evt-a")
	a.OrderID = "ord-a"
	a.Evidence = []alert.Evidence{{OrderID: "ord-a", EventID: "evt-a"}, {OrderID: "ord-b", EventID: "evt-b"}}
	b := first.alert("card-1", "evt-b") // suppressed: a holds the cooldown
	b.OrderID = "ord-c"
	for i, x := range []alert.Alert{a, b} {
		for _, e := range []*testEnv{first, second} {
			if err := handleOne(t.Context(), e.d, e.message(t, x, int64(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, order := range []string{"ord-a", "ord-b"} {
		o, err := store.Order(t.Context(), order)
		if err != nil || len(o.Alerts) != 1 || o.Alerts[0] != a.ID {
			t.Errorf("%s: %+v, %v; want it listed by %s", order, o, err, a.ID)
		}
	}
	if o, err := store.Order(t.Context(), "ord-c"); !errors.Is(err, outcome.ErrUnknown) {
		t.Errorf("the suppressed alert's order: %+v, %v; want unknown", o, err)
	}
	if _, err := store.Record(t.Context(), outcome.Outcome{OrderID: "ord-b", Label: alert.LabelFraud, Source: "chargeback",
		OccurredAt: a.At}, outcome.ViaTopic, ""); err != nil {
		t.Fatal(err)
	}
	rows, err := store.Quality(t.Context(), time.Now(), 24*time.Hour)
	if err != nil || len(rows) != 1 || rows[0].Alerts != 1 || rows[0].Fraud != 1 || rows[0].Caught != 1 {
		t.Errorf("quality %+v, %v; want the alert sent, fraud, its order caught", rows, err)
	}

	failing := testDispatcher(t, &plainNotifier{name: "slack"}, dispatch.DispatcherConfig{})
	failing.knowRule()
	failing.d.SetOutcomes(failingNoter{})
	c := failing.alert("card-2", "evt-c")
	if err := handleOne(t.Context(), failing.d, failing.message(t, c, 0)); err == nil {
		t.Error("a note that failed settled the alert")
	}
}

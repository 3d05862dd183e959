package lua

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func outcomeKeys(t *testing.T, prefix string) OutcomeKeys {
	t.Helper()
	k, err := NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return k.Outcomes()
}

var testBounds = OutcomeBounds{Max: 1000, Lifetime: time.Hour}

// at is a time of a test's outcomes: minute m of a fixed day.
func at(m int) time.Time { return time.Date(2026, 12, 1, 10, m, 0, 0, time.UTC) }

// An order's outcome is replaced by a later one, never by an older one;
// the same again changes nothing; a later one with the same label is
// written without changing the label (so it never counts twice); on a
// tie of times the first written stays (a redelivery of both never flips
// it back and forth).
func TestAnOrdersOutcomeTheLatestWins(t *testing.T) {
	s, _, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	for i, step := range []struct {
		label  string
		minute int
		want   Recorded
		stored string // the label after
		source string
	}{
		{"fraud", 10, RecordedChanged, "fraud", "s1"},
		{"fraud", 10, RecordedNone, "fraud", "s1"},      // the same again
		{"legit", 5, RecordedNone, "fraud", "s1"},       // older
		{"fraud", 20, RecordedRefreshed, "fraud", "s4"}, // later, same label
		{"legit", 15, RecordedNone, "fraud", "s4"},      // older than the refreshed one
		{"legit", 20, RecordedNone, "fraud", "s4"},      // a tie: the first stays
		{"unclear", 30, RecordedChanged, "unclear", "s7"},
	} {
		o := OrderOutcome{OrderID: "o-1", Label: step.label, Source: fmt.Sprint("s", i+1), OccurredAt: at(step.minute), Via: "topic"}
		got, err := s.RecordOutcome(ctx, k, o, testBounds)
		if err != nil || got.Result != step.want {
			t.Fatalf("step %d (%s at %d): %+v, %v; want %v", i, step.label, step.minute, got, err, step.want)
		}
		st, ok, err := s.StoredOutcomeOf(ctx, k, "o-1")
		if err != nil || !ok || st.Label != step.stored || st.Source != step.source {
			t.Fatalf("step %d: stored %+v, %v, %v; want %s from %s", i, st, ok, err, step.stored, step.source)
		}
	}
	if st, _, _ := s.StoredOutcomeOf(ctx, k, "o-1"); !st.OccurredAt.Equal(at(30)) || st.Via != "topic" || st.RecordedAt.IsZero() {
		t.Errorf("stored %+v", st)
	}
}

// An alert noted with its orders takes its outcome from theirs, and from
// each later outcome of one of them, atomically; its own label wins.
// Each change of its outcome is answered once, the first with the time
// from its opening.
func TestAnAlertIsJudgedByItsOrders(t *testing.T) {
	s, _, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	record := func(order, label string, minute int) []AlertChange {
		t.Helper()
		got, err := s.RecordOutcome(ctx, k, OrderOutcome{OrderID: order, Label: label, Source: "test", OccurredAt: at(minute), Via: "cli", By: "cli:ann"}, testBounds)
		if err != nil {
			t.Fatal(err)
		}
		return got.Alerts
	}
	record("o-2", "legit", 1) // known before the alert opens
	a := OutcomeAlert{ID: "burst/e1", Rule: "burst", Ref: []byte(`{"rule":"burst"}`), Orders: []string{"o-1", "o-2", "o-3"}}
	created, changes, err := s.OpenOutcomeAlert(ctx, k, a, testBounds)
	if err != nil || !created || len(changes) != 1 || changes[0].Outcome != "legit" || !changes[0].First || changes[0].Rule != "burst" {
		t.Fatalf("open: %v, %+v, %v; want created, legit at once", created, changes, err)
	}
	if created, changes, err := s.OpenOutcomeAlert(ctx, k, a, testBounds); err != nil || created || changes != nil {
		t.Fatalf("open again: %v, %+v, %v; want nothing", created, changes, err)
	}
	for i, step := range []struct {
		order, label string
		minute       int
		want         string // the alert's new outcome; "" unchanged
	}{
		{"o-1", "unclear", 2, "unclear"},
		{"o-3", "legit", 3, ""},
		{"o-1", "legit", 4, "legit"},
		{"o-3", "fraud", 5, "fraud"},
		{"o-3", "fraud", 6, ""}, // refreshed: no change
		{"o-2", "unclear", 7, ""},
	} {
		changes := record(step.order, step.label, step.minute)
		switch {
		case step.want == "" && len(changes) != 0:
			t.Fatalf("step %d: %+v, want no change", i, changes)
		case step.want != "" && (len(changes) != 1 || changes[0].Outcome != step.want || changes[0].First || changes[0].ID != a.ID):
			t.Fatalf("step %d: %+v, want %s", i, changes, step.want)
		}
	}
	given := time.Now()
	l, err := s.LabelOutcomeAlert(ctx, k, a.ID, "legit", "slack:U1", given)
	if err != nil || !l.Found || !l.Changed || len(l.Changes) != 1 || l.Changes[0].Previous != "fraud" || l.Changes[0].Outcome != "legit" {
		t.Fatalf("label: %+v, %v; want its own label to win", l, err)
	}
	slices.Sort(l.Orders)
	if !slices.Equal(l.Orders, a.Orders) {
		t.Errorf("label answered orders %v, want %v", l.Orders, a.Orders)
	}
	if again, err := s.LabelOutcomeAlert(ctx, k, a.ID, "legit", "cli:bob", time.Time{}); err != nil || again.Changed || len(again.Changes) != 0 || len(again.Orders) != 3 {
		t.Errorf("label again: %+v, %v; want unchanged, its orders still answered", again, err)
	}
	// A label given before the one that stands (two clicks at once, come
	// here in the other order than to the life) changes nothing.
	for _, when := range []time.Time{given.Add(-time.Second), given} {
		if late, err := s.LabelOutcomeAlert(ctx, k, a.ID, "fraud", "cli:eve", when); err != nil || late.Changed || len(late.Orders) != 3 {
			t.Errorf("a label given at %v, before the one that stands: %+v, %v; want unchanged", when, late, err)
		}
	}
	if later, err := s.LabelOutcomeAlert(ctx, k, a.ID, "unclear", "cli:eve", given.Add(time.Second)); err != nil || !later.Changed {
		t.Errorf("a label given later: %+v, %v; want it to replace", later, err)
	}
	if back, err := s.LabelOutcomeAlert(ctx, k, a.ID, "legit", "cli:eve", time.Time{}); err != nil || !back.Changed {
		t.Errorf("a label given now: %+v, %v; want it to replace", back, err)
	}
	if changes := record("o-1", "fraud", 9); len(changes) != 0 {
		t.Errorf("a fraud order under a legit label: %+v, want no change", changes)
	}
	st, ok, err := s.StoredAlertOf(ctx, k, a.ID)
	if err != nil || !ok || st.Outcome != "legit" || st.Label != "legit" || st.Orders["o-1"] != "fraud" || string(st.Ref) != `{"rule":"burst"}` {
		t.Errorf("stored %+v, %v, %v", st, ok, err)
	}
	if nobody, err := s.LabelOutcomeAlert(ctx, k, "burst/none", "fraud", "cli:ann", time.Time{}); err != nil || nobody.Found {
		t.Errorf("label of no record: %+v, %v", nobody, err)
	}
}

// An outcome recorded with the links read before an alert listing the
// order opened is refused, nothing written; RecordOutcome reads them
// again, so the new alert is judged too.
func TestAnAlertOpenedMeanwhileIsNotMissed(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	if _, _, err := s.OpenOutcomeAlert(ctx, k, OutcomeAlert{ID: "r/e1", Rule: "r", Ref: []byte("{}"), Orders: []string{"o-1"}}, testBounds); err != nil {
		t.Fatal(err)
	}
	keys := []string{k.Order("o-1"), k.Links("o-1"), k.Orders(), k.Fraud()}
	v, err := outcomeRecord.Run(ctx, rdb, keys, "o-1", "fraud", "test", at(1).UnixMilli(), "topic", "", 10, 3600, 0).Result()
	if err != nil || v != int64(-2) {
		t.Fatalf("with the links read stale: %v, %v; want -2", v, err)
	}
	if rdb.Exists(ctx, k.Order("o-1"), k.Orders(), k.Fraud()).Val() != 0 {
		t.Fatal("a refused call wrote")
	}
	got, err := s.RecordOutcome(ctx, k, OrderOutcome{OrderID: "o-1", Label: "fraud", Source: "test", OccurredAt: at(1), Via: "topic"}, testBounds)
	if err != nil || len(got.Alerts) != 1 || got.Alerts[0].ID != "r/e1" {
		t.Fatalf("record: %+v, %v", got, err)
	}
}

// The orders kept stay within max: each write drops the oldest written
// past it, counted; their outcome and their place among the fraud orders
// go. The alerts' records likewise. An alert whose record went leaves the
// links of its orders at their next outcome.
func TestTheBoundsDropTheOldest(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	b := OutcomeBounds{Max: 3, Lifetime: time.Hour}
	dropped := 0
	for i := range 6 {
		o := OrderOutcome{OrderID: fmt.Sprint("o-", i), Label: "fraud", Source: "test", OccurredAt: at(i), Via: "topic"}
		got, err := s.RecordOutcome(ctx, k, o, b)
		if err != nil {
			t.Fatal(err)
		}
		dropped += got.Dropped
		time.Sleep(2 * time.Millisecond) // a time of its own
	}
	if n := rdb.ZCard(ctx, k.Orders()).Val(); n != 3 || dropped != 3 {
		t.Errorf("%d orders kept, %d dropped; want 3 and 3", n, dropped)
	}
	for i := range 6 {
		_, ok, _ := s.StoredOutcomeOf(ctx, k, fmt.Sprint("o-", i))
		if kept := rdb.ZScore(ctx, k.Fraud(), fmt.Sprint("o-", i)).Err() == nil; ok != (i >= 3) || kept != (i >= 3) {
			t.Errorf("o-%d: outcome kept %v, among the fraud %v; want the newest 3 alone", i, ok, kept)
		}
	}
	if ttl := rdb.TTL(ctx, k.Order("o-5")).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("an outcome's TTL %v, want at most its lifetime", ttl)
	}
	for i := range 5 {
		a := OutcomeAlert{ID: fmt.Sprint("r/e", i), Rule: "r", Ref: []byte("{}"), Orders: []string{"o-9"}}
		if _, _, err := s.OpenOutcomeAlert(ctx, k, a, b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := rdb.ZCard(ctx, k.Alerts()).Val(); n != 3 || rdb.Exists(ctx, k.Alert("r/e0"), k.Alert("r/e1")).Val() != 0 {
		t.Errorf("%d alerts kept, want the newest 3, the others' records gone", n)
	}
	got, err := s.RecordOutcome(ctx, k, OrderOutcome{OrderID: "o-9", Label: "legit", Source: "test", OccurredAt: at(9), Via: "topic"}, b)
	if err != nil || len(got.Alerts) != 3 {
		t.Fatalf("o-9: %+v, %v; want its 3 alerts judged", got, err)
	}
	if links := rdb.ZRange(ctx, k.Links("o-9"), 0, -1).Val(); !slices.Equal(links, []string{"r/e2", "r/e3", "r/e4"}) {
		t.Errorf("o-9's links %v, want those of the records kept", links)
	}
}

// Entries past the lifetime go too, whatever the count; a key of another
// type in the scripts' place is none, and goes.
func TestTheLifetimeAndForeignKeys(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	old := float64(time.Now().Add(-2 * time.Hour).UnixMilli())
	rdb.ZAdd(ctx, k.Orders(), redis.Z{Score: old, Member: "o-old"})
	rdb.HSet(ctx, k.Order("o-old"), "label", "legit", "occurred", "1")
	rdb.Set(ctx, k.Links("o-1"), "x", 0)
	rdb.Set(ctx, k.Fraud(), "x", 0)
	got, err := s.RecordOutcome(ctx, k, OrderOutcome{OrderID: "o-1", Label: "fraud", Source: "test", OccurredAt: at(1), Via: "topic"}, testBounds)
	if err != nil || got.Result != RecordedChanged || got.Dropped != 1 {
		t.Fatalf("record: %+v, %v; want the old one dropped", got, err)
	}
	if rdb.Exists(ctx, k.Order("o-old")).Val() != 0 || rdb.ZScore(ctx, k.Fraud(), "o-1").Err() != nil {
		t.Error("the old outcome stayed, or the fraud orders were not replaced")
	}
	rdb.Set(ctx, k.Alert("r/e1"), "x", 0)
	if created, _, err := s.OpenOutcomeAlert(ctx, k, OutcomeAlert{ID: "r/e1", Rule: "r", Ref: []byte("{}"), Orders: []string{"o-1"}}, testBounds); err != nil || !created {
		t.Errorf("open over a string: %v, %v; want it noted", created, err)
	}
}

// The outcome scripts refuse unusable arguments and write nothing.
func TestOutcomeScriptsRejectBadArguments(t *testing.T) {
	s, rdb, prefix := newScripts(t)
	ctx := t.Context()
	k := outcomeKeys(t, prefix)
	rec := []string{k.Order("o"), k.Links("o"), k.Orders(), k.Fraud()}
	good := []any{"o", "fraud", "src", 1000, "topic", "", 10, 60, 0}
	with := func(i int, v any) []any {
		a := slices.Clone(good)
		a[i] = v
		return a
	}
	open := []string{k.Alert("r/e"), k.Alerts(), k.Order("o"), k.Links("o")}
	goodOpen := []any{"r/e", "r", "{}", 0, 10, 60, 1, "o"}
	withOpen := func(i int, v any) []any {
		a := slices.Clone(goodOpen)
		a[i] = v
		return a
	}
	for _, tc := range []struct {
		script *redis.Script
		name   string
		keys   []string
		args   []any
	}{
		{outcomeRecord, OutcomeRecordName, rec, with(0, "")},
		{outcomeRecord, OutcomeRecordName, rec, with(0, strings.Repeat("o", 129))},
		{outcomeRecord, OutcomeRecordName, rec, with(1, "maybe")},
		{outcomeRecord, OutcomeRecordName, rec, with(2, "")},
		{outcomeRecord, OutcomeRecordName, rec, with(2, strings.Repeat("s", 65))},
		{outcomeRecord, OutcomeRecordName, rec, with(3, "0")},
		{outcomeRecord, OutcomeRecordName, rec, with(3, "1e9")},
		{outcomeRecord, OutcomeRecordName, rec, with(4, "mail")},
		{outcomeRecord, OutcomeRecordName, rec, with(5, strings.Repeat("b", 257))},
		{outcomeRecord, OutcomeRecordName, rec, with(6, 0)},
		{outcomeRecord, OutcomeRecordName, rec, with(6, 10000001)},
		{outcomeRecord, OutcomeRecordName, rec, with(7, 0)},
		{outcomeRecord, OutcomeRecordName, rec, with(8, 1)},                             // an alert id missing
		{outcomeRecord, OutcomeRecordName, rec, with(8, "x")},                           // not a count
		{outcomeRecord, OutcomeRecordName, rec, good[:8]},                               // too few
		{outcomeRecord, OutcomeRecordName, rec[:3], good},                               // a key missing
		{outcomeRecord, OutcomeRecordName, append(rec, k.Order("x")), append(good, "")}, // an empty id
		{outcomeOpen, OutcomeOpenName, open, withOpen(0, "")},
		{outcomeOpen, OutcomeOpenName, open, withOpen(1, strings.Repeat("r", 65))},
		{outcomeOpen, OutcomeOpenName, open, withOpen(2, "")},
		{outcomeOpen, OutcomeOpenName, open, withOpen(3, "-1")},
		{outcomeOpen, OutcomeOpenName, open, withOpen(4, 0)},
		{outcomeOpen, OutcomeOpenName, open, withOpen(5, "x")},
		{outcomeOpen, OutcomeOpenName, open, withOpen(6, 33)},
		{outcomeOpen, OutcomeOpenName, open, withOpen(6, 2)},
		{outcomeOpen, OutcomeOpenName, open, withOpen(7, strings.Repeat("o", 129))},
		{outcomeOpen, OutcomeOpenName, open[:3], goodOpen},
		{outcomeLabel, OutcomeLabelName, open[:1], []any{"r/e", "maybe", "cli:ann", 0}},
		{outcomeLabel, OutcomeLabelName, open[:1], []any{"r/e", "fraud", "", 0}},
		{outcomeLabel, OutcomeLabelName, open[:1], []any{"", "fraud", "cli:ann", 0}},
		{outcomeLabel, OutcomeLabelName, open[:1], []any{"r/e", "fraud", "cli:ann", "-5"}},
		{outcomeLabel, OutcomeLabelName, open[:1], []any{"r/e", "fraud", "cli:ann"}},
		{outcomeLabel, OutcomeLabelName, open[:2], []any{"r/e", "fraud", "cli:ann", 0}},
	} {
		if _, err := s.single(ctx, tc.script, tc.name, tc.keys, tc.args...); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("%s %v: err = %v, want ErrInvalidArguments", tc.name, tc.args, err)
		}
	}
	if keys := append(rec, open...); rdb.Exists(ctx, keys...).Val() != 0 {
		t.Fatal("a rejected call wrote a key")
	}
}

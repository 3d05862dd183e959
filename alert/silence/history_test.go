package silence_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert/silence"
)

// The history says who silenced what and how it ended: a silence expired
// early names who expired it, one that ran its term says so, an
// acknowledgement (as versions before records per receiver wrote them)
// names who clicked; the group is named by the same ref
// in each, which is what logs name it by.
func TestHistory(t *testing.T) {
	store, _, keys := newStore(t)
	ctx := t.Context()
	t0 := time.Now().Truncate(time.Millisecond)
	one, err := store.Add(ctx, testRules, silence.Spec{Rule: "burst", Match: map[string]string{"customer_id": "c1"},
		For: time.Hour, Reason: "known reseller", Author: "kim"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	brief, err := store.Add(ctx, testRules, silence.Spec{Rule: "pair", For: time.Minute, Reason: "load test", Author: "kim"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Expire(ctx, testRules, one.ID, "lee", t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	ack, err := store.OldAcknowledge(ctx, "burst", keys.Group([]string{"c1"}).Encoding(), map[string]string{"customer_id": "c1"}, "slack:U1", t0.Add(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if one.GroupRef == "" || ack.GroupRef != one.GroupRef {
		t.Errorf("group refs %q (silence) and %q (acknowledgement) of one group", one.GroupRef, ack.GroupRef)
	}

	// The brief silence ended at t0+1m; the history, read later, has it.
	events, err := store.History(ctx, t0.Add(4*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%s %s %s %s %s %s", e.At.Sub(t0), e.What, e.By, e.ID, e.Rule, e.GroupRef))
	}
	want := []string{
		"3m0s acknowledged slack:U1  burst " + one.GroupRef,
		"1m0s ended  " + brief.ID + " pair ",
		"30s expired lee " + one.ID + " burst " + one.GroupRef,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if list, _ := store.List(ctx, t0.Add(4*time.Minute)); len(list) != 0 {
		t.Errorf("listed %+v", list)
	}

	var out bytes.Buffer
	c := silence.Command{Name: "list", History: true, Rules: testRules, Out: &out, Now: t0.Add(4 * time.Minute)}
	if err := silence.Run(ctx, store, c); err != nil {
		t.Fatal(err)
	}
	// Its columns, one space apart.
	var rows []string
	for line := range strings.Lines(out.String()) {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	for _, w := range []string{
		"AT EVENT BY ID SILENCES GROUP REF AUTHOR REASON",
		"acknowledged slack:U1 - alert of rule burst for customer_id=c1 " + one.GroupRef + " - -",
		"ended - " + brief.ID + " rule pair (every group) - kim load test",
		"expired lee " + one.ID + " rule burst for customer_id=c1 " + one.GroupRef + " kim known reseller",
	} {
		if !strings.Contains(strings.Join(rows, "\n"), w) {
			t.Errorf("list --history lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	c.Format = "json"
	if err := silence.Run(ctx, store, c); err != nil {
		t.Fatal(err)
	}
	var decoded []silence.Event
	if err := json.Unmarshal(out.Bytes(), &decoded); err != nil || len(decoded) != 3 || decoded[2].By != "lee" || decoded[2].Author != "kim" ||
		decoded[0].Match["customer_id"] != "c1" || !strings.Contains(out.String(), `"event": "acknowledged"`) {
		t.Errorf("list --history --format json: %v\n%s", err, out.String())
	}
}

// The history keeps 30 days and 1,000 events, however many come.
func TestHistoryIsBounded(t *testing.T) {
	store, rdb, keys := newStore(t)
	ctx := t.Context()
	now := time.Now()
	g := keys.Group([]string{"c"}).Encoding()
	for _, age := range []time.Duration{31 * 24 * time.Hour, 29 * 24 * time.Hour, 0} {
		if _, err := store.OldAcknowledge(ctx, "burst", g, nil, "slack:U"+age.String(), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	events, err := store.History(ctx, now)
	if err != nil || len(events) != 2 || events[1].By != "slack:U696h0m0s" {
		t.Fatalf("History = %+v, %v; want the two of the last 30 days", events, err)
	}
	key := keys.SilenceIndex() + ":history"
	if n := rdb.ZCard(ctx, key).Val(); n != 2 {
		t.Errorf("%d events kept, want the older one trimmed", n)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > silence.HistoryFor {
		t.Errorf("the history lives %v, want at most %v", ttl, silence.HistoryFor)
	}
	for i := range silence.HistoryMax + 5 {
		if _, err := store.OldAcknowledge(ctx, "burst", g, nil, fmt.Sprint("slack:U", i), now.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.ZCard(ctx, key).Val(); n != silence.HistoryMax {
		t.Errorf("%d events kept, want %d", n, silence.HistoryMax)
	}
	events, _ = store.History(ctx, now.Add(time.Minute))
	if len(events) != silence.HistoryMax || events[0].By != fmt.Sprint("slack:U", silence.HistoryMax+4) {
		t.Errorf("History: %d events, the latest by %q", len(events), events[0].By)
	}
}

// A group's ref is keyed: not a plain hash of its values, which anyone
// could compute for every card or address; under another key prefix (a
// deployment of its own) the same group has another ref.
func TestGroupRefIsKeyed(t *testing.T) {
	a, _, keys := newStore(t)
	b, _, _ := newStore(t)
	enc := keys.Group([]string{"cust-42"}).Encoding()
	ra, err := a.GroupRef(t.Context(), enc)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := a.GroupRef(t.Context(), enc)
	rb, _ := b.GroupRef(t.Context(), enc)
	if len(ra) != 12 || again != ra || rb == ra {
		t.Errorf("refs %q, %q (again), %q (another prefix)", ra, again, rb)
	}
}

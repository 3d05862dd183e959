package backtest

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/consumer/kafkatest"
)

// An order's outcome is its latest (by occurred_at; of one time, the first
// read); a refused record is counted by its reason and loses nothing
// else.
func TestOutcomes(t *testing.T) {
	rec := func(order, label string, at time.Duration) string {
		return fmt.Sprintf(`{"type":"outcome","order_id":%q,"outcome":%q,"source":"review","occurred_at":%q}`, order, label, t0.Add(at).Format(time.RFC3339))
	}
	tests := []struct {
		name     string
		records  []string
		want     string // each order's label
		refused  map[outcome.Reason]int
		replaced int
	}{
		{"one each", []string{rec("a", "fraud", 0), rec("b", "legit", 0)}, "a=fraud b=legit", nil, 0},
		{"a later one replaces", []string{rec("a", "fraud", 0), rec("a", "legit", time.Hour)}, "a=legit", nil, 1},
		{"an earlier one read later does not", []string{rec("a", "legit", time.Hour), rec("a", "fraud", 0)}, "a=legit", nil, 1},
		{"of one time, the first", []string{rec("a", "legit", 0), rec("a", "unclear", 0)}, "a=legit", nil, 1},
		{"refused, by reason", []string{rec("a", "maybe", 0), `{"type":"outcome"`, rec("", "fraud", 0), rec("b", "fraud", 0),
			rec("c", "fraud", 73*time.Hour), `{"type":"order","order_id":"c"}`},
			"b=fraud", map[outcome.Reason]int{outcome.ReasonInvalidLabel: 1, outcome.ReasonMalformed: 1, outcome.ReasonInvalidOrder: 1,
				outcome.ReasonInvalidTime: 1, outcome.ReasonMissingField: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// --now is two days after t0: c's outcome, 73 hours after it,
			// is more than a day ahead.
			outs := NewOutcomes(t0.Add(48 * time.Hour))
			for _, r := range tt.records {
				outs.Add([]byte(r))
			}
			var got []string
			for _, o := range []string{"a", "b", "c"} {
				if l, ok := outs.Label(o); ok {
					got = append(got, o+"="+string(l))
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("labels %v, want %s", got, tt.want)
			}
			if !maps.Equal(outs.Refused, tt.refused) && len(outs.Refused)+len(tt.refused) > 0 {
				t.Errorf("refused %v, want %v", outs.Refused, tt.refused)
			}
			if outs.Read != len(tt.records) || outs.Replaced != tt.replaced {
				t.Errorf("read %d, replaced %d; want %d, %d", outs.Read, outs.Replaced, len(tt.records), tt.replaced)
			}
		})
	}
}

// --outcomes FILE: blank lines skipped, CRLF taken, a line longer than a
// record may be refused as oversized however long, and the next read.
func TestOutcomesReadLines(t *testing.T) {
	good := `{"type":"outcome","order_id":"a","outcome":"fraud","source":"chargeback","occurred_at":"2026-03-01T12:00:00Z"}`
	// padded is a record of exactly n bytes, for order b.
	padded := func(n int) string {
		r := `{"type":"outcome","order_id":"b","outcome":"fraud","source":"chargeback","occurred_at":"2026-03-01T12:00:00Z","note":""}`
		return r[:len(r)-2] + strings.Repeat("p", n-len(r)) + `"}`
	}
	input := strings.Join([]string{good + "\r", "", padded(outcome.MaxRecordBytes) + "\r", padded(outcome.MaxRecordBytes + 1),
		padded(10 * outcome.MaxRecordBytes)}, "\n")
	outs := NewOutcomes(t0.Add(time.Hour))
	if err := outs.ReadLines(strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	if outs.Read != 4 || outs.Refused[outcome.ReasonOversized] != 2 || outs.Orders() != 2 || outs.Replaced != 0 {
		t.Errorf("read %d, refused %v, %d orders, want 4 read, 2 oversized, a and b at the bound", outs.Read, outs.Refused, outs.Orders())
	}
}

// An input's outcome lines are outcomes, not events: the events around
// them are read as ever, and they are neither invalid lines nor orders.
func TestReadOutcomeLines(t *testing.T) {
	input := strings.Join([]string{
		line("a", "", "x", "k", 1, 0),
		`{"type":"outcome","order_id":"o-a","outcome":"fraud","source":"chargeback","occurred_at":"2026-03-02T12:00:00Z"}`,
		`{"type":"outcome","order_id":"o-a","outcome":"maybe"}`,
		`{"outcome":"fraud","type":"order","event_id":"b","order_id":"o-b","customer_id":"x","amount":1}`,
	}, "\n")
	evs, err := Read(strings.NewReader(input), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if evs.Len() != 2 || len(evs.Invalid) != 0 || len(evs.OutcomeLines) != 2 {
		t.Errorf("%d events, invalid %v, %d outcome lines; want 2 events, none invalid, 2 outcome lines", evs.Len(), evs.Invalid, len(evs.OutcomeLines))
	}
	outs := NewOutcomes(t0.Add(48 * time.Hour))
	for _, l := range evs.OutcomeLines {
		outs.Add(l)
	}
	if l, _ := outs.Label("o-a"); l != alert.LabelFraud || outs.Refused[outcome.ReasonMissingField] != 1 {
		t.Errorf("o-a %q, refused %v", l, outs.Refused)
	}
}

// --outcomes-from-topic reads the whole topic, every partition, refusing
// what the consumer would, and leaves no group behind.
func TestOutcomesFromTopic(t *testing.T) {
	k := kafkatest.New(t)
	cfg := config.Default()
	cfg.Kafka.Brokers = k.Brokers
	cfg.Kafka.GroupID = kafkatest.Group(t, "fw")
	cfg.Kafka.OutcomesTopic = k.Topic(t, "outcomes", 2)
	rec := func(order, label, at string) []byte {
		return fmt.Appendf(nil, `{"type":"outcome","order_id":%q,"outcome":%q,"source":"chargeback","occurred_at":%q}`, order, label, at)
	}
	k.ProduceTo(t, cfg.Kafka.OutcomesTopic, 0, rec("a", "fraud", "2020-01-01T00:00:00Z"), rec("b", "legit", "2026-03-01T00:00:00Z"))
	k.ProduceTo(t, cfg.Kafka.OutcomesTopic, 1, rec("a", "legit", "2026-03-01T00:00:00Z"), []byte(`not json`))
	outs := NewOutcomes(t0)
	if err := OutcomesFromTopic(t.Context(), cfg.Kafka, &kafka.Transport{}, outs); err != nil {
		t.Fatal(err)
	}
	a, _ := outs.Label("a")
	b, _ := outs.Label("b")
	if a != alert.LabelLegit || b != alert.LabelLegit || outs.Read != 4 || outs.Refused[outcome.ReasonMalformed] != 1 || outs.Replaced != 1 {
		t.Errorf("a %s, b %s, read %d, refused %v, replaced %d", a, b, outs.Read, outs.Refused, outs.Replaced)
	}
	groups, err := (&kafka.Client{Addr: kafka.TCP(k.Brokers...)}).ListGroups(t.Context(), &kafka.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.GroupID == cfg.Kafka.OutcomesGroupID() {
			t.Errorf("the backtest joined the outcomes' group %s", g.GroupID)
		}
	}
}

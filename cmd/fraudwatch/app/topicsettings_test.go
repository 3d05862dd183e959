package app

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

// A replica started on an alerts topic that compacts (or one that keeps
// alerts a minute) says so with an ERROR naming the topic and the
// problem, as `fraudwatch topics` refuses it; safe topics log none.
func TestRunSaysWhenATopicBreaksItsGuarantees(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings []kafka.ConfigEntry
		want     string
	}{
		{"compacted", []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}, "cleanup.policy=compact"},
		{"kept a minute", []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "60000"}}, "retention.ms=60000"},
		{"safe", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPipeline(t, 1, countRule)
			p.cfg.Kafka.AlertsTopic = p.kafka.Topic(t, "alerts-checked", 1, tc.settings...)
			logs := &testkit.Buffer{}
			opts := p.options()
			opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			p.startWith(opts)
			waitFor(t, 30*time.Second, "the check's end", func() bool {
				return strings.Contains(logs.String(), "the topics' settings were checked")
			})
			// And the run goes on: an alert is posted.
			p.orders(0, ev{id: "1", customer: "c", amount: 1}, ev{id: "2", customer: "c", amount: 1}, ev{id: "3", customer: "c", amount: 1})
			waitFor(t, 20*time.Second, "the alert", func() bool { return len(p.notes.list()) == 1 })
			var errs []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "breaks fraudwatch's guarantees") {
					errs = append(errs, line)
				}
			}
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("logged %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0], `"level":"ERROR"`) || !strings.Contains(errs[0], tc.want) ||
				!strings.Contains(errs[0], `"topic":"`+p.cfg.Kafka.AlertsTopic+`"`) {
				t.Fatalf("logged %v, want one ERROR naming %s and %q", errs, p.cfg.Kafka.AlertsTopic, tc.want)
			}
		})
	}
}

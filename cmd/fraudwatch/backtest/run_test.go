package backtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Times print at one width, in UTC to the millisecond, whatever the
// precision and zone events gave, so the text's columns stay aligned.
func TestTextTimes(t *testing.T) {
	o := parseRules(t, `rules:
  - {name: each, metric: count, group_by: [customer_id], window: 1m, threshold: 1, cooldown: 0s}
`)
	zone := time.FixedZone("", 2*60*60)
	var lines []string
	for i, at := range []time.Duration{0, 1500 * time.Millisecond, 2123456789 * time.Nanosecond, 3 * time.Second} {
		lines = append(lines, fmt.Sprintf(`{"event_id":"e%d","type":"order","order_id":"o-%d","customer_id":"c%d","amount":1,"occurred_at":%q}`,
			i, i, i, t0.Add(at).In(zone).Format(time.RFC3339Nano)))
	}
	out := run(t, o, strings.Join(lines, "\n"))
	if !strings.Contains(out, " from 2026-03-01T12:00:00.000Z to 2026-03-01T12:00:03.000Z\n") {
		t.Errorf("the input's span is not in UTC to the millisecond:\n%s", out)
	}
	_, list, _ := strings.Cut(out, "crossings (4): time, rule, group, value, order, outcome\n")
	rows := strings.Split(strings.TrimSuffix(list, "\n"), "\n")
	want := []string{"2026-03-01T12:00:00.000Z", "2026-03-01T12:00:01.500Z", "2026-03-01T12:00:02.123Z", "2026-03-01T12:00:03.000Z"}
	if len(rows) != len(want) {
		t.Fatalf("crossings:\n%s", out)
	}
	for i, row := range rows {
		if !strings.HasPrefix(row, "  "+want[i]+"  each") {
			t.Errorf("crossing %d is %q, want it to start %q", i, row, "  "+want[i]+"  each")
		}
		// Every column starts where the first row's does.
		if col, first := strings.Index(row, "sent"), strings.Index(rows[0], "sent"); col != first {
			t.Errorf("crossing %d's outcome at column %d, the first's at %d:\n%s", i, col, first, list)
		}
	}
}

// A second record of an event (a producer's retry) within the retry
// window is replayed once, as `run` processes it once; off, it is replayed
// (the scripts no longer recognise it).
func TestAProducersRetryIsReplayedOnce(t *testing.T) {
	o := parseRules(t, `rules:
  - {name: three, metric: count, group_by: [customer_id], window: 1m, threshold: 3}
`)
	input := strings.Join([]string{
		line("a", "", "x", "k", 1, 0),
		line("b", "", "x", "k", 1, time.Second),
		line("a", "", "x", "k", 1, 0), // the retry: same event, later line
	}, "\n")
	tests := []struct {
		window int
		want   []string
	}{
		{4096, []string{"backtest of events.jsonl: 2 events (2 orders, 0 refunds)", "retries: 1 (", "crossings (0)"}},
		{0, []string{"backtest of events.jsonl: 3 events (3 orders, 0 refunds)"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("window ", tt.window), func(t *testing.T) {
			o.RetryWindow = tt.window
			out := run(t, o, input)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q:\n%s", w, out)
				}
			}
		})
	}
	o.RetryWindow, o.Format = 4096, "json"
	if out := run(t, o, input); !strings.Contains(out, `"retried": 1,`) {
		t.Errorf("JSON report lacks the retry:\n%s", out)
	}
}

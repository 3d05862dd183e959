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

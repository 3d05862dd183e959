package slack

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
)

// digestTopGroups is how many groups a digest names with their counts.
const digestTopGroups = 5

// FormatDigest renders the alerts of one rule past the budget as one
// message: how many, the groups that crossed most, and the first d.List
// alerts, one line each (rule, group, value, order, time). Values are
// escaped and cut as Format's are.
func FormatDigest(d alert.Digest) (fallback string, blocks []slack.Block) {
	n := len(d.Alerts)
	if n == 0 {
		return "", nil
	}
	first := d.Alerts[0]
	header := fmt.Sprintf(":rotating_light: DIGEST · %s · %d alerts", clipPlain(d.Rule, 100), n)
	blocks = append(blocks, slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, clipPlain(header, maxHeaderText), true, false)))
	intro := fmt.Sprintf("*%d alerts* of rule *%s* came faster than the alert budget lets messages go, so they come as one.",
		n, clipMrkdwn(d.Rule, 200))
	if first.Description != "" {
		intro += "\n" + clipMrkdwn(first.Description, maxDescription)
	}
	blocks = append(blocks, slack.NewSectionBlock(mrkdwn(intro), nil, nil))

	counts := map[string]int{}
	for _, a := range d.Alerts {
		counts[groupOf(a)]++
	}
	groups := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	var top []string
	for _, g := range groups[:min(len(groups), digestTopGroups)] {
		top = append(top, fmt.Sprintf("• %s (%d)", g, counts[g])) // groupOf escaped it
	}
	blocks = append(blocks, slack.NewSectionBlock(mrkdwn(fmt.Sprintf("*Groups* (%d)\n%s", len(groups), strings.Join(top, "\n"))), nil, nil))

	// One line an alert: what the message carries, rule and group first.
	listed := d.Alerts[:min(n, max(d.List, 0))]
	lines := make([]string, len(listed))
	for i, a := range listed {
		lines[i] = fmt.Sprintf("• %s %s · %s · order %s · %s", clipMrkdwn(a.Rule, 100), groupOf(a),
			clipMrkdwn(alert.FormatValue(a.Metric, a.Current, a.Currency), 60), clipMrkdwn(orNone(a.OrderID), maxIDText), a.At.UTC().Format(time.RFC3339))
	}
	more := ""
	if len(listed) < n {
		more = fmt.Sprintf("\n… and %d more", n-len(listed))
	}
	// A section's text has a limit of its own: the list goes in pieces.
	for chunk := range slices.Chunk(lines, 10) {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(strings.Join(chunk, "\n")), nil, nil))
	}
	if more != "" {
		blocks = append(blocks, slack.NewContextBlock("", mrkdwn(strings.TrimPrefix(more, "\n"))))
	}
	return fmt.Sprintf("[DIGEST] %s: %d alerts\n%s%s", clipMrkdwn(d.Rule, 200), n, strings.Join(lines, "\n"), more), blocks
}

// groupOf is an alert's group as one line, field=value, ..., escaped and
// bounded as Format's fallback has it.
func groupOf(a alert.Alert) string {
	return strings.TrimPrefix(groupLine(a.GroupBy, a.GroupValues), "group ")
}

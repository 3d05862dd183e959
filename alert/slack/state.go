package slack

import (
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
)

// stateText is an alert's life as its message shows it, one line a fact:
// who acknowledged it and when, who resolved it and when, who has it, what
// it was labelled, by whom and when. "" for an open alert nobody has or
// labelled.
func stateText(st alert.State) string {
	var lines []string
	if st.AckedBy != "" || st.Status == alert.StatusAcknowledged {
		lines = append(lines, ":white_check_mark: Acknowledged"+byAt(st.AckedBy, st.AckedAt))
	}
	if st.Status == alert.StatusResolved {
		lines = append(lines, ":heavy_check_mark: Resolved"+byAt(st.ResolvedBy, st.ResolvedAt))
	}
	if st.Assignee != "" {
		lines = append(lines, ":bust_in_silhouette: Assigned to "+mention(st.Assignee))
	}
	if l, ok := labelLines[st.Label]; ok {
		lines = append(lines, l+byAt(st.LabelledBy, st.LabelledAt))
	}
	return strings.Join(lines, "\n")
}

// labelLines say an alert's label.
var labelLines = map[alert.Label]string{
	alert.LabelFraud:   ":red_circle: Labelled fraud",
	alert.LabelLegit:   ":large_green_circle: Labelled not fraud",
	alert.LabelUnclear: ":grey_question: Labelled unclear",
}

// byAt is " by <who> at <when>", each part left out when unknown.
func byAt(who string, at time.Time) string {
	s := ""
	if who != "" {
		s += " by " + mention(who)
	}
	if !at.IsZero() {
		s += " at " + stamp(at)
	}
	return s
}

// stamp is a time as clicks' answers show it.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }

// stateBlock shows st under the alert; nil when there is nothing to say.
func stateBlock(st alert.State) slack.Block {
	text := stateText(st)
	if text == "" {
		return nil
	}
	return slack.NewContextBlock(stateBlockID, mrkdwn(text))
}

// withState is an alert's blocks with its own state and buttons left out,
// followed by st and actions (nil for none).
func withState(blocks []slack.Block, st alert.State, actions slack.Block) []slack.Block {
	out := make([]slack.Block, 0, len(blocks)+2)
	for _, b := range blocks {
		if b.BlockType() != slack.MBTAction && blockID(b) != stateBlockID {
			out = append(out, b)
		}
	}
	if sb := stateBlock(st); sb != nil {
		out = append(out, sb)
	}
	if actions != nil {
		out = append(out, actions)
	}
	return out
}

// blockID is a context block's id ("" for other blocks): the only kind
// of block an alert's state is shown in.
func blockID(b slack.Block) string {
	if c, ok := b.(*slack.ContextBlock); ok {
		return c.BlockID
	}
	return ""
}

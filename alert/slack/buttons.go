package slack

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Action ids of an alert's buttons.
const (
	actionSnooze  = "fraudwatch_snooze"
	actionAck     = "fraudwatch_ack"
	actionResolve = "fraudwatch_resolve"
	actionAssign  = "fraudwatch_assign"
)

// Block ids of what an alert's message shows of its life: its buttons,
// and the lines saying who acknowledged, resolved or has it.
const (
	actionsBlockID = "fraudwatch_actions"
	stateBlockID   = "fraudwatch_state"
)

// Snoozes are the buttons' silence lengths.
var snoozes = []time.Duration{time.Hour, 24 * time.Hour}

// buttonValue is what a button carries back: the alert's rule and group;
// a Snooze's how long, and the group's values to show in its silence
// (which must make the group: silence.Store checks it); an Acknowledge's,
// a Resolve's and an Assign to me's event id, which with the rule and
// group names the alert (alert.Ref). Slack
// returns it as sent, but only in a request signed with the app's signing
// secret. Acknowledge buttons posted before acknowledgements went into the
// alert's record carry no event id.
type buttonValue struct {
	Rule   string            `json:"r"`
	Group  string            `json:"g"`
	Match  map[string]string `json:"m,omitempty"`
	Snooze string            `json:"s,omitempty"`
	Event  string            `json:"e,omitempty"`
}

// maxButtonValue is Slack's limit of a button's value.
const maxButtonValue = 2000

// buttons are an alert's actions as it is posted, open: snooze its group
// for each of snoozes, acknowledge it, resolve it, and assign it to
// whoever clicks (its rule, group and event id name it). Nil when the
// alert cannot name its group.
func buttons(rule, group, eventID, identity string, match map[string]string) slack.Block {
	if group == "" {
		return nil
	}
	return actionsFor(alert.State{Status: alert.StatusOpen}, alert.Ref{Rule: rule, Group: group, EventID: eventID},
		snoozeButtons(rule, group, identity, match))
}

// snoozeButtons snooze the group for each of snoozes; none when they
// cannot be carried. A Snooze shows the group's values in its silence
// only when they are whole: values cut for display ("…") no longer make
// the group, and a silence refuses values that do not.
func snoozeButtons(rule, group, identity string, match map[string]string) []slack.BlockElement {
	for _, v := range match {
		if strings.HasSuffix(v, "…") {
			match = nil
			break
		}
	}
	var elems []slack.BlockElement
	for _, d := range snoozes {
		v, ok := encodeValue(buttonValue{Rule: rule, Group: group, Match: match, Snooze: d.String()})
		if !ok {
			return nil
		}
		elems = append(elems, slack.NewButtonBlockElement(actionSnooze, v,
			slack.NewTextBlockObject(slack.PlainTextType, clipPlain("Snooze "+identity+" "+snoozeText(d), 75), false, false)))
	}
	return elems
}

// actionsFor is the actions block of an alert in state st: its snoozes
// (as posted), then what its life still allows: Acknowledge while it is
// open, Resolve and Assign to me until it is resolved. A resolved alert
// has no buttons; nor has one without an event id (it names no alert)
// any but its snoozes. Nil when no button is left.
func actionsFor(st alert.State, ref alert.Ref, snoozed []slack.BlockElement) slack.Block {
	if st.Status == alert.StatusResolved {
		return nil
	}
	elems := append([]slack.BlockElement(nil), snoozed...)
	if ref.EventID != "" && ref.Group != "" {
		v, ok := encodeValue(buttonValue{Rule: ref.Rule, Group: ref.Group, Event: ref.EventID})
		if ok && st.Status != alert.StatusAcknowledged {
			ack := slack.NewButtonBlockElement(actionAck, v, slack.NewTextBlockObject(slack.PlainTextType, "Acknowledge", false, false))
			ack.Style = slack.StylePrimary
			elems = append(elems, ack)
		}
		if ok {
			elems = append(elems,
				slack.NewButtonBlockElement(actionResolve, v, slack.NewTextBlockObject(slack.PlainTextType, "Resolve", false, false)),
				slack.NewButtonBlockElement(actionAssign, v, slack.NewTextBlockObject(slack.PlainTextType, "Assign to me", false, false)))
		}
	}
	if len(elems) == 0 {
		return nil
	}
	return slack.NewActionBlock(actionsBlockID, elems...)
}

// identity is how a button names the alert's group: its values.
func identity(a alert.Alert) string {
	return strings.Join(a.GroupValues, ", ")
}

// groupMatch is the alert's group by field, for the silence to show.
func groupMatch(a alert.Alert) map[string]string {
	m := make(map[string]string, len(a.GroupBy))
	for i, f := range a.GroupBy {
		if i < len(a.GroupValues) {
			m[f] = a.GroupValues[i]
		}
	}
	return m
}

func encodeValue(v buttonValue) (string, bool) {
	b, err := json.Marshal(v)
	if err != nil || len(b) > maxButtonValue {
		// Values too long to carry: the group alone names it.
		v.Match = nil
		if b, err = json.Marshal(v); err != nil || len(b) > maxButtonValue {
			return "", false
		}
	}
	return string(b), true
}

func snoozeText(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return d.String()
}

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
	actionFraud   = "fraudwatch_label_fraud"
	actionLegit   = "fraudwatch_label_legit"
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
// a Resolve's, an Assign to me's, a Fraud's and a Not fraud's event id,
// which with the rule and group names the alert (alert.Ref). Slack
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
// for each of snoozes, acknowledge it, resolve it, assign it to whoever
// clicks, and label it fraud or not fraud (its rule, group and event id
// name it). Nil when the alert cannot name its group.
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
// open, Resolve and Assign to me until it is resolved, and Fraud and Not
// fraud always, to label it or label it again (labelButtons). A resolved
// alert keeps only Fraud and Not fraud: an analyst often learns what it
// was after resolving it. One without an event id (it names no alert)
// has none but its snoozes. Nil when no button is left. Seven buttons at
// most: Slack allows 25 in a block.
func actionsFor(st alert.State, ref alert.Ref, snoozed []slack.BlockElement) slack.Block {
	var elems []slack.BlockElement
	if st.Status != alert.StatusResolved {
		elems = append(elems, snoozed...)
	}
	if ref.EventID != "" && ref.Group != "" {
		if v, ok := encodeValue(buttonValue{Rule: ref.Rule, Group: ref.Group, Event: ref.EventID}); ok {
			elems = append(elems, lifeButtons(st, v)...)
		}
	}
	if len(elems) == 0 {
		return nil
	}
	return slack.NewActionBlock(actionsBlockID, elems...)
}

// lifeButtons are the buttons that change the life of the alert v names,
// in state st.
func lifeButtons(st alert.State, v string) []slack.BlockElement {
	var elems []slack.BlockElement
	if st.Status != alert.StatusResolved {
		if st.Status != alert.StatusAcknowledged {
			ack := slack.NewButtonBlockElement(actionAck, v, plainText("Acknowledge"))
			ack.Style = slack.StylePrimary
			elems = append(elems, ack)
		}
		elems = append(elems,
			slack.NewButtonBlockElement(actionResolve, v, plainText("Resolve")),
			slack.NewButtonBlockElement(actionAssign, v, plainText("Assign to me")))
	}
	return append(elems, labelButtons(st.Label, v)...)
}

// labelButtons label the alert v names fraud or not fraud. The button of
// its label l, if it has one, is marked chosen ("✓" and a style); the
// other stays, to label it again.
func labelButtons(l alert.Label, v string) []slack.BlockElement {
	fraud := slack.NewButtonBlockElement(actionFraud, v, plainText("Fraud"))
	legit := slack.NewButtonBlockElement(actionLegit, v, plainText("Not fraud"))
	switch l {
	case alert.LabelFraud:
		fraud.Text, fraud.Style = plainText("✓ Fraud"), slack.StyleDanger
	case alert.LabelLegit:
		legit.Text, legit.Style = plainText("✓ Not fraud"), slack.StylePrimary
	}
	return []slack.BlockElement{fraud, legit}
}

func plainText(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
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

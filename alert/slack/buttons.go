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
	actionSnooze = "fraudwatch_snooze"
	actionAck    = "fraudwatch_ack"
)

// Snoozes are the buttons' silence lengths.
var snoozes = []time.Duration{time.Hour, 24 * time.Hour}

// buttonValue is what a button carries back: the alert's rule and group;
// a Snooze's how long, and the group's values to show in its silence
// (which must make the group: silence.Store checks it); an Acknowledge's
// event id, which with the rule and group names the alert's record. Slack
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

// buttons are an alert's actions: snooze its group for each of snoozes,
// and acknowledge it (its rule, group and event id name its record). Nil
// when the alert cannot name its group. A Snooze shows the group's values
// in its silence only when they are whole: values cut for display ("…")
// no longer make the group, and a silence refuses values that do not.
func buttons(rule, group, eventID, identity string, match map[string]string) slack.Block {
	if group == "" {
		return nil
	}
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
	v, ok := encodeValue(buttonValue{Rule: rule, Group: group, Event: eventID})
	if !ok {
		return nil
	}
	ack := slack.NewButtonBlockElement(actionAck, v, slack.NewTextBlockObject(slack.PlainTextType, "Acknowledge", false, false))
	ack.Style = slack.StylePrimary
	return slack.NewActionBlock("fraudwatch_actions", append(elems, ack)...)
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

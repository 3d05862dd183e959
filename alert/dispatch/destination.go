package dispatch

import (
	"regexp"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// defaultDestination is a notifier that names where a message without a
// channel goes (alert/slack's Notifier: slack.channel in token mode), so
// that a rule without `channel` and one naming that channel share one
// destination: one budget, one waiting store, one parked series.
type defaultDestination interface {
	DefaultDestination() string
}

// destination names where a message to channel goes, one name a place:
// "" is the notifier's default channel; a Slack channel's name is
// lowercase with one leading # (Slack's names are lowercase, and a # is
// optional: "#Fraud", "fraud" and "#fraud" are one channel); an id (C…,
// G…, D…) and a user (@…) stay as they are. "" remains only when the
// notifier names no default (a webhook posts where it was made for).
func (d *Dispatcher) destination(channel string) string {
	if strings.TrimSpace(channel) == "" {
		channel = d.defaultChannel
	}
	return destinationName(channel)
}

// channelID is a Slack conversation id: a channel, a private group, a
// direct message.
var channelID = regexp.MustCompile(`^[CGD][A-Z0-9]{8,}$`)

func destinationName(channel string) string {
	ch := strings.TrimSpace(channel)
	switch {
	case ch == "", channelID.MatchString(ch):
		return ch
	case strings.HasPrefix(ch, "@"):
		return strings.ToLower(ch)
	}
	return "#" + strings.ToLower(strings.TrimPrefix(ch, "#"))
}

// destinationLabel names a destination in the gauges: "" (the default
// channel of a notifier that names none) is "(default)".
func destinationLabel(dest string) string {
	if dest == "" {
		return "(default)"
	}
	return dest
}

// followRule points an alert kept in Redis (parked, or waiting for its
// budget) at the channel of its rule in force, or of a rule removed within
// UnknownRuleGrace: a fixed `channel:` releases alerts parked on a
// mistyped one. An alert of a rule gone longer keeps the channel it was
// kept with.
func (d *Dispatcher) followRule(a *alert.Alert) {
	if rs, ok := d.inForce(a.Rule); ok {
		a.Channel = rs.Channel
		a.Links = alert.MakeLinks(rs.Links, *a)
	}
}

// inForce is the settings of rule name in force, or of a rule removed
// within UnknownRuleGrace.
func (d *Dispatcher) inForce(name string) (RuleSettings, bool) {
	rs, ok := (*d.rules.Load())[name]
	if !ok {
		rs, ok = d.removed.lookup(name, d.cfg.UnknownRuleGrace, time.Now())
	}
	return rs, ok
}

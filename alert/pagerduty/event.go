package pagerduty

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Event actions.
const (
	ActionTrigger     = "trigger"
	ActionAcknowledge = "acknowledge"
	ActionResolve     = "resolve"
)

// Bounds of one event, whatever the alert holds: PagerDuty's own
// (summary 1,024 characters, dedup_key 255, 512 KB an event) and ours.
const (
	maxSummary = 1024
	maxText    = 1024
	maxShort   = 256
	maxLinks   = 10
	maxURL     = 2048
)

// event is an Events API v2 event.
type event struct {
	RoutingKey  string   `json:"routing_key"`
	EventAction string   `json:"event_action"`
	DedupKey    string   `json:"dedup_key"`
	Payload     *payload `json:"payload,omitempty"`
	Links       []link   `json:"links,omitempty"`
	Client      string   `json:"client,omitempty"`
	ClientURL   string   `json:"client_url,omitempty"`
}

type payload struct {
	Summary       string  `json:"summary"`
	Source        string  `json:"source"`
	Severity      string  `json:"severity"`
	Timestamp     string  `json:"timestamp,omitempty"`
	Component     string  `json:"component,omitempty"`
	Group         string  `json:"group,omitempty"`
	Class         string  `json:"class,omitempty"`
	CustomDetails details `json:"custom_details"`
}

type link struct {
	Href string `json:"href"`
	Text string `json:"text,omitempty"`
}

// details are payload.custom_details: what on-call needs to judge the
// alert without opening fraudwatch.
type details struct {
	AlertID     string     `json:"alert_id"`
	Rule        string     `json:"rule"`
	Severity    string     `json:"fraudwatch_severity"`
	Description string     `json:"description,omitempty"`
	GroupBy     []string   `json:"group_by"`
	GroupValues []string   `json:"group_values"`
	Metric      string     `json:"metric"`
	Field       string     `json:"field,omitempty"`
	Current     string     `json:"current"`
	Threshold   string     `json:"threshold"`
	Window      string     `json:"window"`
	WindowType  string     `json:"window_type"`
	OrderID     string     `json:"order_id"`
	EventID     string     `json:"event_id"`
	Evidence    []evidence `json:"evidence,omitempty"`
}

type evidence struct {
	OrderID string `json:"order_id,omitempty"`
	EventID string `json:"event_id"`
	Amount  int64  `json:"amount"`
	At      string `json:"at,omitempty"`
	Value   string `json:"value,omitempty"`
}

// DedupKey is the dedup_key of alert id's events: the same for its
// trigger, acknowledge and resolve, whichever replica sends them, and 75
// characters whatever the ID.
func DedupKey(alertID string) string {
	h := sha256.Sum256([]byte(alertID))
	return "fraudwatch-" + hex.EncodeToString(h[:])
}

// Severity maps fraudwatch's severity onto PagerDuty's: critical stays
// critical, high is error, warning and info stay; anything else (none
// reaches a receiver) is error, so that nothing unknown pages less.
func Severity(s alert.Severity) string {
	switch s {
	case alert.SeverityCritical:
		return "critical"
	case alert.SeverityHigh:
		return "error"
	case alert.SeverityWarning:
		return "warning"
	case alert.SeverityInfo:
		return "info"
	}
	return "error"
}

// trigger is a's trigger event.
func (n *Notifier) trigger(a alert.Alert) event {
	wt := a.WindowType
	if wt == "" {
		wt = alert.Fixed
	}
	p := &payload{
		Summary: summary(a), Source: n.cfg.Source, Severity: Severity(a.Severity),
		Component: oneLine(a.Rule, maxShort), Group: oneLine(strings.Join(cutAll(a.GroupBy, 64), ","), maxShort),
		Class: oneLine(string(a.Metric), maxShort),
		CustomDetails: details{
			AlertID: cut(a.ID, maxText), Rule: cut(a.Rule, maxShort), Severity: cut(string(a.Severity), maxShort),
			Description: cut(a.Description, maxText),
			GroupBy:     cutAll(a.GroupBy, maxShort), GroupValues: cutAll(a.GroupValues, maxText),
			Metric: cut(string(a.Metric), maxShort), Field: cut(a.Field, maxShort),
			Current:   cut(alert.FormatValue(a.Metric, a.Current, a.Currency), maxShort),
			Threshold: cut(alert.FormatValue(a.Metric, a.Threshold, a.Currency), maxShort),
			Window:    alert.FormatDuration(a.Window), WindowType: cut(string(wt), maxShort),
			OrderID: cut(a.OrderID, maxText), EventID: cut(a.EventID, maxText),
		},
	}
	if !a.At.IsZero() {
		p.Timestamp = a.At.UTC().Format(time.RFC3339Nano)
	}
	for _, e := range a.Evidence[:min(len(a.Evidence), alert.MaxEvidence)] {
		ev := evidence{OrderID: cut(e.OrderID, maxText), EventID: cut(e.EventID, maxText), Amount: e.Amount, Value: cut(e.Value, maxText)}
		if !e.At.IsZero() {
			ev.At = e.At.UTC().Format(time.RFC3339Nano)
		}
		p.CustomDetails.Evidence = append(p.CustomDetails.Evidence, ev)
	}
	ev := event{RoutingKey: n.cfg.RoutingKey, EventAction: ActionTrigger, DedupKey: DedupKey(a.ID), Payload: p,
		Client: "fraudwatch", ClientURL: n.cfg.ClientURL}
	for _, l := range a.Links[:min(len(a.Links), maxLinks)] {
		if l.URL == "" || len(l.URL) > maxURL {
			continue // a link cut would lead elsewhere
		}
		ev.Links = append(ev.Links, link{Href: l.URL, Text: oneLine(l.Text, maxShort)})
	}
	return ev
}

// summary is payload.summary, the incident's title: severity, rule,
// description, group and values, on one line of at most 1,024 characters.
func summary(a alert.Alert) string {
	var b strings.Builder
	b.WriteString("[" + oneLine(string(a.Severity), 20) + "] " + oneLine(a.Rule, 100))
	if a.Description != "" {
		b.WriteString(": " + oneLine(a.Description, 400))
	}
	b.WriteString(" — ")
	for i, f := range a.GroupBy[:min(len(a.GroupBy), 8)] {
		if i > 0 {
			b.WriteString(", ")
		}
		v := ""
		if i < len(a.GroupValues) {
			v = a.GroupValues[i]
		}
		b.WriteString(oneLine(f, 40) + "=" + oneLine(v, 80))
	}
	b.WriteString(": " + alert.FormatValue(a.Metric, a.Current, a.Currency) + " ≥ " +
		alert.FormatValue(a.Metric, a.Threshold, a.Currency) + " in " + alert.FormatDuration(a.Window))
	return oneLine(b.String(), maxSummary)
}

// oneLine is s printable on one line, cut to n characters.
func oneLine(s string, n int) string {
	return alert.Cut(strings.TrimSpace(alert.Printable(prefix(s, n))), n)
}

// cut is s cut to n characters and marked.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return alert.Cut(prefix(s, n), n)
}

// prefix is enough of s to cut it to n characters, so that a huge value
// costs no more than a small one: more than n runes whenever s has, the
// rune split at its end among those cut.
func prefix(s string, n int) string { return s[:min(len(s), 4*n+4)] }

func cutAll(ss []string, n int) []string {
	out := make([]string, 0, min(len(ss), alert.MaxGroupFields))
	for _, s := range ss[:min(len(ss), alert.MaxGroupFields)] {
		out = append(out, cut(s, n))
	}
	return out
}

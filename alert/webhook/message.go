package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Version is the JSON body's version. A change that could break a reader
// (a field removed, renamed or retyped) makes a new one; fields may be
// added within a version.
const Version = "1"

// Message types: what happened to the alert.
const (
	TypeCreated      = "alert.created"
	TypeAcknowledged = "alert.acknowledged"
	TypeResolved     = "alert.resolved"
	TypeAssigned     = "alert.assigned"
	// TypeLabelled: a person said what the alert was (fraud, legit,
	// unclear: state.label), after any acknowledgement or resolution.
	TypeLabelled = "alert.labelled"
)

// Bounds of what one message carries, whatever the alert holds.
const (
	maxText        = 1024 // runes of a text field
	maxShort       = 256  // runes of a name, an id, a currency
	maxGroupFields = alert.MaxGroupFields
	maxLinks       = 10
	maxURL         = 2048
)

// Message is the JSON body, and what a template is given. docs/receivers.md
// documents every field.
type Message struct {
	Version string `json:"version"`
	Type    string `json:"type"`
	// Timestamp is when what the message says happened: the alert's
	// publication (or crossing), its acknowledgement, its resolution; the
	// time of sending when fraudwatch keeps none (an assignment).
	Timestamp time.Time   `json:"timestamp"`
	Alert     Alert       `json:"alert"`
	State     alert.State `json:"state"`
	// MessageID is the webhook-id header's value, for templates; the JSON
	// body leaves it to the header.
	MessageID string `json:"-"`
}

// Alert is the alert as the body shows it: what a case system needs,
// nothing of fraudwatch's keys.
type Alert struct {
	ID            string       `json:"id"`
	Rule          string       `json:"rule"`
	Severity      string       `json:"severity"`
	Description   string       `json:"description"`
	GroupBy       []string     `json:"group_by"`
	GroupValues   []string     `json:"group_values"`
	Metric        string       `json:"metric"`
	Field         string       `json:"field,omitempty"`
	Current       int64        `json:"current"`
	Threshold     int64        `json:"threshold"`
	Currency      string       `json:"currency,omitempty"`
	CurrentText   string       `json:"current_text"`
	ThresholdText string       `json:"threshold_text"`
	WindowSeconds float64      `json:"window_seconds"`
	WindowType    string       `json:"window_type"`
	OrderID       string       `json:"order_id"`
	EventID       string       `json:"event_id"`
	At            time.Time    `json:"at,omitzero"`
	PublishedAt   time.Time    `json:"published_at,omitzero"`
	Evidence      []Evidence   `json:"evidence"`
	Links         []alert.Link `json:"links"`
}

// Evidence is one order behind the crossing.
type Evidence struct {
	OrderID string    `json:"order_id,omitempty"`
	EventID string    `json:"event_id"`
	Amount  int64     `json:"amount"`
	At      time.Time `json:"at,omitzero"`
	Value   string    `json:"value,omitempty"`
}

// newMessage builds the message of type typ about a, bounded whatever a
// holds.
func newMessage(typ string, a alert.Alert, st alert.State, at time.Time) Message {
	st.OpenedAt, st.AckedAt, st.ResolvedAt, st.LabelledAt = utc(st.OpenedAt), utc(st.AckedAt), utc(st.ResolvedAt), utc(st.LabelledAt)
	st.AckedBy, st.ResolvedBy, st.Assignee = cut(st.AckedBy, maxShort), cut(st.ResolvedBy, maxShort), cut(st.Assignee, maxShort)
	return Message{Version: Version, Type: typ, Timestamp: at.UTC(), Alert: bodyOf(a), State: st}
}

// bodyOf is a as the body shows it: every text cut, every list bounded,
// lists never null.
func bodyOf(a alert.Alert) Alert {
	wt := a.WindowType
	if wt == "" {
		wt = alert.Fixed
	}
	b := Alert{
		ID: cut(a.ID, maxText), Rule: cut(a.Rule, maxShort), Severity: cut(string(a.Severity), maxShort),
		Description: cut(a.Description, maxText),
		GroupBy:     cutAll(a.GroupBy, maxGroupFields, maxShort), GroupValues: cutAll(a.GroupValues, maxGroupFields, maxText),
		Metric: cut(string(a.Metric), maxShort), Field: cut(a.Field, maxShort),
		Current: a.Current, Threshold: a.Threshold, Currency: cut(a.Currency, maxShort),
		CurrentText:   cut(alert.FormatValue(a.Metric, a.Current, a.Currency), maxShort),
		ThresholdText: cut(alert.FormatValue(a.Metric, a.Threshold, a.Currency), maxShort),
		WindowSeconds: a.Window.Seconds(), WindowType: cut(string(wt), maxShort),
		OrderID: cut(a.OrderID, maxText), EventID: cut(a.EventID, maxText),
		At: utc(a.At), PublishedAt: utc(a.PublishedAt),
		Evidence: make([]Evidence, 0, min(len(a.Evidence), alert.MaxEvidence)),
		Links:    make([]alert.Link, 0, min(len(a.Links), maxLinks)),
	}
	for _, e := range a.Evidence[:min(len(a.Evidence), alert.MaxEvidence)] {
		b.Evidence = append(b.Evidence, Evidence{OrderID: cut(e.OrderID, maxText), EventID: cut(e.EventID, maxText),
			Amount: e.Amount, At: utc(e.At), Value: cut(e.Value, maxText)})
	}
	for _, l := range a.Links[:min(len(a.Links), maxLinks)] {
		if l.URL == "" || len(l.URL) > maxURL {
			continue // a link cut would lead elsewhere
		}
		b.Links = append(b.Links, alert.Link{Text: cut(l.Text, maxShort), URL: l.URL})
	}
	return b
}

// cut is s cut to n characters and marked.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Enough of s to cut, so that a huge value costs no more than a small
	// one: more than n runes whenever s has, a rune split at its end cut.
	return alert.Cut(s[:min(len(s), 4*n+4)], n)
}

func cutAll(ss []string, most, n int) []string {
	out := make([]string, 0, min(len(ss), most))
	for _, s := range ss[:min(len(ss), most)] {
		out = append(out, cut(s, n))
	}
	return out
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// updateOf is the message type of a state change, named by the status it
// leaves the alert in; an assignment of an open alert is alert.assigned;
// a label given after the last acknowledgement or resolution (the state
// keeps each one's time) is alert.labelled. ok is false for a state with
// nothing to show (open, nobody assigned, no label).
func updateOf(st alert.State) (typ string, at time.Time, ok bool, err error) {
	if st.Label != "" && !st.LabelledAt.IsZero() && !st.LabelledAt.Before(st.AckedAt) && !st.LabelledAt.Before(st.ResolvedAt) {
		switch st.Status {
		case alert.StatusOpen, alert.StatusAcknowledged, alert.StatusResolved, "":
			return TypeLabelled, st.LabelledAt, true, nil
		}
	}
	switch st.Status {
	case alert.StatusResolved:
		return TypeResolved, st.ResolvedAt, true, nil
	case alert.StatusAcknowledged:
		return TypeAcknowledged, st.AckedAt, true, nil
	case alert.StatusOpen, "":
		if st.Assignee != "" {
			return TypeAssigned, time.Time{}, true, nil
		}
		return "", time.Time{}, false, nil
	}
	return "", time.Time{}, false, errors.New("a status it does not know: " + alert.Cut(alert.Printable(string(st.Status)), 32))
}

// messageID is the webhook-id of the message of type typ about the alert
// id in state st: the same for every attempt at one message, and for a
// message sent again after a crash, so that a receiver drops repeats;
// another for each change of the alert's state. The specification asks
// that it hold no '.'; hex holds none.
func messageID(alertID, typ string, st alert.State) string {
	h := sha256.New()
	// Each part is length-prefixed by JSON's quoting: no two inputs give
	// one hashed text.
	parts, _ := json.Marshal([]any{alertID, typ, st}) // strings and times always marshal
	h.Write(parts)
	return "msg_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// sampleMessage is what a template is tried on by Validate: every field
// set, lists of two.
func sampleMessage() Message {
	at := time.Date(2026, 3, 4, 14, 5, 6, 0, time.UTC)
	a := alert.Alert{
		ID: "amount-per-card-10m/evt-991", Rule: "amount-per-card-10m", Severity: alert.SeverityCritical,
		Description: "More than KRW 1,000,000 paid by one card within 10m", Metric: alert.Amount,
		GroupBy: []string{"card_fingerprint", "email"}, GroupValues: []string{"fp_9f8e7d", "kim@example.com"},
		Current: 1_250_000, Threshold: 1_000_000, Currency: "KRW", Window: 10 * time.Minute,
		OrderID: "ord-77", EventID: "evt-991", At: at, PublishedAt: at.Add(40 * time.Millisecond),
		Evidence: []alert.Evidence{{OrderID: "ord-77", EventID: "evt-991", Amount: 700_000, At: at},
			{OrderID: "ord-76", EventID: "evt-990", Amount: 550_000, At: at.Add(-time.Minute)}},
		Links: []alert.Link{{Text: "Order", URL: "https://backoffice.example/orders/ord-77"}},
	}
	m := newMessage(TypeCreated, a, alert.State{Status: alert.StatusOpen}, at)
	m.MessageID = messageID(a.ID, m.Type, m.State)
	return m
}

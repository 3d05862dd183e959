// Package alert is the vocabulary of alerts that rules, config and the
// delivery code share:
//
//   - The Alert a crossing becomes, with the Severity, Mode, Metric and
//     WindowType that rules pick.
//   - Its form on the alerts topic (Decode), its bounds (WithinBounds) and
//     its seal (Seal).
//   - How its numbers and descriptions read (FormatValue, Describe).
//   - What a Notifier is.
//
// It imports nothing of Kafka, Redis or Slack: delivery is package
// alert/dispatch, Slack is alert/slack.
package alert

import "time"

// Severity is how urgent an alert is.
type Severity string

// Severities, least urgent first.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityHigh     Severity = "high"
	SeverityCritical Severity = "critical"
)

// Severities lists every severity, least urgent first.
var Severities = []Severity{SeverityInfo, SeverityWarning, SeverityHigh, SeverityCritical}

// Mode says what a crossing does.
type Mode string

// Modes.
const (
	// ModeAlert notifies (subject to the cooldown).
	ModeAlert Mode = "alert"
	// ModeShadow counts and logs a crossing but never notifies: for trying
	// a rule on live traffic before trusting it.
	ModeShadow Mode = "shadow"
)

// Metric is what a rule counts, and so what an alert's numbers measure.
type Metric string

// Metrics.
const (
	Count  Metric = "count"  // one per order
	Amount Metric = "amount" // the orders' amounts in minor units, lowered by refunds
	// Distinct counts the distinct values of one event field (the rule's
	// field) among its orders.
	Distinct Metric = "distinct"
)

// WindowType is how a rule's window is measured.
type WindowType string

// Window types.
const (
	// Fixed windows start with a group's first event as Redis sees it
	// (processing time) and end a window later.
	Fixed WindowType = "fixed"
	// Sliding windows trail each event in event time: the window is the
	// group's events of the last window before it.
	Sliding WindowType = "sliding"
)

// Alert is one first crossing of a rule's threshold by one group. Its JSON
// form is the alerts topic's message value.
type Alert struct {
	// ID names the crossing: the rule and the event that crossed. Every
	// redelivery of the crossing event yields the same ID.
	ID          string   `json:"id"`
	Rule        string   `json:"rule"`
	Description string   `json:"description,omitempty"`
	Severity    Severity `json:"severity"`
	// Mode is the rule's; shadow crossings are never notified.
	Mode Mode `json:"mode"`
	// Channel overrides the notifier's default channel when set.
	Channel string `json:"channel,omitempty"`
	// Metric says what Current and Threshold measure; Field is the field
	// whose distinct values a distinct rule counts.
	Metric Metric `json:"metric"`
	Field  string `json:"field,omitempty"`
	// GroupBy names the event fields of the group; GroupValues holds their
	// values in the same order. Values are personal data: they go to Slack,
	// never to logs or metrics.
	GroupBy     []string `json:"group_by"`
	GroupValues []string `json:"group_values"`
	// Group names the group as its Redis keys do (lua.Group.Encoding):
	// the dispatcher builds the alert's keys from it and the rule, and
	// takes none from the message.
	Group string `json:"group,omitempty"`
	// Definition is the fingerprint of the rule's definition when it
	// crossed (rules.Rule.Fingerprint, 8 hex digits): the crossing's mark,
	// which the dispatcher checks before it posts anything, is kept under
	// it. Empty in alerts written before alerts carried it: the rule in
	// force then names it.
	Definition string `json:"definition,omitempty"`
	// Current is the window's counter after the crossing event; Threshold
	// is the rule's. Amounts are in minor units of Currency.
	Current   int64         `json:"current"`
	Threshold int64         `json:"threshold"`
	Currency  string        `json:"currency,omitempty"`
	Window    time.Duration `json:"window_ns"`
	// WindowType is the rule's; empty means fixed (alerts written before
	// there were others).
	WindowType WindowType    `json:"window_type,omitempty"`
	Cooldown   time.Duration `json:"cooldown_ns"`
	// CooldownKey is the Redis key that holds the cooldown and RecordKey
	// the alert's delivery record; both share the hash tag of the rule's
	// counter.
	CooldownKey string `json:"cooldown_key"`
	RecordKey   string `json:"record_key"`
	// SilenceKey holds the silences of the (rule, group), RuleSilence
	// those of the rule in the group's hash tag. Empty in alerts written
	// before silences existed, which no silence stops.
	SilenceKey  string `json:"silence_key,omitempty"`
	RuleSilence string `json:"rule_silence_key,omitempty"`
	// Claimant is who claims the alert for delivery, never on the topic
	// nor parked: the dispatcher names the message that carried it by its
	// place (lua.ClaimantOf), or the parked alerts.
	Claimant string `json:"-"`
	// OrderID and EventID identify the event that crossed.
	OrderID string `json:"order_id"`
	EventID string `json:"event_id"`
	// At is when the crossing event occurred (its occurred_at, or when it
	// was processed if it carries none).
	At time.Time `json:"at"`
	// Evidence lists the latest orders of the window up to the crossing
	// one (first), as the rule's evidence setting asks; empty when the
	// rule keeps none.
	Evidence []Evidence `json:"evidence,omitempty"`
	// PublishedAt is when the engine published the alert, to the
	// millisecond, as its seal (Seal) in Redis says: the dispatcher drops
	// an alert published longer ago than its delivery record lives. Zero
	// in alerts written before alerts were sealed.
	PublishedAt time.Time `json:"published_at,omitzero"`
	// Links are built by the dispatcher from the templates of the rule and
	// the receiver in force (LinkTemplate), never taken from the message.
	Links []Link `json:"-"`
}

// Evidence is one order behind a crossing. Value is a distinct rule's value
// of its field, which the order brought; personal data, as GroupValues.
type Evidence struct {
	OrderID string    `json:"order_id,omitempty"`
	EventID string    `json:"event_id"`
	Amount  int64     `json:"amount"`
	At      time.Time `json:"at"`
	Value   string    `json:"value,omitempty"`
}

// MaxEvidence bounds the orders an alert lists.
const MaxEvidence = 20

// Shadow reports whether the alert comes from a shadow rule.
func (a *Alert) Shadow() bool { return a.Mode == ModeShadow }

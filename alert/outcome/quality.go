package outcome

import "time"

// Via says how an outcome came in: the via label of
// fraudwatch_outcomes_recorded_total.
type Via string

// Ways in.
const (
	ViaTopic Via = "topic" // the outcomes topic: chargebacks, disputes, reviews
	ViaSlack Via = "slack" // Slack's Fraud and Not fraud buttons
	ViaCLI   Via = "cli"   // fraudwatch label add
)

// RuleQuality is one rule's alerts judged by their outcomes over the
// Period up to now, as docs/outcomes.md defines them. An alert's outcome
// is fraud, legit or unclear; unclear is no verdict, so WithOutcome is
// Fraud + Legit and Precision is Fraud / WithOutcome (nil when none).
type RuleQuality struct {
	Rule   string        `json:"rule"`
	Period time.Duration `json:"period_ns"`
	// Alerts are the rule's alerts opened in the period.
	Alerts      int      `json:"alerts"`
	Fraud       int      `json:"fraud_alerts"`
	Legit       int      `json:"legit_alerts"`
	Unclear     int      `json:"unclear_alerts"`
	WithOutcome int      `json:"with_outcome"`
	Precision   *float64 `json:"precision"`
	// FraudOrders are the orders labelled fraud in the period; Caught
	// those of them an alert of the rule listed; Missed the rest.
	FraudOrders int `json:"fraud_orders"`
	Caught      int `json:"caught"`
	Missed      int `json:"missed"`
	// Truncated says the period held more alerts or fraud orders than a
	// read takes: the figures are those of the newest.
	Truncated bool `json:"truncated,omitempty"`
}

package alert

import (
	"context"
	"strings"
	"time"
)

// An alert's life after its post: open, acknowledged, resolved, and who
// has it. fraudwatch keeps it in Redis, one state an alert shared by every
// replica and every receiver of the alert; the receivers that can show it
// (Updater) are told of each change.

// Status is where an alert is in its life.
type Status string

// Statuses, in the order an alert goes through them.
const (
	StatusOpen         Status = "open"
	StatusAcknowledged Status = "acknowledged"
	StatusResolved     Status = "resolved"
)

// State is an alert's life as Redis keeps it. Who is a person as the place
// they acted in names them ("slack:U123", "cli:alice").
type State struct {
	Status     Status    `json:"status"`
	OpenedAt   time.Time `json:"opened_at,omitzero"`
	AckedBy    string    `json:"acknowledged_by,omitempty"`
	AckedAt    time.Time `json:"acknowledged_at,omitzero"`
	ResolvedBy string    `json:"resolved_by,omitempty"`
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
	Assignee   string    `json:"assignee,omitempty"`
	// Label is what a person said the alert itself was (Slack's Fraud and
	// Not fraud, `fraudwatch label add --alert`): it wins over its orders'
	// outcomes (docs/outcomes.md). A later label replaces it; a resolved
	// alert can still be labelled.
	Label      Label     `json:"label,omitempty"`
	LabelledBy string    `json:"labelled_by,omitempty"`
	LabelledAt time.Time `json:"labelled_at,omitzero"`
}

// Label is what became of an order, or what an alert was: an outcome
// (docs/outcomes.md).
type Label string

// Labels.
const (
	LabelFraud   Label = "fraud"
	LabelLegit   Label = "legit"
	LabelUnclear Label = "unclear"
)

// Labels lists every label.
var Labels = []Label{LabelFraud, LabelLegit, LabelUnclear}

// Valid reports whether l is one of Labels.
func (l Label) Valid() bool {
	return l == LabelFraud || l == LabelLegit || l == LabelUnclear
}

// Updater is a Notifier that can show an alert's new state where it
// delivered it, given the receipt its Notify returned (zero when it gave
// none): Slack edits the message in place, PagerDuty acknowledges or
// resolves its incident, the webhook posts the change. An update is
// idempotent: a crash may make the dispatcher send one twice. Its errors
// follow RetryPolicy, as Notify's do.
type Updater interface {
	Update(ctx context.Context, a Alert, st State, r Receipt) error
}

// Threader is a Notifier that can reply in the thread of a message it
// delivered: a repeat crossing of an alert's group while the alert is open
// or cooling down, and the end of a silence the alert's message started.
type Threader interface {
	// Reply posts repeat, a later crossing of the same rule and group, in
	// the thread of parent, the receipt of the alert that holds the
	// cooldown.
	Reply(ctx context.Context, repeat Alert, parent Receipt) (Receipt, error)
	// Note says text in the thread of parent.
	Note(ctx context.Context, parent Receipt, text string) error
}

// Link is a link an alert carries, built from its fields by a template the
// rule or the receiver sets (https://backoffice.example/orders/{order_id}).
// The dispatcher builds them from what it trusts, never from the message.
type Link struct {
	Text string `json:"text"`
	URL  string `json:"href"`
}

// Op is a change of an alert's life that a person asks for, from a button
// or the CLI.
type Op string

// Ops.
const (
	OpAcknowledge Op = "acknowledge"
	OpResolve     Op = "resolve"
	// OpAssign makes who the alert's assignee (Slack's Assign to me).
	OpAssign Op = "assign"
	// OpLabelFraud, OpLabelLegit and OpLabelUnclear label the alert (and
	// so its orders): Slack's Fraud and Not fraud, `fraudwatch label add`.
	OpLabelFraud   Op = "label_fraud"
	OpLabelLegit   Op = "label_legit"
	OpLabelUnclear Op = "label_unclear"
)

// LabelOp is the op that labels an alert l.
func LabelOp(l Label) Op { return Op("label_" + string(l)) }

// Label is the label op gives an alert; false when op labels nothing.
func (op Op) Label() (Label, bool) {
	l, ok := strings.CutPrefix(string(op), "label_")
	if !ok || !Label(l).Valid() {
		return "", false
	}
	return Label(l), true
}

// Ref names one alert as its keys in Redis do: its rule, its group as the
// keys encode it (Alert.Group) and the event that crossed. A button's value
// carries it; the open alerts' index maps an alert's ID to it.
type Ref struct {
	Rule    string `json:"rule"`
	Group   string `json:"group"`
	EventID string `json:"event_id"`
}

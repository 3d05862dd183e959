package dispatch

import (
	"context"

	"github.com/fraudwatch/fraudwatch/alert"
)

// batch is what one HandleMessages call holds back: the claimed alerts
// past the budget, which wait for the end of the batch, and the channels
// found past it, whose later alerts in the batch wait with them.
type batch struct {
	digests alert.Digester // nil: the notifier sends no digests, and has no budget
	held    []heldAlert
	ids     map[string]bool
	spent   map[string]bool
	// generation ends the wait for the budget (HandleMessagesIn).
	generation context.Context
}

// heldAlert is a claimed alert past the budget, with its message's index
// in the batch.
type heldAlert struct {
	index int
	alert alert.Alert
}

func newBatch(n alert.Notifier) *batch {
	dg, _ := n.(alert.Digester)
	return &batch{digests: dg, ids: map[string]bool{}, spent: map[string]bool{}}
}

func (b *batch) hold(i int, a alert.Alert) {
	b.held = append(b.held, heldAlert{index: i, alert: a})
	b.ids[a.ID] = true
}

// carries reports whether the batch holds an alert already.
func (b *batch) carries(id string) bool { return b.ids[id] }

// flush sends the held alerts, then answers as HandleMessages does: n
// messages may be committed, err says why not more. Should a message of
// the held alerts fail, the messages from the first held one on come round
// again (those settled meanwhile are recognised by their records).
func (d *Dispatcher) flush(ctx context.Context, b *batch, n int, err error) (int, error) {
	if len(b.held) == 0 {
		return n, err
	}
	if ferr := d.sendHeld(ctx, b); ferr != nil {
		return b.held[0].index, ferr
	}
	return n, err
}

// sendHeld posts the held alerts, each rule's as one message in the order
// of its first alert, each message once the budget allows it: a rule's
// only alert as itself, several as a digest. Whatever arrives on the
// partition meanwhile waits on it, and forms the next batch's digests.
func (d *Dispatcher) sendHeld(ctx context.Context, b *batch) error {
	var order []string
	byRule := map[string][]alert.Alert{}
	for _, h := range b.held {
		if byRule[h.alert.Rule] == nil {
			order = append(order, h.alert.Rule)
		}
		byRule[h.alert.Rule] = append(byRule[h.alert.Rule], h.alert)
	}
	for _, rule := range order {
		alerts := byRule[rule]
		if _, err := d.takeBudget(ctx, alerts[0].Channel, b.generation); err != nil {
			return err
		}
		if err := d.send(ctx, alerts...); err != nil {
			return err
		}
	}
	return nil
}

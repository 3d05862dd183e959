package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/lua"
)

// waitingStore is what the dispatcher needs from Redis for the alerts that
// wait for their destination's budget (lua's alert_wait).
type waitingStore interface {
	Wait(ctx context.Context, k lua.WaitingKeys, rule, id string, whole, compact []byte, channel string, limit int, lifetime time.Duration) (lua.Wait, error)
	TakeWaiting(ctx context.Context, k lua.WaitingKeys, rule string) (int, error)
	Sealed(ctx context.Context, k lua.WaitingKeys) (map[string]string, error)
	WaitDone(ctx context.Context, k lua.WaitingKeys, rule string, ids ...string) (int, error)
	WaitingRules(ctx context.Context, index string) (map[string]lua.RuleWaiting, error)
}

// waitingAlert is an alert as the waiting store keeps it: as the parked
// hash does, with its keys left out (they are built again from its rule,
// group and event id), and, but for the first of a digest, its evidence
// and description too, which a digest does not show.
type waitingAlert struct {
	parkedAlert
	// Whole: kept with its evidence and description; a rule's only alert
	// waiting is posted as itself, and it comes first in a digest.
	Whole bool `json:"whole,omitempty"`
}

// wait keeps a claimed alert past its destination's budget in Redis, for
// the drainer; then its message may be committed. When MaxWaiting alerts
// wait already, it is not kept: an error then keeps its message on its
// partition, retried, as parking does at MaxParked.
func (d *Dispatcher) wait(ctx context.Context, a alert.Alert, dest string) error {
	whole, compact, err := d.waitingForms(a)
	if err != nil {
		return fmt.Errorf("alert: wait %s: %w", a.ID, err)
	}
	w, err := d.claims.Wait(ctx, d.stores.Waiting(a.Rule), a.Rule, a.ID, whole, compact, a.Channel, d.cfg.MaxWaiting, d.claims.Retention())
	if err != nil {
		return fmt.Errorf("alert: wait %s: %w", a.ID, err)
	}
	if w == lua.WaitFull {
		d.log.Error("alert past its budget not kept: as many alerts as max waiting wait already; it stays on its partition",
			"rule", a.Rule, "alert_id", a.ID, "channel", destinationLabel(dest), "max_waiting", d.cfg.MaxWaiting)
		return fmt.Errorf("%w: %s: past its budget, and %d alerts wait already", ErrNotDelivered, a.ID, d.cfg.MaxWaiting)
	}
	// Kept first, then the claim handed over, as park does: a crash in
	// between leaves the message uncommitted, to claim and keep again (it
	// waits already), and the drainer leaves an alert whose claim is not
	// handed over yet where it is.
	if err := d.settle(ctx, lua.SettleParked, "", a); err != nil {
		return fmt.Errorf("alert: wait %s: %w", a.ID, err)
	}
	d.waits.mark(dest)
	return nil
}

// waitingForms are a's two forms in the waiting store: whole, and compact,
// which only a Digester's digests show; any other notifier's alerts wait
// whole, each to be its own message.
func (d *Dispatcher) waitingForms(a alert.Alert) (whole, compact []byte, err error) {
	if a.Group == "" {
		a.Group = d.keys.Group(a.GroupValues).Encoding() // as trust took it
	}
	a.CooldownKey, a.RecordKey, a.SilenceKey, a.RuleSilence = "", "", "", ""
	now := time.Now()
	if whole, err = json.Marshal(waitingAlert{parkedAlert{a, now}, true}); err != nil {
		return nil, nil, err
	}
	if _, digests := d.notifier.(alert.Digester); !digests {
		return whole, whole, nil
	}
	a.Evidence, a.Description = nil, ""
	compact, err = json.Marshal(waitingAlert{parkedAlert{a, now}, false})
	return whole, compact, err
}

// readWaiting decodes a rule's sealed alerts, whole ones first, then by
// when they came in; gone are those to drop: unreadable, or older than
// their records live; compact names those kept compact. Each goes to its
// rule's channel in force.
func (d *Dispatcher) readWaiting(all map[string]string) (alerts []alert.Alert, gone []string, compact map[string]bool) {
	compact = map[string]bool{}
	came := map[string]waitingAlert{}
	for id, data := range all {
		var w waitingAlert
		if err := json.Unmarshal([]byte(data), &w); err != nil || w.ID != id || d.waitingKeys(&w.Alert) != nil {
			d.log.Warn("unreadable waiting alert forgotten")
			gone = append(gone, id)
			continue
		}
		if age := time.Since(w.ParkedAt); age > d.claims.Retention() {
			d.dropped(DroppedStale, "rule", w.Rule, "alert_id", w.ID, "waiting", true, "age", age.Round(time.Second).String())
			gone = append(gone, id)
			continue
		}
		d.followRule(&w.Alert)
		if rs, ok := d.inForce(w.Rule); ok && !w.Whole {
			// Kept without it: rendered again, as trust renders it.
			w.Description = alert.Cut(alert.Describe(rs.Description, &w.Alert), 1024)
		}
		came[id] = w
		compact[id] = !w.Whole
		alerts = append(alerts, w.Alert)
	}
	slices.SortFunc(alerts, func(a, b alert.Alert) int {
		wa, wb := came[a.ID], came[b.ID]
		if wa.Whole != wb.Whole {
			if wa.Whole {
				return -1
			}
			return 1
		}
		return cmp.Or(wa.ParkedAt.Compare(wb.ParkedAt), cmp.Compare(a.ID, b.ID))
	})
	return alerts, gone, compact
}

// waitingKeys builds again the keys a waiting alert was kept without,
// from its rule, group and event id, as trust does.
func (d *Dispatcher) waitingKeys(a *alert.Alert) error {
	g, err := d.keys.ParseGroup(a.Group)
	if err != nil {
		return err
	}
	a.CooldownKey = d.keys.Cooldown(g, a.Rule)
	a.RecordKey = d.keys.AlertRecord(g, a.Rule, a.EventID)
	a.SilenceKey = d.keys.Silences(g, a.Rule)
	a.RuleSilence = d.keys.RuleSilences(g, a.Rule)
	return nil
}

// waits is what this replica knows of the alerts waiting in Redis and of
// its drains: the destinations with alerts waiting (as the last drain pass
// read them, and those it kept since), and per destination whether a drain
// runs, until when it backs off, and which rule it sent last.
type waits struct {
	mu       sync.Mutex
	waiting  map[string]bool
	running  map[string]bool
	notUntil map[string]time.Time
	failures map[string]int
	last     map[string]string
}

func (w *waits) busy(dest string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting[dest]
}

func (w *waits) mark(dest string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == nil {
		w.waiting = map[string]bool{}
	}
	w.waiting[dest] = true
}

// seen replaces what is known to wait by what a drain pass read.
func (w *waits) seen(dests map[string][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting = map[string]bool{}
	for dest := range dests {
		w.waiting[dest] = true
	}
}

// start reports whether a drain of dest may start now (none runs, and it
// does not back off), and marks it running.
func (w *waits) start(dest string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running == nil {
		w.running, w.notUntil, w.failures, w.last = map[string]bool{}, map[string]time.Time{}, map[string]int{}, map[string]string{}
	}
	if w.running[dest] || now.Before(w.notUntil[dest]) {
		return false
	}
	w.running[dest] = true
	return true
}

// stop ends a drain of dest: after a failure, the next waits backoff
// (doubling from lo to hi), or the receiver's Retry-After if longer.
func (w *waits) stop(dest string, failed bool, retryAfter, lo, hi time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.running, dest)
	if !failed {
		delete(w.failures, dest)
		delete(w.notUntil, dest)
		return
	}
	backoff := lo << min(w.failures[dest], 16)
	w.failures[dest]++
	w.notUntil[dest] = time.Now().Add(max(min(backoff, hi), retryAfter))
}

// order is the rules of dest in the order a drain tries them: by name,
// from the one after the rule it sent last, so that each has its turn.
func (w *waits) order(dest string, rules []string) []string {
	slices.Sort(rules)
	w.mu.Lock()
	last := w.last[dest]
	w.mu.Unlock()
	i, _ := slices.BinarySearch(rules, last)
	if i < len(rules) && rules[i] == last {
		i++
	}
	return append(rules[i:len(rules):len(rules)], rules[:i]...)
}

func (w *waits) sent(dest, rule string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[dest] = rule
}

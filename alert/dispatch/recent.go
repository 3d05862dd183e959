package dispatch

import (
	"sync"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
)

// Settled is how this dispatcher settled one alert. It names the group's
// fields but not their values, which are personal data.
type Settled struct {
	At        time.Time // when it was settled
	Rule      string
	ID        string
	OrderID   string
	GroupBy   []string
	Metric    alert.Metric
	Current   int64
	Threshold int64
	Currency  string
	// Outcome is sent, digested, failed, parked, or the reason it was not
	// notified (SuppressedCooldown, SuppressedSilenced, SuppressedShadow).
	Outcome string
	// Receiver is the receiver whose dispatcher settled it.
	Receiver string
}

// recentSize is how many settled alerts Recent keeps.
const recentSize = 50

// recent is a ring of the latest settled alerts.
type recent struct {
	mu   sync.Mutex
	ring [recentSize]Settled
	n    int // alerts added in all
}

func (r *recent) add(a *alert.Alert, outcome, receiver string) {
	s := Settled{At: time.Now(), Rule: a.Rule, ID: a.ID, OrderID: a.OrderID, GroupBy: append([]string(nil), a.GroupBy...),
		Metric: a.Metric, Current: a.Current, Threshold: a.Threshold, Currency: a.Currency, Outcome: outcome, Receiver: receiver}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.n%recentSize] = s
	r.n++
}

// Recent lists the alerts this dispatcher settled last, newest first: at
// most 50, since the process started. A redelivered alert found settled
// before is not listed again.
func (d *Dispatcher) Recent() []Settled {
	r := &d.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Settled, 0, min(r.n, recentSize))
	for i := r.n - 1; i >= 0 && i >= r.n-recentSize; i-- {
		out = append(out, r.ring[i%recentSize])
	}
	return out
}

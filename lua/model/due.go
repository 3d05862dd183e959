package model

import (
	"container/heap"
	"time"
)

// DueKey is a key and when it is due, as time after a clock's base.
type DueKey struct {
	At  time.Duration
	Key string
}

// DueKeys is a queue of keys by due time, the first due first: the Store's
// TTLs, and the backtest's clock of miniredis's (--lua). A key may be in it
// more than once; the caller keeps which entry is a key's own.
type DueKeys struct{ q dueQueue }

// Len is how many entries it holds.
func (d *DueKeys) Len() int { return len(d.q) }

// Push queues key, due at at.
func (d *DueKeys) Push(at time.Duration, key string) { heap.Push(&d.q, DueKey{At: at, Key: key}) }

// PopDue takes the first entry due by until; false when none is.
func (d *DueKeys) PopDue(until time.Duration) (DueKey, bool) {
	if len(d.q) == 0 || d.q[0].At > until {
		return DueKey{}, false
	}
	return heap.Pop(&d.q).(DueKey), true
}

// dueQueue is container/heap's side of DueKeys.
type dueQueue []DueKey

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].At < q[j].At }
func (q dueQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *dueQueue) Push(x any)        { *q = append(*q, x.(DueKey)) }
func (q *dueQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	*q = old[:len(old)-1]
	return d
}

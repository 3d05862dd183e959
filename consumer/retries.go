package consumer

import "hash/maphash"

// Retries catches a producer's retries in one partition: a second record of
// an event (same event_id) at a later offset, from a producer that retried
// without idempotence. It remembers the ids (64-bit hashes) of the records
// at the partition's last Window offsets. A record is a retry when its id
// was seen at an earlier offset among them.
//
// Seen checks a record and holds it pending; Commit keeps the pending
// records, Discard forgets them, so a failed batch tried again finds what
// it found the first time. A record at or below the last offset kept is a
// redelivery, never a retry: the scripts' offsets catch those. Not safe for
// concurrent use: one partition's loop owns it.
type Retries struct {
	window int64
	seed   maphash.Seed
	// ring holds the kept records in offset order, head the oldest; a
	// record leaves it once it is more than the window behind.
	ring       []slot
	head, size int
	// ids maps an id's hash to the last offset it was seen at, kept or
	// pending: Seen writes it at once, and Discard undoes what it wrote.
	ids  map[uint64]int64
	last int64 // the offset kept last (-1: none)
	// pending are the records seen since the last Commit or Discard, in
	// order, each with what ids held for its hash before.
	pending []seen
}

type slot struct {
	hash   uint64
	offset int64
}

// seen is a pending record, and what ids held for its hash before it.
type seen struct {
	slot
	before int64
	had    bool
}

// NewRetries returns an empty memory of the last window offsets of a
// partition; 0 turns the check off. window is bounded by package config
// (about 50 bytes a record); a negative one is taken as 0.
func NewRetries(window int) *Retries {
	window = max(window, 0)
	return &Retries{
		window: int64(window),
		seed:   maphash.MakeSeed(), // the hashes never leave the process
		ring:   make([]slot, window),
		ids:    make(map[uint64]int64, window),
		last:   -1,
	}
}

// Seen reports whether the record at offset, whose event id is id, is a
// retry: the same id at an earlier offset at most the window before,
// among the records kept or pending. The record is then pending. A nil
// Retries, or one whose window is 0, reports none.
func (r *Retries) Seen(id string, offset int64) bool {
	if r == nil || r.window == 0 || offset <= r.last {
		return false
	}
	if n := len(r.pending); n > 0 && offset <= r.pending[n-1].offset {
		return false // seen again within the attempt
	}
	h := maphash.String(r.seed, id)
	// The id's latest offset decides, pending or kept.
	at, ok := r.ids[h]
	r.pending = append(r.pending, seen{slot{h, offset}, at, ok})
	r.ids[h] = offset
	return ok && at >= offset-r.window
}

// Commit keeps the pending records: their batch has been handled.
func (r *Retries) Commit() {
	if r == nil {
		return
	}
	for _, p := range r.pending {
		r.keep(p.slot)
	}
	r.pending = r.pending[:0]
}

// Discard forgets the pending records: their batch will be tried again.
// What Seen wrote of them is undone, the latest first.
func (r *Retries) Discard() {
	if r == nil {
		return
	}
	for i := len(r.pending) - 1; i >= 0; i-- {
		if p := r.pending[i]; p.had {
			r.ids[p.hash] = p.before
		} else {
			delete(r.ids, p.hash)
		}
	}
	r.pending = r.pending[:0]
}

// keep adds s, past the last offset kept, first evicting the records that
// leave the window, oldest first: then fewer than window offsets are left,
// so the ring has room. ids holds s already (Seen).
func (r *Retries) keep(s slot) {
	for r.size > 0 && r.ring[r.head].offset <= s.offset-r.window {
		old := r.ring[r.head]
		if r.ids[old.hash] == old.offset { // not seen again since
			delete(r.ids, old.hash)
		}
		r.head = (r.head + 1) % len(r.ring)
		r.size--
	}
	r.ring[(r.head+r.size)%len(r.ring)] = s
	r.size++
	r.last = s.offset
}

// Len is how many records are kept.
func (r *Retries) Len() int {
	if r == nil {
		return 0
	}
	return r.size
}

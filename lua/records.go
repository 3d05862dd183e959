package lua

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// An alert's record for one receiver (Keys.Record) is a hash that
// alert_claim and alert_settle write: its state, who claimed it, and the
// receiver's receipt. Record reads it.

// Record is an alert's record for one receiver.
type Record struct {
	// State is pending, sent, suppressed, silenced or failed; "" when there
	// is no record.
	State string
	// Claimant claimed it last (AlertClaim.Claimant); "" in a record of a
	// version before records per receiver (Legacy).
	Claimant string
	// Receipt is what the receiver gave back for the message that carried
	// it, as the dispatcher wrote it; "" for none.
	Receipt string
	// Legacy is true when the record is one a version before records per
	// receiver wrote: its state alone.
	Legacy bool
}

// Record reads an alert's record for one receiver (recordKey), or, when
// there is none, its record as versions before records per receiver wrote
// it (legacyKey, "" for none). Both keys share a hash tag: one slot.
func (s *Scripts) Record(ctx context.Context, recordKey, legacyKey string) (Record, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGetAll(ctx, recordKey)
	var old *redis.StringCmd
	if legacyKey != "" {
		old = pipe.Get(ctx, legacyKey)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Record{}, fmt.Errorf("lua: read an alert's record: %w", err)
	}
	if f := h.Val(); len(f) > 0 {
		return Record{State: f["state"], Claimant: f["claimant"], Receipt: f["receipt"]}, nil
	}
	if old != nil && old.Err() == nil {
		return Record{State: old.Val(), Legacy: true}, nil
	}
	return Record{}, nil
}

// MaxReceiver bounds a receiver's name.
const MaxReceiver = 32

// ValidReceiver reports whether name can name a receiver in its records'
// keys: 1 to MaxReceiver bytes of a-z, 0-9, '-' and '_', a letter first.
// No ':' (the key's separator) and no brace (a hash tag).
func ValidReceiver(name string) error {
	if name == "" || len(name) > MaxReceiver || name[0] < 'a' || name[0] > 'z' {
		return fmt.Errorf("receiver name %q: must be 1 to %d of a-z, 0-9, - and _, a letter first", name, MaxReceiver)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("receiver name %q: must be 1 to %d of a-z, 0-9, - and _, a letter first", name, MaxReceiver)
		}
	}
	return nil
}

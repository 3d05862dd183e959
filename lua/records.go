package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// An alert's record for one receiver (Keys.Record) is a hash that
// alert_claim, alert_settle and alert_ack write: its state, who claimed it,
// the receiver's receipt, and who acknowledged it. Record reads it.

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
	// AckedBy acknowledged it at AckedAt; "" if no one did.
	AckedBy string
	AckedAt time.Time
	// Shown is the version of the alert's life (Life.Version) the receiver
	// shows, as alert_shown recorded it: 0 as first sent.
	Shown int64
	// Legacy is true when the record is one a version before records per
	// receiver wrote: its state alone.
	Legacy bool
}

// recordOf reads a record's hash; State "" when there is none.
func recordOf(f map[string]string) Record {
	r := Record{State: f["state"], Claimant: f["claimant"], Receipt: f["receipt"], AckedBy: f["acked_by"],
		AckedAt: millis(f["acked_at"])}
	r.Shown, _ = strconv.ParseInt(f["shown"], 10, 64)
	return r
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
		return recordOf(f), nil
	}
	if old != nil && old.Err() == nil {
		return Record{State: old.Val(), Legacy: true}, nil
	}
	return Record{}, nil
}

// Ack is an acknowledgement as an alert's record keeps it.
type Ack struct {
	By string
	At time.Time
	// Before is true when the alert was acknowledged before (By, at At):
	// the first acknowledgement stays.
	Before bool
}

// ErrNoRecord is AcknowledgeAlert's answer for an alert with no record for
// the receiver: never claimed for it, or its record ended (Retention).
var ErrNoRecord = errors.New("no record of the alert")

// AcknowledgeAlert records that who acknowledged the alert whose record
// for one receiver is recordKey (alert_ack), by Redis's clock; an alert
// acknowledged before keeps its first acknowledgement, which it returns.
func (s *Scripts) AcknowledgeAlert(ctx context.Context, recordKey, who string) (Ack, error) {
	v, err := s.run(ctx, alertAck, []string{recordKey}, who).Result()
	if err != nil {
		return Ack{}, s.redisError(ctx, AlertAckName, err)
	}
	if n, ok := v.(int64); ok && n == -1 {
		return Ack{}, s.fail(AlertAckName, ErrInvalidArguments)
	}
	reply, _ := v.([]any)
	var code int64
	if len(reply) > 0 {
		code, _ = reply[0].(int64)
	}
	switch {
	case len(reply) == 1 && code == 0:
		return Ack{}, fmt.Errorf("lua: %s: %w", AlertAckName, ErrNoRecord)
	case len(reply) == 3 && (code == 1 || code == 2):
		by, _ := reply[1].(string)
		at, _ := reply[2].(string)
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil && by != "" {
			return Ack{By: by, At: time.UnixMilli(ms), Before: code == 2}, nil
		}
	}
	return Ack{}, s.fail(AlertAckName, fmt.Errorf("%w: %v", ErrUnexpectedReply, v))
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

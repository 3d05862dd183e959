package alert

import (
	"encoding/json"
	"errors"
	"fmt"
)

// MaxMessageBytes is the largest alert message the alerts topic's writer
// (dispatch.Topic) sends (kafka-go's default, just under the broker's
// default max.message.bytes). Package rules bounds every field of an alert so that it stays far below it; a
// topic whose own limit is set lower may still refuse one (TooLargeError).
const MaxMessageBytes = 1 << 20

// TooLargeError reports the alerts of a Publish (dispatch.Topic) that the
// alerts topic, or the writer, refused for their size, each written alone:
// no retry can write them. Every other alert of the call was written.
type TooLargeError struct {
	// Refused holds the indexes, among Publish's alerts, of those refused.
	Refused []int
	// Err is the refusal of the last of them.
	Err error
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("alert: %d alerts too large for the alerts topic: %v", len(e.Refused), e.Err)
}

func (e *TooLargeError) Unwrap() error { return e.Err }

// Decode reads an alert from an alerts-topic message value.
func Decode(value []byte) (Alert, error) {
	var a Alert
	if err := json.Unmarshal(value, &a); err != nil {
		return Alert{}, fmt.Errorf("alert: decode: %w", err)
	}
	if a.ID == "" || a.Rule == "" || a.CooldownKey == "" || a.RecordKey == "" {
		return Alert{}, errors.New("alert: decode: id, rule, cooldown_key and record_key are required")
	}
	return a, nil
}

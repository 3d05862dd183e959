package alert_test

import (
	"testing"

	"github.com/fraudwatch/fraudwatch/alert"
)

func TestDecodeRejectsWhatItCannotDeliver(t *testing.T) {
	for _, in := range []string{
		``, `not json`, `[]`, `{}`,
		`{"rule":"r","cooldown_key":"c","record_key":"k"}`, // no id
		`{"id":"r/e","cooldown_key":"c","record_key":"k"}`, // no rule
		`{"id":"r/e","rule":"r","record_key":"k"}`,         // no cooldown key
		`{"id":"r/e","rule":"r","cooldown_key":"c"}`,       // no record key
		`{"id":"r/e","rule":"r","cooldown_key":"c","record_key":"k","current":"many"}`,
	} {
		if _, err := alert.Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) accepted it", in)
		}
	}
}

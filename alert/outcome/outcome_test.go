package outcome_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/alert/outcome"
)

func TestDecode(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	good := `{"type":"outcome","order_id":"o-1","outcome":"fraud","source":"chargeback","occurred_at":"2026-12-01T10:00:00Z"}`
	with := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	for _, tc := range []struct {
		name, in string
		reason   outcome.Reason
		field    string
	}{
		{"good", good, "", ""},
		{"extra members ignored", with(`"type"`, `"x":[1,{}],"type"`), "", ""},
		{"oversized", with(`"o-1"`, `"`+strings.Repeat("x", 5000)+`"`), outcome.ReasonOversized, ""},
		{"not json", `{"type":`, outcome.ReasonMalformed, ""},
		{"array", `[1]`, outcome.ReasonMalformed, ""},
		{"invalid utf-8", with("o-1", "o-\xff"), outcome.ReasonMalformed, ""},
		{"number order", with(`"o-1"`, `12`), outcome.ReasonMalformed, "order_id"},
		{"no type", with(`"type":"outcome",`, ``), outcome.ReasonMissingField, "type"},
		{"an order event", with(`"type":"outcome"`, `"type":"order"`), outcome.ReasonInvalidType, "type"},
		{"no order", with(`"order_id":"o-1",`, ``), outcome.ReasonMissingField, "order_id"},
		{"empty order", with(`"o-1"`, `""`), outcome.ReasonInvalidOrder, "order_id"},
		{"long order", with(`"o-1"`, `"`+strings.Repeat("x", 129)+`"`), outcome.ReasonInvalidOrder, "order_id"},
		{"control in order", with(`"o-1"`, `"o\n1"`), outcome.ReasonInvalidOrder, "order_id"},
		{"alert and order", with(`"order_id"`, `"alert_id":"r/e","order_id"`), outcome.ReasonInvalidAlert, "alert_id"},
		{"alert without event", with(`"order_id":"o-1"`, `"alert_id":"r/"`), outcome.ReasonInvalidAlert, "alert_id"},
		{"empty by", with(`"type"`, `"by":"","type"`), outcome.ReasonInvalidBy, "by"},
		{"by with a newline", with(`"type"`, `"by":"a\nb","type"`), outcome.ReasonInvalidBy, "by"},
		{"unknown outcome", with(`"fraud"`, `"maybe"`), outcome.ReasonInvalidLabel, "outcome"},
		{"upper-case outcome", with(`"fraud"`, `"FRAUD"`), outcome.ReasonInvalidLabel, "outcome"},
		{"no source", with(`"source":"chargeback",`, ``), outcome.ReasonMissingField, "source"},
		{"source 65 bytes", with(`"chargeback"`, `"`+strings.Repeat("s", 65)+`"`), outcome.ReasonInvalidSource, "source"},
		{"bad time", with(`2026-12-01T10:00:00Z`, `yesterday`), outcome.ReasonInvalidTime, "occurred_at"},
		{"time ahead", with(`2026-12-01T10:00:00Z`, `2026-12-08T10:00:00Z`), outcome.ReasonInvalidTime, "occurred_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := outcome.Decode([]byte(tc.in), now)
			if err == nil && tc.reason != "" {
				t.Fatalf("Decode = %+v, want %s", o, tc.reason)
			}
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				want := outcome.Outcome{OrderID: "o-1", Label: alert.LabelFraud, Source: "chargeback",
					OccurredAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
				if o != want {
					t.Fatalf("Decode = %+v, want %+v", o, want)
				}
				back, err := outcome.Decode(o.Record(), now)
				if err != nil || back != o {
					t.Fatalf("Decode(Record()) = %+v, %v", back, err)
				}
				return
			}
			var ie *outcome.InvalidError
			if !errors.As(err, &ie) || ie.Reason != tc.reason || ie.Field != tc.field {
				t.Fatalf("Decode error = %v, want reason %s field %q", err, tc.reason, tc.field)
			}
			if strings.Contains(err.Error(), "o-1") || strings.Contains(err.Error(), "chargeback") {
				t.Fatalf("error %q carries a value", err)
			}
		})
	}
}

func TestDecodeAlertLabel(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	in := `{"type":"outcome","alert_id":"card-burst/e-9","outcome":"legit","source":"cli","by":"cli:alice","occurred_at":"2026-12-05T10:00:00Z"}`
	o, err := outcome.Decode([]byte(in), now)
	want := outcome.Outcome{AlertID: "card-burst/e-9", Label: alert.LabelLegit, Source: "cli", By: "cli:alice",
		OccurredAt: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)}
	if err != nil || o != want {
		t.Fatalf("Decode = %+v, %v; want %+v", o, err, want)
	}
	if back, err := outcome.Decode(o.Record(), now); err != nil || back != o {
		t.Fatalf("Decode(Record()) = %+v, %v", back, err)
	}
}

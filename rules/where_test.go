package rules_test

import (
	"fmt"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/event"
)

// where: as docs/configuration.md's Rules section has it, parsed from YAML as a rules
// file gives it, against events as they arrive.
func TestWhereMatches(t *testing.T) {
	tests := []struct {
		name  string
		where string // the rule's where: mapping, flow style
		event string // the event's fields beyond the required ones
		want  bool
	}{
		{"not: a value listed", `{payment_method: {not: [gift_card]}}`, `"payment_method":"gift_card"`, false},
		{"not: another value", `{payment_method: {not: [gift_card]}}`, `"payment_method":"card"`, true},
		{"not: the field absent", `{payment_method: {not: [gift_card]}}`, ``, true},
		{"a list: the field absent", `{payment_method: [card]}`, ``, false},
		{"in: the field absent", `{payment_method: {in: [card]}}`, ``, false},
		{"a list: one of it", `{payment_method: [card, bank]}`, `"payment_method":"bank"`, true},
		{"a list: none of it", `{payment_method: [card, bank]}`, `"payment_method":"cash"`, false},
		{"a list's integer matches the JSON integer", `{tier: [1]}`, `"tier":1`, true},
		{"a list's integer does not match 1.0", `{tier: [1]}`, `"tier":1.0`, false},
		{"a list's true matches the JSON true", `{vip: [true]}`, `"vip":true`, true},
		{"a list's true does not match false", `{vip: [true]}`, `"vip":false`, false},
		{"a range: an integer within", `{tier: {gte: 1, lt: 10}}`, `"tier":9`, true},
		{"a range: its upper bound excluded", `{tier: {gte: 1, lt: 10}}`, `"tier":10`, false},
		{"a range: its lower bound included", `{tier: {gte: 1, lt: 10}}`, `"tier":1`, true},
		{"a range: gt excludes its bound", `{tier: {gt: 1}}`, `"tier":1`, false},
		{"a range: lte includes its bound", `{tier: {lte: 1}}`, `"tier":1`, true},
		{"a range: an integer as a string", `{tier: {gte: 1}}`, `"tier":"5"`, true},
		{"a range: 1.5 is within none", `{tier: {gte: 1}}`, `"tier":1.5`, false},
		{"a range: 1e3 is within none", `{tier: {gte: 1}}`, `"tier":1e3`, false},
		{"a range: abc is within none", `{tier: {gte: 1}}`, `"tier":"abc"`, false},
		{"a range: the field absent", `{tier: {gte: 1}}`, ``, false},
		{"amount ranges compare minor units", `{amount: {gte: 100, lt: 200}}`, ``, true}, // amount 150
		{"amount below the range", `{amount: {gte: 200}}`, ``, false},
		{"currency is upper-cased on both sides", `{currency: [krw]}`, `"currency":"krw"`, true},
		{"in and a range together: both hold", `{tier: {in: [1, 5, 50], lt: 10}}`, `"tier":5`, true},
		{"in and a range together: out of the range", `{tier: {in: [1, 5, 50], lt: 10}}`, `"tier":50`, false},
		{"not and a range together: excluded", `{tier: {not: [5], gte: 0}}`, `"tier":5`, false},
		{"not and a range together: both hold", `{tier: {not: [5], gte: 0}}`, `"tier":6`, true},
		{"every condition must hold", `{ip: [a], tier: {gte: 5}}`, `"ip":"a","tier":4`, false},
		{"every condition holds", `{ip: [a], tier: {gte: 5}}`, `"ip":"a","tier":5`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := fmt.Sprintf("rules:\n  - {name: r, metric: count, group_by: [customer_id], window: 1m, threshold: 1, where: %s}\n", tt.where)
			rs, err := config.ParseRules([]byte(yaml), "rules.yaml")
			if err != nil {
				t.Fatal(err)
			}
			fields := `{"event_id":"e","type":"order","order_id":"o","customer_id":"c","amount":150`
			if tt.event != "" {
				fields += "," + tt.event
			}
			ev, err := event.Decode([]byte(fields+"}"), "")
			if err != nil {
				t.Fatal(err)
			}
			if got := rs[0].Matches(ev); got != tt.want {
				t.Errorf("where %s on %s: %v, want %v", tt.where, tt.event, got, tt.want)
			}
		})
	}
}

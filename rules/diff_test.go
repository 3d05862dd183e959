package rules_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/alert"
	"github.com/fraudwatch/fraudwatch/rules"
)

func TestDiff(t *testing.T) {
	base := []rules.Rule{rule("a", alert.Count, 3, "customer_id"), rule("b", alert.Amount, 1000, "card_fingerprint"), rule("gone", alert.Count, 5, "ip")}
	edit := func(f func([]rules.Rule) []rules.Rule) []rules.Rule {
		rs := append([]rules.Rule(nil), base...)
		return f(rs)
	}
	tests := []struct {
		name string
		new  []rules.Rule
		want []rules.Change
	}{
		{"nothing", base, nil},
		{"a threshold keeps the windows", edit(func(rs []rules.Rule) []rules.Rule { rs[0].Threshold = 4; return rs }),
			[]rules.Change{{Rule: "a", Kind: "changed", Fields: []rules.FieldChange{{"threshold", "3", "4"}}}}},
		{"a window resets them", edit(func(rs []rules.Rule) []rules.Rule { rs[1].Window = 90 * time.Second; return rs }),
			[]rules.Change{{Rule: "b", Kind: "changed", Fields: []rules.FieldChange{{"window", "1m", "1m30s"}}, Resets: true}}},
		{"sliding resets them", edit(func(rs []rules.Rule) []rules.Rule {
			rs[0].WindowType, rs[0].Lateness = alert.Sliding, time.Minute
			return rs
		}), []rules.Change{{Rule: "a", Kind: "changed", Fields: []rules.FieldChange{
			{"window_type", "fixed", "sliding"}, {"allowed_lateness", "0", "1m"}}, Resets: true}}},
		{"a filter resets them", edit(func(rs []rules.Rule) []rules.Rule {
			lo := int64(100)
			rs[0].Where = []rules.Condition{{Field: "amount", GTE: &lo}, {Field: "currency", In: []string{"KRW", "USD"}}}
			return rs
		}), []rules.Change{{Rule: "a", Kind: "changed", Fields: []rules.FieldChange{
			{"where", "none", "amount >= 100; currency in [KRW, USD]"}}, Resets: true}}},
		{"evidence keeps them", edit(func(rs []rules.Rule) []rules.Rule { rs[0].Evidence = 5; return rs }),
			[]rules.Change{{Rule: "a", Kind: "changed", Fields: []rules.FieldChange{{"evidence", "0", "5"}}}}},
		{"added and removed", edit(func(rs []rules.Rule) []rules.Rule {
			return append(rs[:2], rule("new", alert.Count, 2, "email"))
		}), []rules.Change{{Rule: "new", Kind: "added", Resets: true}, {Rule: "gone", Kind: "removed"}}},
		{"severity, mode and cooldown keep them", edit(func(rs []rules.Rule) []rules.Rule {
			rs[2].Severity, rs[2].Mode, rs[2].Cooldown = alert.SeverityCritical, alert.ModeShadow, 0
			return rs
		}), []rules.Change{{Rule: "gone", Kind: "changed", Fields: []rules.FieldChange{
			{"cooldown", "1m", "0"}, {"severity", "warning", "critical"}, {"mode", "alert", "shadow"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.Diff(base, tt.new); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Diff = %+v\nwant   %+v", got, tt.want)
			}
		})
	}
}

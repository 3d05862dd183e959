package config_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
	"github.com/fraudwatch/fraudwatch/rules"
)

func i64(n int64) *int64 { return &n }

func TestParseRulesWhere(t *testing.T) {
	tests := []struct {
		name  string
		where string // the value of where:, as written after "where: "
		want  []rules.Condition
	}{
		{"absent", "~", nil},
		{"empty mapping", "{}", nil},
		{"list", "{payment_method: [card, bank_transfer]}",
			[]rules.Condition{{Field: "payment_method", In: []string{"card", "bank_transfer"}}}},
		{"not", "{payment_method: {not: [gift_card]}}",
			[]rules.Condition{{Field: "payment_method", NotIn: []string{"gift_card"}}}},
		{"in as a mapping", "{payment_method: {in: [card]}}",
			[]rules.Condition{{Field: "payment_method", In: []string{"card"}}}},
		{"range", "{amount: {gte: 10000, lt: 5000000}}",
			[]rules.Condition{{Field: "amount", GTE: i64(10000), LT: i64(5000000)}}},
		{"range of other bounds", "{amount: {gt: -5, lte: 0}}",
			[]rules.Condition{{Field: "amount", GT: i64(-5), LTE: i64(0)}}},
		{"range of one integer", "{amount: {gte: 5, lte: 5}}",
			[]rules.Condition{{Field: "amount", GTE: i64(5), LTE: i64(5)}}},
		{"range of one integer, exclusive", "{amount: {gt: 4, lt: 6}}",
			[]rules.Condition{{Field: "amount", GT: i64(4), LT: i64(6)}}},
		{"extreme bounds", "{n: {gte: -9223372036854775808, lte: 9223372036854775807}}",
			[]rules.Condition{{Field: "n", GTE: i64(-1 << 63), LTE: i64(1<<63 - 1)}}},
		{"every test at once", "{amount: {in: [100, 200], not: [300], gte: 0, lt: 1000}}",
			[]rules.Condition{{Field: "amount", In: []string{"100", "200"}, NotIn: []string{"300"}, GTE: i64(0), LT: i64(1000)}}},
		{"sorted by field, values in file order", "{zip: [b, a], amount: {gte: 1}, currency: [USD, KRW]}",
			[]rules.Condition{
				{Field: "amount", GTE: i64(1)},
				{Field: "currency", In: []string{"USD", "KRW"}},
				{Field: "zip", In: []string{"b", "a"}},
			}},
		{"currency upper-cased", "{currency: [krw, Usd], amount: {gte: 1}}",
			[]rules.Condition{{Field: "amount", GTE: i64(1)}, {Field: "currency", In: []string{"KRW", "USD"}}}},
		{"currency upper-cased in not", "{currency: {not: [jpy]}}",
			[]rules.Condition{{Field: "currency", NotIn: []string{"JPY"}}}},
		{"only the currency field is upper-cased", "{currency_note: [krw]}",
			[]rules.Condition{{Field: "currency_note", In: []string{"krw"}}}},
		{"values as the engine renders them", `{flag: [web, 7, -3, 0x10, true, false, "1.5", "08", 18446744073709551615]}`,
			[]rules.Condition{{Field: "flag", In: []string{"web", "7", "-3", "16", "true", "false", "1.5", "08", "18446744073709551615"}}}},
		{"dotted and quoted field names", `{"metadata.channel": [app], "a b": [x]}`,
			[]rules.Condition{{Field: "a b", In: []string{"x"}}, {Field: "metadata.channel", In: []string{"app"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := oneRule("where: " + tt.where)
			got, err := config.ParseRules([]byte(yaml), "rules.yaml")
			if err != nil {
				t.Fatalf("ParseRules:\n%s\nerror: %v", yaml, err)
			}
			if !reflect.DeepEqual(got[0].Where, tt.want) {
				t.Errorf("where: %s\ngot  %s\nwant %s", tt.where, conditions(got[0].Where), conditions(tt.want))
			}
		})
	}
}

// conditions prints conditions with their bounds, which %+v shows as
// addresses.
func conditions(cs []rules.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("{" + c.Field)
		if c.In != nil {
			b.WriteString(" in " + strings.Join(c.In, "|"))
		}
		if c.NotIn != nil {
			b.WriteString(" not " + strings.Join(c.NotIn, "|"))
		}
		for _, bd := range []struct {
			op string
			v  *int64
		}{{">=", c.GTE}, {">", c.GT}, {"<=", c.LTE}, {"<", c.LT}} {
			if bd.v != nil {
				fmt.Fprintf(&b, " %s %d", bd.op, *bd.v)
			}
		}
		b.WriteString("} ")
	}
	return b.String()
}

func TestParseRulesWhereInvalid(t *testing.T) {
	// Each case lists every error it must give, exactly: the field of
	// each and a part of its message.
	type fe struct{ field, msg string }
	tests := []struct {
		name  string
		where string
		want  []fe
	}{
		{"a list", "[currency]", []fe{{"where", "expected a mapping of event fields to conditions, got a list"}}},
		{"a string", "KRW", []fe{{"where", "expected a mapping of event fields to conditions, got a string"}}},
		{"empty field name", `{"": [a]}`, []fe{{"where", "has an empty field name"}}},
		{"blank field name", `{" ": [a], b: [c]}`, []fe{{"where", "has an empty field name"}}},
		{"field name not a string", "{5: [a], b: [c]}", []fe{{"where.5", "a field name must be a string (quote it)"}}},
		{"field name null", "{~: [a]}", []fe{{"where.~", "a field name must be a string"}}},
		{"condition a string", "{currency: KRW}", []fe{{"where.currency", "expected a list of values or a mapping of tests (in, not, gte, gt, lte, lt), got a string"}}},
		{"condition null", "{currency: ~}", []fe{{"where.currency", "got nothing"}}},
		{"condition a number", "{amount: 5}", []fe{{"where.amount", "got an integer"}}},
		{"empty list", "{currency: []}", []fe{{"where.currency", "lists no values"}}},
		{"no test", "{currency: {}}", []fe{{"where.currency", "has no test"}}},
		{"empty in", "{currency: {in: []}}", []fe{{"where.currency.in", "lists no values"}}},
		{"empty not", "{channel: {not: []}}", []fe{{"where.channel.not", "lists no values"}}},
		{"not a string", "{channel: {not: web}}", []fe{{"where.channel.not", "expected a list of values, got a string"}}},
		{"in null", "{channel: {in: ~}}", []fe{{"where.channel.in", "expected a list of values, got nothing"}}},
		{"fraction", "{channel: [web, 1.5]}", []fe{{"where.channel[1]", "got a decimal number (quote it"}}},
		{"whole fraction in not", "{channel: {not: [1.0]}}", []fe{{"where.channel.not[0]", "got a decimal number"}}},
		{"infinity", "{channel: [.inf]}", []fe{{"where.channel[0]", "got a decimal number"}}},
		{"date", "{day: [2024-01-01]}", []fe{{"where.day[0]", "got a date (quote it"}}},
		{"null value", "{channel: [web, ~]}", []fe{{"where.channel[1]", "expected a string, an integer or true/false, got nothing"}}},
		{"empty value", `{channel: [web, ""]}`, []fe{{"where.channel[1]", "is empty"}}},
		{"nested list", "{channel: [[web]]}", []fe{{"where.channel[0]", "got a list"}}},
		{"nested mapping", "{channel: [{a: b}]}", []fe{{"where.channel[0]", "got a mapping"}}},
		{"repeated value", "{channel: [web, app, web]}", []fe{{"where.channel[2]", `repeats "web"`}}},
		{"repeated as rendered", `{channel: [1, "1", true, "true"]}`, []fe{{"where.channel[1]", `repeats "1"`}, {"where.channel[3]", `repeats "true"`}}},
		{"in and not share a value", "{channel: {in: [web, app], not: [app]}}", []fe{{"where.channel", `"app" is in both in and not`}}},
		{"currency of four letters", "{currency: [KRW, EURO]}", []fe{{"where.currency[1]", `three-letter currency code, not "EURO"`}}},
		{"currency a number", "{currency: [840]}", []fe{{"where.currency[0]", `three-letter currency code, not "840"`}}},
		{"currency not letters", "{currency: {not: [k1w]}}", []fe{{"where.currency.not[0]", `not "k1w"`}}},
		{"currency repeated once upper-cased", "{currency: [krw, KRW]}", []fe{{"where.currency[1]", `repeats "KRW"`}}},
		{"currency range", "{currency: {gte: 1}}", []fe{{"where.currency", "currency codes are not numbers"}}},
		{"unknown test with a hint", "{amount: {gteq: 5}}", []fe{{"where.amount.gteq", "unknown key (did you mean where.amount.gte?)"}}},
		{"unknown test without a hint", "{amount: {minimum: 5}}", []fe{{"where.amount.minimum", "unknown key"}}},
		{"unknown test next to a known one", "{amount: {gte: 1, below: 5}}", []fe{{"where.amount.below", "unknown key"}}},
		{"tests are exact", "{amount: {GTE: 1}}", []fe{{"where.amount.GTE", "unknown key (did you mean where.amount.gte?)"}}},
		{"test not a string", "{amount: {5: 1}}", []fe{{"where.amount.5", "unknown key"}}},
		{"bound a string", `{amount: {gte: "3"}}`, []fe{{"where.amount.gte", `must be an integer, not the string "3"`}}},
		{"bound a fraction", "{amount: {lt: 3.5}}", []fe{{"where.amount.lt", "must be an integer, got 3.5"}}},
		{"bound a whole fraction", "{amount: {lte: 3.0}}", []fe{{"where.amount.lte", "must be an integer, got 3"}}},
		{"bound null", "{amount: {gt: ~}}", []fe{{"where.amount.gt", "must be an integer, got nothing"}}},
		{"bound a list", "{amount: {gt: [1]}}", []fe{{"where.amount.gt", "must be an integer, got a list"}}},
		{"bound a date", "{amount: {gt: 2024-01-01}}", []fe{{"where.amount.gt", "must be an integer, got a date"}}},
		{"bound true", "{amount: {gt: true}}", []fe{{"where.amount.gt", "must be an integer, got true/false"}}},
		{"bound beyond int64", "{amount: {gte: 9223372036854775808}}", []fe{{"where.amount.gte", "between -9223372036854775808 and 9223372036854775807"}}},
		{"gte and gt", "{amount: {gte: 1, gt: 0}}", []fe{{"where.amount", "has both gte and gt"}}},
		{"lte and lt", "{amount: {lte: 9, lt: 10}}", []fe{{"where.amount", "has both lte and lt"}}},
		{"lower above upper", "{amount: {gte: 10, lt: 5}}", []fe{{"where.amount", "is an empty range: no integer is >= 10 and < 5"}}},
		{"bounds in other bases", "{amount: {gte: 0x10, lt: 0o20}}", []fe{{"where.amount", "no integer is >= 16 and < 16"}}},
		{"no integer between", "{amount: {gt: 5, lt: 6}}", []fe{{"where.amount", "no integer is > 5 and < 6"}}},
		{"above the largest integer", "{amount: {gt: 9223372036854775807}}", []fe{{"where.amount", "no integer is > 9223372036854775807"}}},
		{"below the smallest integer", "{amount: {lt: -9223372036854775808}}", []fe{{"where.amount", "no integer is < -9223372036854775808"}}},
		{"every problem of several fields", `{zip: [], currency: [krw, EURO], amount: {gte: "1", gt: 2, lte: 0}}`, []fe{
			{"where.amount.gte", "not the string"},
			{"where.amount", "has both gte and gt"},
			{"where.currency[1]", "EURO"},
			{"where.zip", "lists no values"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := oneRule("where: " + tt.where)
			got, err := config.ParseRules([]byte(yaml), "conf/rules.yaml")
			if err == nil {
				t.Fatalf("ParseRules accepted where: %s\n= %s", tt.where, conditions(got[0].Where))
			}
			errs := fieldErrors(t, err)
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
				if e.File != "conf/rules.yaml" || e.Rule != `"orders-per-customer-1m"` {
					t.Errorf("error %q: file %q, rule %q", e.Error(), e.File, e.Rule)
				}
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, w.field)
			}
			if !slices.Equal(fields, want) {
				t.Fatalf("where: %s\nerrors at %q, want %q:\n%v", tt.where, fields, want, err)
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Msg, w.msg) {
					t.Errorf("where: %s\nerror %q does not contain %q", tt.where, errs[i].Error(), w.msg)
				}
			}
		})
	}
}

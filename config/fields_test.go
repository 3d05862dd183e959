package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
)

// A field a rule names that no documented event carries and the
// deployment does not declare is warned of, with the known field it is
// nearest to (docs/configuration.md, Event fields).
func TestFieldWarnings(t *testing.T) {
	type warning struct{ rule, key, field, suggestion string }
	tests := []struct {
		name string
		yaml string
		want []warning
	}{
		{name: "documented fields", yaml: oneRule("group_by: [customer_id, card_fingerprint]",
			"where: {currency: [KRW], amount: {gte: 1}, occurred_at: {not: [x]}, type: [order]}")},
		{name: "a typo of group_by", yaml: oneRule("group_by: [custmer_id]"),
			want: []warning{{"orders-per-customer-1m", "group_by[0]", "custmer_id", "customer_id"}}},
		{name: "the second of group_by", yaml: oneRule("group_by: [customer_id, emial]"),
			want: []warning{{"orders-per-customer-1m", "group_by[1]", "emial", "email"}}},
		{name: "a distinct rule's field", yaml: oneRule("metric: distinct", "field: cardFingerprint"),
			want: []warning{{"orders-per-customer-1m", "field", "cardFingerprint", "card_fingerprint"}}},
		{name: "where: fields", yaml: oneRule("where: {Currency: [KRW], payment_method: {not: [gift_card]}}"),
			want: []warning{
				{"orders-per-customer-1m", "where.Currency", "Currency", "currency"},
				{"orders-per-customer-1m", "where.payment_method", "payment_method", ""},
			}},
		{name: "declared fields are known", yaml: oneRule("group_by: [merchant_id]", "where: {payment_method: {not: [gift_card]}}") +
			"event_fields: [merchant_id, payment_method]\n"},
		{name: "a typo of a declared field", yaml: oneRule("group_by: [merchnt_id]") + "event_fields: [merchant_id]\n",
			want: []warning{{"orders-per-customer-1m", "group_by[0]", "merchnt_id", "merchant_id"}}},
		{name: "a disabled rule", yaml: oneRule("group_by: [device]", "enabled: false"),
			want: []warning{{"orders-per-customer-1m", "group_by[0]", "device", ""}}},
		// Short names of the events' own are not taken for ip.
		{name: "no guess for two letters", yaml: oneRule("group_by: [id]"),
			want: []warning{{"orders-per-customer-1m", "group_by[0]", "id", ""}}},
		{name: "case and separators", yaml: oneRule("group_by: [customerId, Device-ID]"),
			want: []warning{
				{"orders-per-customer-1m", "group_by[0]", "customerId", "customer_id"},
				{"orders-per-customer-1m", "group_by[1]", "Device-ID", "device_id"},
			}},
		{name: "one edit for short names", yaml: oneRule("group_by: [ipp, phn, tpye, adress]"),
			want: []warning{
				{"orders-per-customer-1m", "group_by[0]", "ipp", "ip"},
				{"orders-per-customer-1m", "group_by[1]", "phn", ""},
				{"orders-per-customer-1m", "group_by[2]", "tpye", "type"},
				{"orders-per-customer-1m", "group_by[3]", "adress", ""},
			}},
		{name: "two edits for long names", yaml: oneRule("group_by: [cutsomer_d, device_idxx, shiping_adres]"),
			want: []warning{
				{"orders-per-customer-1m", "group_by[0]", "cutsomer_d", "customer_id"},
				{"orders-per-customer-1m", "group_by[1]", "device_idxx", "device_id"},
				{"orders-per-customer-1m", "group_by[2]", "shiping_adres", ""},
			}},
		// A line break in a where: field would forge a line of check's.
		{name: "a where: field of control characters", yaml: oneRule(`where: {"cust\nwarning: x": [a]}`),
			want: []warning{{"orders-per-customer-1m", `where."cust\nwarning: x"`, "cust\nwarning: x", ""}}},
		{name: "a long name", yaml: oneRule("group_by: [" + strings.Repeat("customer_id", 1000) + "]"),
			want: []warning{{"orders-per-customer-1m", "group_by[0]", strings.Repeat("customer_id", 1000), ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := config.ParseRuleSet([]byte(tt.yaml), "rules.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var got []warning
			for _, w := range config.FieldWarnings("rules.yaml", s.Rules, s.EventFields) {
				if w.File != "rules.yaml" {
					t.Errorf("warning %q names file %q", w, w.File)
				}
				got = append(got, warning{w.Rule, w.Key, w.Field, w.Suggestion})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("FieldWarnings =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// The warning's line says where, what and why, and what it is most likely
// meant to be.
func TestFieldWarningText(t *testing.T) {
	s, err := config.ParseRuleSet([]byte(oneRule("metric: distinct", "field: card", "group_by: [custmer_id]",
		"where: {payment_method: {not: [gift_card]}, merchant: [m1]}")), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range config.FieldWarnings("rules.yaml", s.Rules, nil) {
		got = append(got, w.String())
	}
	const (
		rule = `rules.yaml: rule "orders-per-customer-1m": `
		not  = " is neither a documented event field (docs/events.md) nor declared in event_fields: "
	)
	want := []string{
		rule + `group_by[0]: "custmer_id"` + not + "events lacking it skip the rule (did you mean customer_id?)",
		rule + `field: "card"` + not + "orders lacking it are not counted",
		rule + `where.merchant: "merchant"` + not + "events lacking it do not meet the condition, and skip the rule",
		rule + `where.payment_method: "payment_method"` + not + "every event lacking it meets the condition, so it filters nothing out",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// event_fields is a list of names no documented field, repeat or blank is
// among; each error names the file and the item.
func TestEventFieldsInvalid(t *testing.T) {
	tests := []struct {
		name, fields string
		want         []string
	}{
		{"not a list", "payment_method", []string{"rules.yaml: event_fields: expected a list of strings, got a string"}},
		{"a mapping", "{payment_method: string}", []string{"rules.yaml: event_fields: expected a list of strings"}},
		{"not a string", "[payment_method, 5]", []string{"rules.yaml: event_fields[1]: expected a string, got an integer (quote it)"}},
		{"a documented field", "[payment_method, customer_id]", []string{
			`rules.yaml: event_fields[1]: "customer_id" is a field of the documented schema (docs/events.md): rules name it without declaring it`}},
		{"a repeat", "[payment_method, merchant, payment_method]", []string{`rules.yaml: event_fields[2]: repeats "payment_method"`}},
		{"empty", `["", "  "]`, []string{"rules.yaml: event_fields[0]: is empty", "rules.yaml: event_fields[1]: is empty"}},
		{"white space around", `[" payment_method"]`, []string{`rules.yaml: event_fields[0]: " payment_method" has white space around it`}},
		{"a control character", `["pay\tment"]`, []string{`rules.yaml: event_fields[0]: "pay\tment" holds a control character`}},
		{"too long", "[" + strings.Repeat("x", 257) + "]", []string{"rules.yaml: event_fields[0]: is 257 bytes long, at most 256"}},
		{"a near miss of the key", "", []string{"rules.yaml: event_field: unknown key (did you mean event_fields?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := oneRule() + "event_fields: " + tt.fields + "\n"
			if tt.fields == "" {
				yaml = oneRule() + "event_field: [payment_method]\n"
			}
			_, err := config.ParseRuleSet([]byte(yaml), "rules.yaml")
			var got []string
			for _, fe := range fieldErrors(t, err) {
				got = append(got, fe.Error())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("errors:\n%s\nwant %d", strings.Join(got, "\n"), len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %q, want it to start %q", got[i], w)
				}
			}
		})
	}
}

// Load reads the rules file's event_fields into the configuration, and
// its warnings name the rules file; an empty list declares nothing.
func TestLoadEventFields(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"rules.yaml":  oneRule("group_by: [merchant_id, shop]") + "event_fields: [merchant_id]\n",
		"config.yaml": "rules_file: rules.yaml\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.EventFields, []string{"merchant_id"}) {
		t.Errorf("EventFields = %q, want [merchant_id]", c.EventFields)
	}
	ws := c.FieldWarnings()
	if len(ws) != 1 || ws[0].Field != "shop" || ws[0].File != filepath.Join(dir, "rules.yaml") {
		t.Errorf("FieldWarnings = %+v, want shop's, naming %s", ws, filepath.Join(dir, "rules.yaml"))
	}
	if _, err := config.ParseRuleSet([]byte(oneRule()+"event_fields: []\n"), "rules.yaml"); err != nil {
		t.Errorf("an empty event_fields: %v", err)
	}
}

// The rules docs/configuration.md shows read without an error or a field
// warning: their where: names payment_method, which they declare.
func TestDocumentedRulesDeclareTheirFields(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n## Rules\n\n```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/configuration.md has no rules example")
	}
	s, err := config.ParseRuleSet([]byte(example), "docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if ws := config.FieldWarnings("docs/configuration.md", s.Rules, s.EventFields); len(s.Rules) != 2 || len(ws) > 0 {
		t.Errorf("%d rules, warnings %q; want 2 rules and none", len(s.Rules), ws)
	}
}

package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

func TestFieldErrorText(t *testing.T) {
	tests := []struct {
		err  FieldError
		want string
	}{
		{FieldError{File: "r.yaml", Rule: `"a"`, Field: "window", Msg: "bad"}, `r.yaml: rule "a": window: bad`},
		{FieldError{File: "r.yaml", Field: "rules", Msg: "bad"}, "r.yaml: rules: bad"},
		{FieldError{Rule: "#2", Msg: "bad"}, "rule #2: bad"},
		{FieldError{File: "c.yaml", Field: "kafka.brokers[1]", Env: "FRAUDWATCH_KAFKA_BROKERS", Msg: "bad"},
			"c.yaml: kafka.brokers[1]: bad (set by FRAUDWATCH_KAFKA_BROKERS)"},
		{FieldError{Msg: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

type testSection struct {
	Enabled bool   `mapstructure:"enabled"`
	Name    string `mapstructure:"server_name"`
}

type testDoc struct {
	Window  time.Duration  `mapstructure:"window"`
	Pointer *time.Duration `mapstructure:"cooldown"`
	Names   []string       `mapstructure:"names"`
	Count   int            `mapstructure:"count"`
	TLS     testSection    `mapstructure:"tls"`
	skipped string         // unexported: not a key
}

// strictMessages parses and checks yaml against testDoc, returning each error's text.
func strictMessages(t *testing.T, yaml string) []string {
	t.Helper()
	in, err := parseYAML([]byte(yaml), "f.yaml")
	if err != nil {
		return []string{err.Error()}
	}
	opts := decodeOptions{File: "f.yaml", Hooks: []mapstructure.DecodeHookFunc{durationHook}}
	var d testDoc
	errs := append(unknownKeys(in, &d, opts), decodeStrict(in, &d, opts)...)
	var out []string
	for _, err := range errs {
		if _, ok := errors.AsType[*FieldError](err); !ok {
			t.Errorf("%v (%T) is not a *FieldError", err, err)
		}
		out = append(out, err.Error())
	}
	return out
}

func TestStrictDecoding(t *testing.T) {
	tests := []struct {
		name, yaml string
		// want are the errors: unknown keys first, then the values in the
		// order of the fields; none for a valid document.
		want []string
	}{
		{"valid", "window: 1m\ncooldown: 0\nnames: [a, b]\ncount: 3\ntls: {enabled: true}\n", nil},
		{"null leaves fields unset", "cooldown: ~\ntls:\n", nil},
		{"unknown key with a hint", "windw: 1m\n", []string{"f.yaml: windw: unknown key (did you mean window?)"}},
		{"keys are exact", "Window: 1m\n", []string{"f.yaml: Window: unknown key (did you mean window?)"}},
		{"unknown key without a near miss", "colour: red\n", []string{"f.yaml: colour: unknown key"}},
		{"nested unknown key", "tls: {enabld: true}\n", []string{"f.yaml: tls.enabld: unknown key (did you mean tls.enabled?)"}},
		{"an unknown section is one error", "extra: {a: 1, b: 2}\n", []string{"f.yaml: extra: unknown key"}},
		{"unexported fields are not keys", "skipped: x\n", []string{"f.yaml: skipped: unknown key"}},
		{"repeated key", "window: 1m\nwindow: 2m\n", []string{`f.yaml: not valid YAML: yaml: unmarshal errors: line 2: mapping key "window" already defined at line 1`}},
		{"bare number for a duration", "window: 60\n", []string{"f.yaml: window: 60 needs a unit: 60s for seconds"}},
		{"bare negative number", "window: -5\n", []string{"f.yaml: window: -5 needs a unit (such as 30s, 1m)"}},
		{"bare fraction", "window: 1.5\n", []string{"f.yaml: window: 1.5 needs a unit: 1.5s for seconds"}},
		{"word for a duration", "cooldown: soon\n", []string{`f.yaml: cooldown: "soon" is not a duration (such as 500ms, 30s, 1m)`}},
		{"list for a duration", "window: [1m]\n", []string{"f.yaml: window: expected a duration (such as 30s), got a list"}},
		{"number for a string", "names: [a, 5]\n", []string{"f.yaml: names[1]: expected a string, got an integer (quote it)"}},
		{"string for a list", "names: a\n", []string{"f.yaml: names: expected a list of strings, got a string"}},
		{"string for an integer", "count: \"3\"\n", []string{"f.yaml: count: expected an integer, got a string"}},
		{"string for a bool", "tls: {enabled: \"yes\"}\n", []string{"f.yaml: tls.enabled: expected true or false, got a string"}},
		{"scalar for a section", "tls: true\n", []string{"f.yaml: tls: expected a mapping of tls settings, got true/false"}},
		{"every problem", "windw: 1m\ncount: x\nnames: [1]\n", []string{
			"f.yaml: windw: unknown key (did you mean window?)",
			"f.yaml: names[0]: expected a string, got an integer (quote it)",
			"f.yaml: count: expected an integer, got a string",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strictMessages(t, tt.yaml)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	in, err := parseYAML([]byte("window: 1h30m\ncooldown: 0\nnames: [a]\ncount: 7\ntls: {enabled: true, server_name: x}\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d testDoc
	if errs := decodeStrict(in, &d, decodeOptions{Hooks: []mapstructure.DecodeHookFunc{durationHook}}); errs != nil {
		t.Fatal(errs)
	}
	if d.Window != 90*time.Minute || d.Pointer == nil || *d.Pointer != 0 || len(d.Names) != 1 || d.Count != 7 ||
		d.TLS != (testSection{Enabled: true, Name: "x"}) {
		t.Errorf("decoded %+v", d)
	}
}

func TestErrorsNameTheRuleAndTheVariable(t *testing.T) {
	in := map[string]any{"window": "soon", "names": "a"}
	opts := decodeOptions{File: "f.yaml", Rule: `"r"`, Env: map[string]string{"names": "FRAUDWATCH_NAMES"},
		Hooks: []mapstructure.DecodeHookFunc{durationHook}}
	var d testDoc
	var got []string
	for _, err := range decodeStrict(in, &d, opts) {
		got = append(got, err.Error())
	}
	want := []string{
		`f.yaml: rule "r": window: "soon" is not a duration (such as 500ms, 30s, 1m)`,
		`f.yaml: rule "r": names: expected a list of strings, got a string (set by FRAUDWATCH_NAMES)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

package strictyaml_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/fraudwatch/fraudwatch/config/strictyaml"
)

func TestFieldErrorText(t *testing.T) {
	tests := []struct {
		err  strictyaml.FieldError
		want string
	}{
		{strictyaml.FieldError{File: "r.yaml", Rule: `"a"`, Field: "window", Msg: "bad"}, `r.yaml: rule "a": window: bad`},
		{strictyaml.FieldError{File: "r.yaml", Field: "rules", Msg: "bad"}, "r.yaml: rules: bad"},
		{strictyaml.FieldError{Rule: "#2", Msg: "bad"}, "rule #2: bad"},
		{strictyaml.FieldError{File: "c.yaml", Field: "kafka.brokers[1]", Env: "FRAUDWATCH_KAFKA_BROKERS", Msg: "bad"},
			"c.yaml: kafka.brokers[1]: bad (set by FRAUDWATCH_KAFKA_BROKERS)"},
		{strictyaml.FieldError{Msg: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

type inner struct {
	Enabled bool   `mapstructure:"enabled"`
	Name    string `mapstructure:"server_name"`
}

type doc struct {
	Window  time.Duration  `mapstructure:"window"`
	Pointer *time.Duration `mapstructure:"cooldown"`
	Names   []string       `mapstructure:"names"`
	Count   int            `mapstructure:"count"`
	TLS     inner          `mapstructure:"tls"`
	skipped string         // unexported: not a key
}

// messages parses and checks yaml against doc, returning each error's text.
func messages(t *testing.T, yaml string) []string {
	t.Helper()
	in, err := strictyaml.Parse([]byte(yaml), "f.yaml")
	if err != nil {
		return []string{err.Error()}
	}
	opts := strictyaml.Options{File: "f.yaml", Hooks: []mapstructure.DecodeHookFunc{strictyaml.DurationHook}}
	var d doc
	errs := append(strictyaml.UnknownKeys(in, &d, opts), strictyaml.Decode(in, &d, opts)...)
	var out []string
	for _, err := range errs {
		if _, ok := errors.AsType[*strictyaml.FieldError](err); !ok {
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
		{"bare number for a duration", "window: 60\n", []string{"f.yaml: window: 60 needs a unit (such as 500ms, 30s, 1m)"}},
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
			got := messages(t, tt.yaml)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	in, err := strictyaml.Parse([]byte("window: 1h30m\ncooldown: 0\nnames: [a]\ncount: 7\ntls: {enabled: true, server_name: x}\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	if errs := strictyaml.Decode(in, &d, strictyaml.Options{Hooks: []mapstructure.DecodeHookFunc{strictyaml.DurationHook}}); errs != nil {
		t.Fatal(errs)
	}
	if d.Window != 90*time.Minute || d.Pointer == nil || *d.Pointer != 0 || len(d.Names) != 1 || d.Count != 7 ||
		d.TLS != (inner{Enabled: true, Name: "x"}) {
		t.Errorf("decoded %+v", d)
	}
}

func TestErrorsNameTheRuleAndTheVariable(t *testing.T) {
	in := map[string]any{"window": "soon", "names": "a"}
	opts := strictyaml.Options{File: "f.yaml", Rule: `"r"`, Env: map[string]string{"names": "FRAUDWATCH_NAMES"},
		Hooks: []mapstructure.DecodeHookFunc{strictyaml.DurationHook}}
	var d doc
	var got []string
	for _, err := range strictyaml.Decode(in, &d, opts) {
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

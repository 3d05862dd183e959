package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"go.yaml.in/yaml/v3"
)

// This file is the one strict way fraudwatch reads its YAML files, the
// configuration and the rules:
//
//   - Every key must name a field exactly, the configuration's as viper
//     reads them (viperKeys). An unknown key is an error, with a hint for
//     a near miss ("windw: did you mean window?").
//   - No value changes type on its way in: a bare 60 is no duration, "3"
//     no number, 1.5 no integer. A caller's hooks may allow other forms,
//     such as environment strings.
//   - Every problem is a *FieldError naming the file, any rule and the key.
//     It never quotes a value it was not given to quote.
//
// parseYAML reads a document; unknownKeys and decodeStrict check it.

// FieldError names the file, the rule and the key at fault, and the
// environment variable when the value came from one.
type FieldError struct {
	File  string // as the user named it; "" for values built in code
	Rule  string // a rule's name, or its position (#3); "" outside a rules file
	Field string // the dotted key: kafka.brokers[1], window
	Env   string // FRAUDWATCH_KAFKA_BROKERS, when it set the value
	Msg   string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	for _, part := range []struct{ before, s, after string }{
		{"", e.File, ": "}, {"rule ", e.Rule, ": "}, {"", e.Field, ": "},
	} {
		if part.s != "" {
			b.WriteString(part.before + part.s + part.after)
		}
	}
	b.WriteString(e.Msg)
	if e.Env != "" {
		b.WriteString(" (set by " + e.Env + ")")
	}
	return b.String()
}

// decodeOptions say where a document came from, for the errors, and which other
// forms of values it accepts.
type decodeOptions struct {
	File string
	Rule string
	// Env maps the keys whose values came from the environment to their
	// variable.
	Env map[string]string
	// Hooks convert values before they are decoded (see durationHook).
	Hooks []mapstructure.DecodeHookFunc
}

// hookErrorf makes an error whose text is a FieldError's whole message: for
// hooks, whose words are meant for the operator.
func hookErrorf(format string, args ...any) error { return hookError(fmt.Sprintf(format, args...)) }

type hookError string

func (e hookError) Error() string { return string(e) }

func (o decodeOptions) fieldError(field, msg string) *FieldError {
	base, _, _ := strings.Cut(field, "[")
	return &FieldError{File: o.File, Rule: o.Rule, Field: field, Env: o.Env[base], Msg: msg}
}

// parseYAML reads a YAML document into maps, lists and scalars. A key repeated
// in one mapping is an error, as YAML has it.
func parseYAML(data []byte, file string) (any, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml.v3 lists several problems on several lines; errors here are
		// one line each.
		msg := strings.Join(strings.Fields(err.Error()), " ")
		return nil, &FieldError{File: file, Msg: "not valid YAML: " + msg}
	}
	return doc, nil
}

// unknownKeys reports every key of in that no field of *out names, the
// outermost one only when a whole unknown section is given. A value of the
// wrong kind (a scalar where a section belongs) is left to Decode.
func unknownKeys(in, out any, opts decodeOptions) []error {
	var errs []error
	var walk func(m map[string]any, t reflect.Type, prefix string)
	walk = func(m map[string]any, t reflect.Type, prefix string) {
		fields := fieldsOf(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			f, ok := fields[k]
			if !ok {
				msg := "unknown key"
				if guess := closest(k, slices.Collect(maps.Keys(fields))); guess != "" {
					msg += fmt.Sprintf(" (did you mean %s%s?)", prefix, guess)
				}
				errs = append(errs, opts.fieldError(prefix+k, msg))
				continue
			}
			ft := derefType(f.Type)
			switch sub := m[k].(type) {
			case map[string]any:
				if ft.Kind() == reflect.Struct {
					walk(sub, ft, prefix+k+".")
				}
			case []any:
				// A list of mappings (receivers:, routes:, links:): each
				// item is checked, named by its index.
				if ft.Kind() != reflect.Slice || derefType(ft.Elem()).Kind() != reflect.Struct {
					continue
				}
				for i, item := range sub {
					if im, ok := item.(map[string]any); ok {
						walk(im, derefType(ft.Elem()), fmt.Sprintf("%s%s[%d].", prefix, k, i))
					}
				}
			}
		}
	}
	if m, ok := in.(map[string]any); ok {
		walk(m, reflect.TypeOf(out).Elem(), "")
	}
	return errs
}

func derefType(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

// decodeStrict decodes in into *out, field by field, and reports every value
// that does not fit its field. Keys it does not know are ignored: see
// unknownKeys.
func decodeStrict(in, out any, opts decodeOptions) []error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result: out,
		// mapstructure matches names case-insensitively by default: a rule
		// holding both window: 1m and Window: 5m would silently get either.
		MatchName:        func(key, field string) bool { return key == field },
		WeaklyTypedInput: false,
		DecodeHook:       mapstructure.ComposeDecodeHookFunc(opts.Hooks...),
	})
	if err != nil {
		return []error{fmt.Errorf("config: %w", err)}
	}
	if err := dec.Decode(in); err != nil {
		return decodeErrors(err, in, reflect.TypeOf(out).Elem(), opts)
	}
	return nil
}

// decodeErrors turns mapstructure's errors, which it joins under one
// header, into one FieldError per field. Values are not repeated unless a
// hook quoted them.
func decodeErrors(err error, in any, t reflect.Type, opts decodeOptions) []error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *mapstructure.DecodeError:
			if inner, ok := errors.AsType[*mapstructure.DecodeError](e.Unwrap()); ok {
				walk(inner)
				return
			}
			out = append(out, opts.fieldError(e.Name(), message(e.Unwrap(), e.Name(), in, t)))
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if _, ok := errors.AsType[*mapstructure.DecodeError](err); ok {
				walk(e.Unwrap())
				return
			}
			out = append(out, &FieldError{File: opts.File, Rule: opts.Rule, Msg: err.Error()})
		default:
			out = append(out, &FieldError{File: opts.File, Rule: opts.Rule, Msg: err.Error()})
		}
	}
	walk(err)
	return out
}

// message says what is wrong with the value of field in the operator's
// words, where mapstructure's would not do.
func message(err error, field string, in any, t reflect.Type) string {
	var ut *mapstructure.UnconvertibleTypeError
	var pe *mapstructure.ParseError
	var he hookError
	switch {
	case errors.As(err, &he):
		return he.Error()
	case errors.As(err, &ut):
		msg := fmt.Sprintf("expected %s, got %s", typeName(ut.Expected.Type()), yamlKind(ut.Value))
		if ut.Expected.Kind() == reflect.String {
			if _, isNum := number(ut.Value); isNum || reflect.ValueOf(ut.Value).Kind() == reflect.Bool {
				msg += " (quote it)"
			}
		}
		return msg
	case errors.As(err, &pe):
		return fmt.Sprintf("expected %s: %v", typeName(pe.Expected.Type()), pe.Err)
	}
	if ft, ok := typeAt(t, field); ok {
		if ft.Kind() == reflect.Struct {
			return fmt.Sprintf("expected a mapping of %s settings, got %s", field, yamlKind(valueAt(in, field)))
		}
		return fmt.Sprintf("expected %s, got %s", typeName(ft), yamlKind(valueAt(in, field)))
	}
	return strings.ReplaceAll(err.Error(), "'", "")
}

// fieldsOf maps the mapstructure tags of t's fields to the fields.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if tag := f.Tag.Get("mapstructure"); f.IsExported() && tag != "" && tag != "-" {
			out[tag] = f
		}
	}
	return out
}

// typeAt is the type of the field a dotted key names in t.
func typeAt(t reflect.Type, key string) (reflect.Type, bool) {
	for part := range strings.SplitSeq(key, ".") {
		name, _, indexed := strings.Cut(part, "[")
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		f, ok := fieldsOf(t)[name]
		if !ok {
			return nil, false
		}
		t = f.Type
		if indexed {
			if t.Kind() != reflect.Slice {
				return nil, false
			}
			t = t.Elem()
		}
	}
	return t, true
}

// valueAt is the value a dotted key names in a document (nil if none).
func valueAt(in any, key string) any {
	for part := range strings.SplitSeq(key, ".") {
		name, index, indexed := strings.Cut(part, "[")
		m, ok := in.(map[string]any)
		if !ok {
			return nil
		}
		in = m[name]
		if indexed {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			list, ok := in.([]any)
			if err != nil || !ok || i < 0 || i >= len(list) {
				return nil
			}
			in = list[i]
		}
	}
	return in
}

// closest returns the candidate within two edits of key, if any.
func closest(key string, candidates []string) string {
	slices.Sort(candidates) // the same hint every time
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(key, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

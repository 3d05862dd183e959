package config

import (
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The hooks and words of strict.go for values: durations, and what YAML
// made of a value, for messages.

// durationHook reads Go durations ("30s", "1h30m") into time.Duration
// fields. A bare number is refused (is 60 seconds or nanoseconds?), except
// 0, which YAML makes an integer.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	if s, ok := data.(string); ok {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err == nil {
			return d, nil
		}
		// "5" from the environment is the same slip as a bare 5.
		if n, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			return nil, hookErrorf("%q %s", s, unitHint(n))
		}
		return nil, hookErrorf("%q is not a duration (such as 500ms, 30s, 1m)", s)
	}
	if n, ok := number(data); ok {
		if n == 0 {
			return time.Duration(0), nil
		}
		return nil, hookErrorf("%v %s", data, unitHint(n))
	}
	return nil, hookErrorf("expected a duration (such as 30s), got %s", yamlKind(data))
}

// unitHint suggests the bare number n as seconds, the likely meaning: a
// general example such as 500ms would be refused next by a window or
// cooldown (whole seconds, at least 1s).
func unitHint(n float64) string {
	if n <= 0 || n > 1e9 {
		return "needs a unit (such as 30s, 1m)"
	}
	return "needs a unit: " + strconv.FormatFloat(n, 'f', -1, 64) + "s for seconds"
}

// number reports a value YAML made a number of, as a float64.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// yamlKind names what YAML made of a value, for messages. It never shows the
// value: it may be a secret.
func yamlKind(v any) string {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Invalid:
		return "nothing"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true/false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return reflect.TypeOf(v).String()
}

// typeName names what a field expects, for messages.
func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration (such as 30s)"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "a list of strings"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return t.String()
}

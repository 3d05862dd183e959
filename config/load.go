package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// EnvPrefix starts the name of every environment override.
const EnvPrefix = "FRAUDWATCH_"

// Load reads the config file at path, applies the environment overrides,
// loads the rules file and validates the result. Errors name the file and
// the dotted key at fault (and the environment variable when the value
// came from one): first every unknown key; once the keys are right, every
// bad value and every rule error at once.
func Load(path string) (*Config, error) {
	if path == "" {
		return nil, errors.New("config: no config file given")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := decode(data, path, abs)
	if err != nil {
		return nil, err
	}
	var rerr error
	if c.RulesFile != "" {
		// rules errors already name the file, the rule and the field.
		var s RuleSet
		s, rerr = LoadRuleSet(c.RulesFile)
		c.Rules, c.EventFields = s.Rules, s.EventFields
		c.Routes, c.DefaultReceivers, c.Routing = s.Routes, s.DefaultReceivers, s.Routing
	}
	if rerr != nil {
		// Report the settings' problems too, but not "no rules" on top of
		// the reason there are none.
		return nil, errors.Join(rerr, errors.Join(c.checkSettings()...))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decode turns the file's bytes and the environment into a Config, without
// validating it. name is the file as the user gave it, abs its absolute path.
func decode(data []byte, name, abs string) (*Config, error) {
	doc, err := parseYAML(data, name)
	if err != nil {
		return nil, err
	}
	var file map[string]any
	switch d := doc.(type) {
	case nil:
	case map[string]any:
		file = viperKeys(d)
	default:
		return nil, &FieldError{File: name, Msg: "must be a mapping of settings (kafka:, redis:, …)"}
	}
	opts := decodeOptions{File: name}
	if errs := unknownKeys(file, &Config{}, opts); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	if err := listEnv(name); err != nil {
		return nil, err
	}
	settings, env, err := overlayEnv(file)
	if err != nil {
		return nil, &FieldError{File: name, Msg: err.Error()}
	}
	c := &Config{File: abs, name: name, env: env}
	opts.Env = env
	// Strings from the environment are converted by the hooks; YAML's own
	// values keep their types (a bare 60 is not a duration, 1.5 not a size).
	opts.Hooks = []mapstructure.DecodeHookFunc{durationHook, listHook, intHook, floatHook, boolHook}
	if errs := decodeStrict(settings, c, opts); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	dir := filepath.Dir(abs)
	for _, p := range []*string{
		&c.RulesFile,
		&c.Kafka.TLS.CAFile, &c.Kafka.TLS.CertFile, &c.Kafka.TLS.KeyFile,
		&c.Redis.TLS.CAFile, &c.Redis.TLS.CertFile, &c.Redis.TLS.KeyFile,
	} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

// overlayEnv merges the file's settings over the defaults and the
// environment's over both, and says which keys the environment set.
func overlayEnv(file map[string]any) (settings map[string]any, env map[string]string, err error) {
	v := viper.New()
	def := reflect.ValueOf(Default())
	env = map[string]string{}
	for _, l := range leaves() {
		// viper only consults the environment for keys it knows of: a
		// default and an explicit binding for each makes every key
		// overridable.
		v.SetDefault(l.key, def.FieldByIndex(l.index).Interface())
		if err := v.BindEnv(l.key, l.env); err != nil {
			return nil, nil, err
		}
		if os.Getenv(l.env) != "" {
			env[l.key] = l.env
		}
	}
	// AllSettings drops the file's null values ("tls:" with nothing under
	// it). Left in, a null section hides the environment overrides beneath
	// it, or not, depending on the order of viper's maps.
	nonNull := viper.New()
	if err := nonNull.MergeConfigMap(file); err != nil {
		return nil, nil, err
	}
	if err := v.MergeConfigMap(nonNull.AllSettings()); err != nil {
		return nil, nil, err
	}
	return v.AllSettings(), env, nil
}

// viperKeys reads a mapping's keys the way viper does: case-insensitively,
// and a dot in a key as a path ("kafka.brokers: [...]" at the top is
// kafka: {brokers: [...]}), so that the check of the keys and the
// overlay of the environment agree on what the file says.
func viperKeys(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch sub := v.(type) {
		case map[string]any:
			v = viperKeys(sub)
		case []any:
			// viper lower-cases the keys of a list's mappings too
			// (receivers:).
			list := make([]any, len(sub))
			for i, item := range sub {
				if im, ok := item.(map[string]any); ok {
					item = viperKeys(im)
				}
				list[i] = item
			}
			v = list
		}
		path := strings.Split(strings.ToLower(k), ".")
		at := out
		for _, part := range path[:len(path)-1] {
			next, ok := at[part].(map[string]any)
			if !ok {
				next = map[string]any{}
				at[part] = next
			}
			at = next
		}
		last := path[len(path)-1]
		if sub, ok := v.(map[string]any); ok {
			if prev, ok := at[last].(map[string]any); ok {
				maps.Copy(prev, sub)
				continue
			}
		}
		at[last] = v
	}
	return out
}

// leaf is one configuration key: a field of Config that is not a section.
type leaf struct {
	key   string // kafka.tls.enabled
	env   string // FRAUDWATCH_KAFKA_TLS_ENABLED
	index []int  // for reflect.Value.FieldByIndex
}

// leaves lists every key of Config, derived from its mapstructure tags so
// that a new field is a new key, with a default and an environment
// variable, without anything else to remember.
func leaves() []leaf {
	var out []leaf
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("mapstructure")
			if !f.IsExported() || tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			idx := append(slices.Clone(index), i)
			if isListOfMappings(f.Type) {
				// receivers: no variable can hold it (see listEnv).
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, key+".", idx)
				continue
			}
			out = append(out, leaf{key: key, env: envName(key), index: idx})
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return out
}

func isListOfMappings(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && derefType(t.Elem()).Kind() == reflect.Struct
}

// listEnv refuses a variable set for a list of mappings (receivers:): it
// is no key of its own, since a variable cannot hold its items; their
// secrets come from variables named in the file (…_env). Unrefused, the
// variable would be silently ignored.
func listEnv(name string) error {
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("mapstructure")
		if env := envName(key); isListOfMappings(f.Type) && os.Getenv(env) != "" {
			return &FieldError{File: name, Field: key, Env: env,
				Msg: "is a list the environment cannot set: write it in the file, and its secrets' variables in its …_env keys"}
		}
	}
	return nil
}

// envName is the environment variable that overrides key.
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	stringsType  = reflect.TypeFor[[]string]()
)

// listHook splits the comma-separated lists of the environment. Blanks
// around and between items are dropped.
func listHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if to != stringsType || !ok {
		return data, nil
	}
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out, nil
}

// intHook parses integers from the environment, and refuses fractions that
// mapstructure would truncate.
func intHook(from, to reflect.Type, data any) (any, error) {
	if to == durationType {
		return data, nil
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
	default:
		return data, nil
	}
	switch v := data.(type) {
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, to.Bits())
		if err != nil {
			return nil, hookErrorf("%q is not an integer", v)
		}
		return n, nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return nil, hookErrorf("%v is not an integer", v)
		}
		return int64(v), nil
	}
	return data, nil
}

// floatHook parses numbers from the environment for float settings (a
// rate), and takes YAML's integers for them.
func floatHook(from, to reflect.Type, data any) (any, error) {
	if to.Kind() != reflect.Float64 {
		return data, nil
	}
	switch v := data.(type) {
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, hookErrorf("%q is not a number", v)
		}
		return f, nil
	case int:
		return float64(v), nil
	case int64:
		return float64(v), nil
	case uint64:
		return float64(v), nil
	}
	return data, nil
}

// boolHook parses booleans from the environment.
func boolHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if to.Kind() != reflect.Bool || !ok {
		return data, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return nil, hookErrorf("%q is not true or false", s)
	}
	return b, nil
}

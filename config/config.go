// Package config loads, overrides and validates fraudwatch's configuration
// file (SPEC §2).
//
// The file is YAML read with viper. Every key can be overridden from the
// environment as FRAUDWATCH_ + the upper-cased dotted path with _ for .
// (kafka.tls.enabled → FRAUDWATCH_KAFKA_TLS_ENABLED); lists take
// comma-separated values. An empty environment variable counts as unset.
// Unknown keys are errors. Relative paths, in the file or the environment,
// are resolved against the directory of the config file.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/fraudwatch/fraudwatch/rules"
)

// EnvPrefix starts the name of every environment override.
const EnvPrefix = "FRAUDWATCH_"

// Start offsets of a new consumer group.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// SASL mechanisms.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Config is fraudwatch's whole configuration.
type Config struct {
	Kafka   Kafka   `mapstructure:"kafka"`
	Redis   Redis   `mapstructure:"redis"`
	Slack   Slack   `mapstructure:"slack"`
	Metrics Metrics `mapstructure:"metrics"`
	// RulesFile is absolute after Load.
	RulesFile       string        `mapstructure:"rules_file"`
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`

	// File is the absolute path the config was loaded from, "" for Default.
	File string `mapstructure:"-"`
	// Rules are the rules of RulesFile, loaded by Load.
	Rules []rules.Rule `mapstructure:"-"`

	// name is the file as the user named it, for messages.
	name string
	// env maps the keys that came from the environment to their variable,
	// so that an error about one points at the variable, not the file.
	env map[string]string
}

// Kafka is the kafka: section.
type Kafka struct {
	Brokers      []string `mapstructure:"brokers"`
	GroupID      string   `mapstructure:"group_id"`
	OrdersTopic  string   `mapstructure:"orders_topic"`
	RefundsTopic string   `mapstructure:"refunds_topic"`
	// DeadLetterTopic receives invalid events with their reason.
	DeadLetterTopic string `mapstructure:"dead_letter_topic"`
	// AlertsTopic carries every first crossing from the events consumer to
	// the alert dispatchers (group GroupID + ".alerts"); a feed for other
	// systems too.
	AlertsTopic string `mapstructure:"alerts_topic"`
	// StartOffset is where a new consumer group starts: earliest | latest.
	StartOffset string `mapstructure:"start_offset"`
	ClientID    string `mapstructure:"client_id"`
	// MaxEventBytes bounds a message; larger ones are invalid ("oversized").
	MaxEventBytes     int           `mapstructure:"max_event_bytes"`
	CommitInterval    time.Duration `mapstructure:"commit_interval"`
	SessionTimeout    time.Duration `mapstructure:"session_timeout"`
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	RebalanceTimeout  time.Duration `mapstructure:"rebalance_timeout"`
	TLS               TLS           `mapstructure:"tls"`
	SASL              SASL          `mapstructure:"sasl"`
}

// SameTopic reports whether orders and refunds share one topic, in which
// case every event must carry its "type".
func (k *Kafka) SameTopic() bool { return k.OrdersTopic == k.RefundsTopic }

// SASL is kafka.sasl.
type SASL struct {
	// Mechanism is "" (no SASL), plain, scram-sha-256 or scram-sha-512.
	Mechanism string `mapstructure:"mechanism"`
	Username  string `mapstructure:"username"`
	Password  Secret `mapstructure:"password"`
}

// TLS is the tls: block of kafka and redis.
type TLS struct {
	Enabled bool `mapstructure:"enabled"`
	// CAFile replaces the system roots when set.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are a client certificate, both or neither.
	CertFile   string `mapstructure:"cert_file"`
	KeyFile    string `mapstructure:"key_file"`
	ServerName string `mapstructure:"server_name"`
	// InsecureSkipVerify disables certificate verification: for tests only.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// Redis is the redis: section.
type Redis struct {
	// Addrs is one address, or the seed nodes of a cluster.
	Addrs     []string `mapstructure:"addrs"`
	Cluster   bool     `mapstructure:"cluster"`
	KeyPrefix string   `mapstructure:"key_prefix"`
	Username  string   `mapstructure:"username"`
	Password  Secret   `mapstructure:"password"`
	DB        int      `mapstructure:"db"`

	DialTimeout  time.Duration `mapstructure:"dial_timeout"`
	ReadTimeout  time.Duration `mapstructure:"read_timeout"`
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	// PoolSize 0 keeps go-redis's default.
	PoolSize int `mapstructure:"pool_size"`
	TLS      TLS `mapstructure:"tls"`
}

// Slack is the slack: section. Webhook mode, token mode, or neither (alerts
// go to the log).
type Slack struct {
	WebhookURL Secret `mapstructure:"webhook_url"`
	Token      Secret `mapstructure:"token"`
	// Channel is where token mode posts unless a rule names its own.
	Channel string `mapstructure:"channel"`
	// APIURL overrides the Slack Web API base URL (proxies, tests).
	APIURL  string        `mapstructure:"api_url"`
	Timeout time.Duration `mapstructure:"timeout"`
}

// SlackMode is how alerts are delivered.
type SlackMode string

// Slack modes.
const (
	SlackOff     SlackMode = "off" // alerts go to the log
	SlackWebhook SlackMode = "webhook"
	SlackToken   SlackMode = "token"
)

// Mode says how alerts are delivered. With both a webhook and a token set
// (which Validate refuses) it answers webhook.
func (s *Slack) Mode() SlackMode {
	switch {
	case s.WebhookURL != "":
		return SlackWebhook
	case s.Token != "":
		return SlackToken
	}
	return SlackOff
}

// Metrics is the metrics: section.
type Metrics struct {
	// Listen serves /metrics, /healthz and /readyz.
	Listen string `mapstructure:"listen"`
}

// Default returns the configuration with every default and no rules.
func Default() Config {
	return Config{
		Kafka: Kafka{
			Brokers:           []string{"127.0.0.1:9092"},
			GroupID:           "fraudwatch",
			OrdersTopic:       "orders",
			RefundsTopic:      "refunds",
			DeadLetterTopic:   "fraudwatch.dlq",
			AlertsTopic:       "fraudwatch.alerts",
			StartOffset:       StartLatest,
			ClientID:          "fraudwatch",
			MaxEventBytes:     64 << 10,
			CommitInterval:    time.Second,
			SessionTimeout:    30 * time.Second,
			HeartbeatInterval: 3 * time.Second,
			RebalanceTimeout:  30 * time.Second,
		},
		Redis: Redis{
			Addrs:        []string{"127.0.0.1:6379"},
			KeyPrefix:    "fw",
			DialTimeout:  5 * time.Second,
			ReadTimeout:  3 * time.Second,
			WriteTimeout: 3 * time.Second,
		},
		Slack: Slack{
			Channel: "#fraud-alerts",
			Timeout: 10 * time.Second,
		},
		Metrics:         Metrics{Listen: ":9464"},
		RulesFile:       "rules.yaml",
		ShutdownTimeout: 30 * time.Second,
	}
}

// StartOffsetEarliest reports whether a new consumer group starts at the
// earliest offset rather than the latest.
func (c *Config) StartOffsetEarliest() bool { return c.Kafka.StartOffset == StartEarliest }

// AlertsGroupID is the consumer group of the alert dispatchers.
func (k *Kafka) AlertsGroupID() string { return k.GroupID + ".alerts" }

// Load reads the config file at path, applies the environment overrides,
// loads the rules file and validates the result. Errors name the file and
// the dotted key at fault (and the environment variable when the value
// came from one); all problems are reported at once.
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
		c.Rules, rerr = rules.LoadFile(c.RulesFile)
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
	file := viper.New()
	file.SetConfigType("yaml")
	if err := file.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, &FieldError{File: name, Msg: fmt.Sprintf("not valid YAML: %v", err)}
	}
	ls := leaves()
	if errs := unknownKeys(file.AllKeys(), ls, name); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	v := viper.New()
	def := reflect.ValueOf(Default())
	env := map[string]string{}
	for _, l := range ls {
		// Unmarshal only consults the environment for keys viper knows of:
		// a default and an explicit binding for each makes every key
		// overridable.
		v.SetDefault(l.key, def.FieldByIndex(l.index).Interface())
		if err := v.BindEnv(l.key, l.env); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if os.Getenv(l.env) != "" {
			env[l.key] = l.env
		}
	}
	// AllSettings drops the file's null values ("tls:" with nothing under
	// it). Left in, a null section hides the environment overrides beneath
	// it, or not, depending on the order of viper's maps.
	if err := v.MergeConfigMap(file.AllSettings()); err != nil {
		return nil, &FieldError{File: name, Msg: err.Error()}
	}

	c := &Config{File: abs, name: name, env: env}
	err := v.Unmarshal(c, func(dc *mapstructure.DecoderConfig) {
		// Strict types: YAML's guesses (a bare 60 for a duration, 1.5 for
		// a size, an unquoted number for a password) fail loudly instead
		// of turning into something else. Strings from the environment are
		// converted by the hooks.
		dc.WeaklyTypedInput = false
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			durationHook, listHook, intHook, boolHook,
		)
	})
	if err != nil {
		return nil, decodeErrors(err, name, env, func(field string) string {
			return mismatch(field, v.Get(field), ls)
		})
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

// envName is the environment variable that overrides key.
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// unknownKeys reports the file's keys that are not configuration keys.
// A scalar where a section belongs, or a mapping where a value belongs, is
// left to the decoder, which names it as a type error.
func unknownKeys(fileKeys []string, ls []leaf, file string) []error {
	known := map[string]bool{}
	sections := map[string][]string{"": nil} // section -> its direct children
	for _, l := range ls {
		known[l.key] = true
		parts := strings.Split(l.key, ".")
		for i := range parts {
			parent := strings.Join(parts[:i], ".")
			child := strings.Join(parts[:i+1], ".")
			if !slices.Contains(sections[parent], child) {
				sections[parent] = append(sections[parent], child)
			}
		}
	}
	var errs []error
	sort.Strings(fileKeys)
	for _, k := range fileKeys {
		if known[k] || sections[k] != nil {
			continue
		}
		parts := strings.Split(k, ".")
		underLeaf, parent := false, ""
		for i := 1; i < len(parts); i++ {
			p := strings.Join(parts[:i], ".")
			if known[p] {
				underLeaf = true
				break
			}
			if sections[p] != nil {
				parent = p
			}
		}
		if underLeaf {
			continue
		}
		// Name the outermost unknown key: "kafka.sasl2" rather than each
		// of the keys under it.
		depth := 0
		if parent != "" {
			depth = strings.Count(parent, ".") + 1
		}
		unknown := strings.Join(parts[:depth+1], ".")
		msg := "unknown key"
		if guess := closest(unknown, sections[parent]); guess != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", guess)
		}
		e := &FieldError{File: file, Field: unknown, Msg: msg}
		if !slices.ContainsFunc(errs, func(x error) bool { return x.Error() == e.Error() }) {
			errs = append(errs, e)
		}
	}
	return errs
}

// closest returns the candidate within two edits of key, if any.
func closest(key string, candidates []string) string {
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

var (
	durationType = reflect.TypeFor[time.Duration]()
	stringsType  = reflect.TypeFor[[]string]()
)

// durationHook parses Go durations. A bare number is refused (is 60
// seconds or nanoseconds?) except 0.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	if s, ok := data.(string); ok {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return nil, hookErrorf("%q is not a duration (such as 500ms, 30s, 1m)", s)
		}
		return d, nil
	}
	if n, ok := number(data); ok {
		if n == 0 {
			return time.Duration(0), nil
		}
		return nil, hookErrorf("%v needs a unit (such as 500ms, 30s, 1m)", data)
	}
	return nil, hookErrorf("expected a duration (such as 30s), got %s", yamlKind(data))
}

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

// yamlKind names what YAML made of a value, for messages. It never shows
// the value: it may be a secret.
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

func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration (such as 30s)"
	case t == stringsType:
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
	}
	return t.String()
}

// decodeErrors turns mapstructure's errors into FieldErrors that name the
// file, the key and, when the value came from one, the variable. Values are
// not repeated unless a hook quoted them, and no hook runs on a secret.
// describe explains a type mismatch of a key when mapstructure's words
// would not.
func decodeErrors(err error, file string, env map[string]string, describe func(field string) string) error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		var de *mapstructure.DecodeError
		switch e := err.(type) {
		case *mapstructure.DecodeError:
			if inner := e.Unwrap(); errors.As(inner, &de) {
				walk(inner)
				return
			}
			field := e.Name()
			base, _, _ := strings.Cut(field, "[")
			out = append(out, &FieldError{File: file, Field: field, Env: env[base], Msg: decodeMessage(e.Unwrap(), describe(field))})
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if errors.As(err, &de) {
				walk(e.Unwrap())
				return
			}
			out = append(out, &FieldError{File: file, Msg: err.Error()})
		default:
			out = append(out, &FieldError{File: file, Msg: err.Error()})
		}
	}
	walk(err)
	return errors.Join(out...)
}

func decodeMessage(err error, mismatch string) string {
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
	case mismatch != "":
		return mismatch
	}
	return strings.ReplaceAll(err.Error(), "'", "")
}

// mismatch describes value as the wrong kind of thing for key, or returns
// "" when key is not a key or a section.
func mismatch(key string, value any, ls []leaf) string {
	for _, l := range ls {
		if l.key == key {
			return fmt.Sprintf("expected %s, got %s", typeName(reflect.TypeFor[Config]().FieldByIndex(l.index).Type), yamlKind(value))
		}
		if strings.HasPrefix(l.key, key+".") {
			return fmt.Sprintf("expected a mapping of %s settings, got %s", key, yamlKind(value))
		}
	}
	return ""
}

// hookError is a decode hook's own message, already fit for the operator.
type hookError string

func (e hookError) Error() string { return string(e) }

func hookErrorf(format string, args ...any) error { return hookError(fmt.Sprintf(format, args...)) }

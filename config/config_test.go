package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"
)

// fileKeys lists the leaf keys a YAML file sets.
func fileKeys(t *testing.T, path string) []string {
	t.Helper()
	v := viper.New()
	v.SetConfigFile(path)
	if err := v.ReadInConfig(); err != nil {
		t.Fatal(err)
	}
	ks := v.AllKeys()
	slices.Sort(ks)
	return ks
}

// sortedKeys lists every configuration key in dotted form.
func sortedKeys() []string {
	var ks []string
	for _, l := range leaves() {
		ks = append(ks, l.key)
	}
	slices.Sort(ks)
	return ks
}

func TestDefaultMatchesDocumentedDefaults(t *testing.T) {
	clearEnv(t)
	// testdata/defaults.yaml is the key list and defaults of the table in
	// docs/configuration.md: Default must agree with it key for key.
	if got, want := sortedKeys(), fileKeys(t, "testdata/defaults.yaml"); !slices.Equal(got, want) {
		t.Fatalf("keys of Config:\n%q\nkeys of testdata/defaults.yaml:\n%q", got, want)
	}
	got := decodeFile(t, "testdata/defaults.yaml")
	want := Default()
	want.File = got.File
	want.RulesFile = filepath.Join(filepath.Dir(got.File), "rules.yaml")
	want.name, want.env = got.name, got.env
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("testdata/defaults.yaml decodes to\n%+v\nDefault() is\n%+v", *got, want)
	}

	d := Default()
	if d.File != "" || d.Rules != nil {
		t.Errorf("Default() has File %q and %d rules, want none", d.File, len(d.Rules))
	}
}

func TestEmptyFileGivesDefaults(t *testing.T) {
	clearEnv(t)
	for _, content := range []string{"", "# nothing\n", "kafka:\nredis:\n  tls:\n"} {
		path := writeConfig(t, content)
		c, err := Load(path)
		if err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		want := Default()
		want.File = path
		want.RulesFile = filepath.Join(filepath.Dir(path), "rules.yaml")
		want.Rules = c.Rules
		want.name, want.env = c.name, c.env
		if !reflect.DeepEqual(*c, want) {
			t.Errorf("%q loads as\n%+v\nwant\n%+v", content, *c, want)
		}
		if len(c.Rules) != 5 {
			t.Errorf("%q: %d rules, want the 5 of rules.yaml", content, len(c.Rules))
		}
	}
}

func TestLoadFullFile(t *testing.T) {
	clearEnv(t)
	if got, want := fileKeys(t, "testdata/full.yaml"), sortedKeys(); !slices.Equal(got, want) {
		t.Fatalf("testdata/full.yaml must set every key:\n file: %q\n keys: %q", got, want)
	}
	dir := t.TempDir()
	copyFile(t, "testdata/full.yaml", filepath.Join(dir, "full.yaml"))
	copyFile(t, "testdata/rules.yaml", filepath.Join(dir, "rules.yaml"))
	p := writePKI(t, dir)

	c, err := Load(filepath.Join(dir, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wantRules, err := LoadRules(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tlsFiles := TLS{Enabled: true, CAFile: p.CA, CertFile: p.Cert, KeyFile: p.Key}
	kafkaTLS, redisTLS := tlsFiles, tlsFiles
	kafkaTLS.ServerName, kafkaTLS.InsecureSkipVerify = "kafka.internal", true
	redisTLS.ServerName = "redis.internal"
	want := Config{
		Kafka: Kafka{
			Brokers:           []string{"kafka-1.internal:9093", "kafka-2.internal:9093"},
			GroupID:           "fraudwatch-prod",
			OrdersTopic:       "shop.orders",
			RefundsTopic:      "shop.refunds",
			DeadLetterTopic:   "shop.fraudwatch.dlq",
			AlertsTopic:       "shop.fraudwatch.alerts",
			OutcomesTopic:     "shop.fraudwatch.outcomes",
			StartOffset:       "earliest",
			ClientID:          "fraudwatch-eu",
			MaxEventBytes:     131072,
			RetryWindow:       100000,
			CommitInterval:    2 * time.Second,
			SessionTimeout:    45 * time.Second,
			HeartbeatInterval: 5 * time.Second,
			RebalanceTimeout:  time.Minute,
			TLS:               kafkaTLS,
			SASL:              SASL{Mechanism: "scram-sha-512", Username: "fraudwatch", Password: "kafka-sasl-secret-7f3a"},
		},
		Redis: Redis{
			Addrs:        []string{"redis-1.internal:6380", "redis-2.internal:6380", "redis-3.internal:6380"},
			Cluster:      true,
			KeyPrefix:    "fwprod",
			Username:     "fraudwatch",
			Password:     "redis-secret-91bc",
			DialTimeout:  2 * time.Second,
			ReadTimeout:  500 * time.Millisecond,
			WriteTimeout: 750 * time.Millisecond,
			PoolSize:     40,
			Buckets:      64,
			TLS:          redisTLS,
		},
		Slack: Slack{
			Token:   "xoxb-slack-token-secret-5d2e",
			Channel: "#fraud-risk",
			APIURL:  "https://slack-proxy.internal/api/",
			Timeout: 4 * time.Second,
			// Buttons: Slack's interactivity on a listener of its own.
			SigningSecret:      "slack-signing-secret-77a1",
			InteractionsListen: "127.0.0.1:9501",
			Rate:               0.5, Burst: 2, OverallRate: 4, OverallBurst: 8, DigestSize: 20,
		},
		Metrics:         Metrics{Listen: "127.0.0.1:9500", Pprof: true},
		Outcomes:        Outcomes{Retention: 2160 * time.Hour, MaxOrders: 50000},
		RulesFile:       filepath.Join(dir, "rules.yaml"),
		ShutdownTimeout: 45 * time.Second,
		File:            filepath.Join(dir, "full.yaml"),
		Rules:           wantRules,
	}
	want.name, want.env = c.name, c.env
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", *c, want)
	}
	if !c.StartOffsetEarliest() || c.Slack.Mode() != SlackToken || c.Kafka.SameTopic() {
		t.Errorf("helpers: earliest %v, slack mode %q, same topic %v", c.StartOffsetEarliest(), c.Slack.Mode(), c.Kafka.SameTopic())
	}
}

// envValue returns, for the current value of a field, an environment value
// that changes it and the value the field should then hold.
func envValue(t *testing.T, key string, cur reflect.Value) (string, reflect.Value) {
	t.Helper()
	want := reflect.New(cur.Type()).Elem()
	switch {
	case cur.Type() == durationType:
		d := time.Duration(cur.Int()) + 1500*time.Millisecond
		want.SetInt(int64(d))
		return d.String(), want
	case cur.Type() == stringsType:
		want.Set(reflect.ValueOf([]string{"env-1.internal:1", "env-2.internal:2"}))
		return "env-1.internal:1, env-2.internal:2", want
	}
	switch cur.Kind() {
	case reflect.String: // string and Secret
		// Absolute, so that path keys come out unchanged.
		s := "/env/" + key
		want.SetString(s)
		return s, want
	case reflect.Bool:
		want.SetBool(!cur.Bool())
		return strconv.FormatBool(!cur.Bool()), want
	case reflect.Int:
		want.SetInt(cur.Int() + 7)
		return strconv.FormatInt(cur.Int()+7, 10), want
	case reflect.Float64:
		want.SetFloat(cur.Float() + 0.25)
		return strconv.FormatFloat(cur.Float()+0.25, 'f', -1, 64), want
	}
	t.Fatalf("%s: no environment test value for a %s: teach envValue this type", key, cur.Type())
	return "", want
}

// TestEnvOverridesEveryKey sets each key's variable in turn over a file
// that sets every key, and checks that exactly that key changed. The key
// list comes from Config itself, so a new key is covered (and must work)
// without touching this test.
func TestEnvOverridesEveryKey(t *testing.T) {
	clearEnv(t)
	base := decodeFile(t, "testdata/full.yaml")
	ls := leaves()
	if len(ls) != len(fileKeys(t, "testdata/full.yaml")) {
		t.Fatalf("%d keys, but testdata/full.yaml sets %d", len(ls), len(fileKeys(t, "testdata/full.yaml")))
	}
	seen := map[string]string{}
	for _, l := range ls {
		t.Run(l.key, func(t *testing.T) {
			if other, dup := seen[l.env]; dup {
				t.Fatalf("%s and %s share the variable %s", other, l.key, l.env)
			}
			seen[l.env] = l.key
			if want := "FRAUDWATCH_" + strings.ToUpper(strings.ReplaceAll(l.key, ".", "_")); l.env != want {
				t.Fatalf("variable %s, want %s", l.env, want)
			}
			value, field := envValue(t, l.key, reflect.ValueOf(*base).FieldByIndex(l.index))
			t.Setenv(l.env, value)

			got := decodeFile(t, "testdata/full.yaml")
			want := *base
			// Deep-copy the lists the expectation shares with base.
			want.Kafka.Brokers = slices.Clone(base.Kafka.Brokers)
			want.Redis.Addrs = slices.Clone(base.Redis.Addrs)
			reflect.ValueOf(&want).Elem().FieldByIndex(l.index).Set(field)
			want.env = map[string]string{l.key: l.env}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("%s=%q:\n got %+v\nwant %+v", l.env, value, *got, want)
			}
		})
	}
}

func TestEnvLists(t *testing.T) {
	tests := []struct {
		value string
		want  []string
	}{
		{"a:9092,b:9092", []string{"a:9092", "b:9092"}},
		{"a:9092", []string{"a:9092"}},
		{" a:9092 , b:9092 ,", []string{"a:9092", "b:9092"}},
		{"a:1,,b:2,c:3", []string{"a:1", "b:2", "c:3"}},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("FRAUDWATCH_KAFKA_BROKERS", tt.value)
			t.Setenv("FRAUDWATCH_REDIS_ADDRS", tt.value)
			c := decodeFile(t, "testdata/minimal.yaml")
			if !slices.Equal(c.Kafka.Brokers, tt.want) || !slices.Equal(c.Redis.Addrs, tt.want) {
				t.Errorf("brokers %q, addrs %q, want %q", c.Kafka.Brokers, c.Redis.Addrs, tt.want)
			}
		})
	}
}

// TestLoadWithEnv runs the whole of Load with overrides an operator would
// use, including under sections the file leaves empty ("tls:" with nothing
// under it). Such a null once hid the overrides beneath it, depending on
// viper's map order: hence several null sections and several loads.
func TestLoadWithEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("FRAUDWATCH_KAFKA_BROKERS", "k1.internal:9092,k2.internal:9092")
	t.Setenv("FRAUDWATCH_KAFKA_TLS_ENABLED", "true")
	t.Setenv("FRAUDWATCH_KAFKA_SASL_MECHANISM", "plain")
	t.Setenv("FRAUDWATCH_KAFKA_SASL_USERNAME", "fw")
	t.Setenv("FRAUDWATCH_KAFKA_SASL_PASSWORD", "sasl-pw")
	t.Setenv("FRAUDWATCH_REDIS_TLS_SERVER_NAME", "redis.internal")
	t.Setenv("FRAUDWATCH_REDIS_DB", "3")
	t.Setenv("FRAUDWATCH_SLACK_TOKEN", "xoxb-from-env")
	t.Setenv("FRAUDWATCH_METRICS_LISTEN", "127.0.0.1:9999")
	t.Setenv("FRAUDWATCH_SHUTDOWN_TIMEOUT", "5s")
	path := writeConfig(t, "kafka:\n  tls:\n  sasl: {}\nredis:\n  tls:\nslack:\n  channel: \"#from-file\"\nmetrics:\n")
	for range 10 {
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Kafka.Brokers, []string{"k1.internal:9092", "k2.internal:9092"}) ||
			!c.Kafka.TLS.Enabled ||
			c.Kafka.SASL != (SASL{Mechanism: "plain", Username: "fw", Password: "sasl-pw"}) ||
			c.Redis.TLS.ServerName != "redis.internal" || c.Redis.DB != 3 ||
			c.Slack.Token.Value() != "xoxb-from-env" || c.Slack.Channel != "#from-file" ||
			c.Metrics.Listen != "127.0.0.1:9999" || c.ShutdownTimeout != 5*time.Second {
			t.Fatalf("environment not applied: %+v", c)
		}
	}
}

func TestEnvErrorsNameTheVariable(t *testing.T) {
	tests := []struct {
		env, value string
		want       string
	}{
		{"FRAUDWATCH_KAFKA_TLS_ENABLED", "maybe", `kafka.tls.enabled: "maybe" is not true or false (set by FRAUDWATCH_KAFKA_TLS_ENABLED)`},
		{"FRAUDWATCH_SHUTDOWN_TIMEOUT", "5", `shutdown_timeout: "5" needs a unit: 5s for seconds (set by FRAUDWATCH_SHUTDOWN_TIMEOUT)`},
		{"FRAUDWATCH_REDIS_POOL_SIZE", "ten", `redis.pool_size: "ten" is not an integer (set by FRAUDWATCH_REDIS_POOL_SIZE)`},
		// A validation error, not a decoding one.
		{"FRAUDWATCH_KAFKA_START_OFFSET", "newest", `kafka.start_offset: must be earliest or latest, not "newest" (set by FRAUDWATCH_KAFKA_START_OFFSET)`},
		{"FRAUDWATCH_KAFKA_BROKERS", "ok.internal:9092,nope", `kafka.brokers[1]: "nope" is not host:port: missing port in address (set by FRAUDWATCH_KAFKA_BROKERS)`},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tt.env, tt.value)
			path := writeConfig(t, "")
			_, err := Load(path)
			wantMessages(t, err, path+": "+tt.want)
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"top level", "brokers: [a:9092]\n", []string{"brokers: unknown key"}},
		{"top-level typo", "metric:\n  listen: :1\n", []string{"metric: unknown key (did you mean metrics?)"}},
		{"nested", "kafka:\n  brokr: [a:9092]\n", []string{"kafka.brokr: unknown key (did you mean kafka.brokers?)"}},
		{"in tls", "kafka:\n  tls:\n    foo: true\n", []string{"kafka.tls.foo: unknown key"}},
		{"unknown section", "redis:\n  tls:\n    extra:\n      deep: 1\n      deeper: 2\n", []string{"redis.tls.extra: unknown key"}},
		{"slack typo", "slack:\n  webhookurl: https://hooks.example/x\n", []string{"slack.webhookurl: unknown key (did you mean slack.webhook_url?)"}},
		// Keys first: a bad value beside an unknown key waits until the
		// keys are right.
		{"keys before values", "kafka:\n  brokerz: [x]\n  commit_interval: soon\n", []string{"kafka.brokerz: unknown key"}},
		{"all reported", "kafka:\n  group: x\nredis:\n  adrs: [a:1]\nrule_file: r.yaml\n", []string{
			"kafka.group: unknown key", "redis.adrs: unknown key (did you mean redis.addrs?)",
			"rule_file: unknown key (did you mean rules_file?)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			path := writeConfig(t, tt.yaml)
			_, err := Load(path)
			var want []string
			for _, w := range tt.want {
				want = append(want, path+": "+w)
			}
			wantMessages(t, err, want...)
		})
	}
}

// Keys are read as viper reads them: case-insensitively, and with a dot in
// a key as a path.
func TestKeysAsViperReadsThem(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, "Kafka:\n  Group_ID: upper\nkafka.client_id: dotted\nredis.tls.server_name: deep\n")
	c, err := decodePath(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.GroupID != "upper" || c.Kafka.ClientID != "dotted" || c.Redis.TLS.ServerName != "deep" {
		t.Errorf("group_id %q, client_id %q, redis server_name %q", c.Kafka.GroupID, c.Kafka.ClientID, c.Redis.TLS.ServerName)
	}
	_, err = decodePath(writeConfig(t, "kafka.brokr: [a:1]\n"))
	wantMessages(t, err, "kafka.brokr: unknown key (did you mean kafka.brokers?)")
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string
	}{
		{"bare duration", "kafka:\n  commit_interval: 60\n", "kafka.commit_interval: 60 needs a unit: 60s for seconds"},
		{"bad duration", "shutdown_timeout: soon\n", `shutdown_timeout: "soon" is not a duration`},
		{"list for duration", "slack:\n  timeout: [1s]\n", "slack.timeout: expected a duration (such as 30s), got a list"},
		{"fraction", "kafka:\n  max_event_bytes: 1.5\n", "kafka.max_event_bytes: 1.5 is not an integer"},
		{"word for int", "redis:\n  db: one\n", `redis.db: "one" is not an integer`},
		{"word for bool", "redis:\n  cluster: maybe\n", `redis.cluster: "maybe" is not true or false`},
		{"number for string", "kafka:\n  group_id: 123\n", "kafka.group_id: expected a string, got an integer (quote it)"},
		{"list for string", "kafka:\n  client_id: [a]\n", "kafka.client_id: expected a string, got a list"},
		{"number in list", "kafka:\n  brokers: [a:9092, 9093]\n", "kafka.brokers[1]: expected a string, got an integer (quote it)"},
		{"mapping for list", "redis:\n  addrs: {a: b}\n", "redis.addrs: expected a list of strings, got a mapping"},
		{"scalar for section", "kafka:\n  tls: true\n", "kafka.tls: expected a mapping of kafka.tls settings, got true/false"},
		{"scalar for top section", "slack: off\n", "slack: expected a mapping of slack settings, got a string"},
		{"not yaml", "kafka: [\n", "not valid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			path := writeConfig(t, tt.yaml)
			_, err := Load(path)
			wantMessages(t, err, path+": "+tt.want)
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("Load(%s) = %v, want a not-exist error naming the file", path, err)
	}
	if _, err := Load(""); err == nil {
		t.Error("Load(\"\") succeeded")
	}
}

// TestRelativePathsFollowTheConfigFile runs from a directory holding a
// rules.yaml of its own that must not be picked up.
func TestRelativePathsFollowTheConfigFile(t *testing.T) {
	clearEnv(t)
	root := t.TempDir()
	confDir := filepath.Join(root, "etc", "fraudwatch")
	copyFile(t, "testdata/rules.yaml", filepath.Join(confDir, "rules.yaml"))
	copyFile(t, "testdata/rules.yaml", filepath.Join(confDir, "env-rules.yaml"))
	p := writePKI(t, confDir)
	writeFile(t, filepath.Join(confDir, "config.yaml"), `
rules_file: rules.yaml
kafka:
  tls: {enabled: true, ca_file: certs/ca.pem, cert_file: ./certs/client.pem, key_file: certs/../certs/client-key.pem}
redis:
  tls: {enabled: true, ca_file: certs/ca.pem, cert_file: certs/client.pem, key_file: ./certs/client-key.pem}
`)
	writeFile(t, filepath.Join(root, "rules.yaml"), "rules: not a list\n")
	t.Chdir(root)

	c, err := Load("etc/fraudwatch/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(confDir, "rules.yaml"); c.RulesFile != want {
		t.Errorf("rules_file %s, want %s", c.RulesFile, want)
	}
	if want := filepath.Join(confDir, "config.yaml"); c.File != want {
		t.Errorf("File %s, want %s", c.File, want)
	}
	if k := c.Kafka.TLS; k.CAFile != p.CA || k.CertFile != p.Cert || k.KeyFile != p.Key {
		t.Errorf("kafka tls files %q %q %q, want %q %q %q", k.CAFile, k.CertFile, k.KeyFile, p.CA, p.Cert, p.Key)
	}
	if r := c.Redis.TLS; r.CAFile != p.CA || r.CertFile != p.Cert || r.KeyFile != p.Key {
		t.Errorf("redis tls files %q %q %q, want %q %q %q", r.CAFile, r.CertFile, r.KeyFile, p.CA, p.Cert, p.Key)
	}
	if !strings.HasPrefix(c.Summary(), "etc/fraudwatch/config.yaml: ok: ") {
		t.Errorf("summary %q does not name the file as given", c.Summary())
	}

	// A relative path from the environment follows the file too.
	t.Setenv("FRAUDWATCH_RULES_FILE", "env-rules.yaml")
	c, err = Load("etc/fraudwatch/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(confDir, "env-rules.yaml"); c.RulesFile != want {
		t.Errorf("rules_file from env %s, want %s", c.RulesFile, want)
	}
	// TLS files from the environment too.
	copyFile(t, p.Cert, filepath.Join(confDir, "env-certs", "client.pem"))
	copyFile(t, p.Key, filepath.Join(confDir, "env-certs", "client-key.pem"))
	t.Setenv("FRAUDWATCH_REDIS_TLS_CERT_FILE", "env-certs/client.pem")
	t.Setenv("FRAUDWATCH_REDIS_TLS_KEY_FILE", "env-certs/client-key.pem")
	c, err = Load("etc/fraudwatch/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r, dir := c.Redis.TLS, filepath.Join(confDir, "env-certs"); r.CertFile != filepath.Join(dir, "client.pem") || r.KeyFile != filepath.Join(dir, "client-key.pem") {
		t.Errorf("redis tls files from env %s %s, want them in %s", r.CertFile, r.KeyFile, dir)
	}
}

func TestRulesErrorsPassThrough(t *testing.T) {
	clearEnv(t)
	rulesPath, err := filepath.Abs("testdata/bad-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load("testdata/bad-rules-config.yaml")
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *FieldError", err)
	}
	if fe.File != rulesPath || fe.Rule != `"orders-per-customer-1m"` || fe.Field != "window" {
		t.Errorf("rules error names file %q rule %q field %q", fe.File, fe.Rule, fe.Field)
	}
	wantMessages(t, err, rulesPath+`: rule "orders-per-customer-1m": window: 60 needs a unit`)

	// Problems of the config itself are reported alongside, and there is
	// no "no rules loaded" on top of the reason why.
	path := writeConfig(t, "rules_file: missing.yaml\nkafka:\n  group_id: \"\"\n")
	_, err = Load(path)
	missing := filepath.Join(filepath.Dir(path), "missing.yaml")
	wantMessages(t, err, "open "+missing+": no such file or directory", path+": kafka.group_id: is required")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%v does not wrap os.ErrNotExist", err)
	}

	path = writeConfig(t, "rules_file: \"\"\n")
	_, err = Load(path)
	wantMessages(t, err, path+": rules_file: is required")
}

// The dispatchers' group is group_id + ".alerts" (README, Running it for
// real: grant both in the ACLs).
func TestAlertsGroupID(t *testing.T) {
	k := Kafka{GroupID: "fraudwatch"}
	if got := k.AlertsGroupID(); got != "fraudwatch.alerts" {
		t.Errorf("AlertsGroupID = %q, want fraudwatch.alerts", got)
	}
}

// docs/configuration.md's table names every key there is, and none that is
// not: a row is how a user learns a setting exists. "`kafka.tls.enabled`,
// `.ca_file`" is shorthand for kafka.tls.ca_file; "`redis.tls.*`" means
// the keys of kafka.tls, as the row says.
func TestConfigurationTableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n| key | default | meaning |\n|---|---|---|\n")
	if !ok {
		t.Fatal("docs/configuration.md has no configuration table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	code := regexp.MustCompile("`([^`]+)`")
	var keys []string
	wildcards := map[string]string{} // redis.tls. -> kafka.tls.
	for _, row := range strings.Split(table, "\n") {
		cell := strings.Split(row, "|")[1]
		var first string
		for _, m := range code.FindAllStringSubmatch(cell, -1) {
			key := m[1]
			switch {
			case first == "":
				first = key
			case strings.HasPrefix(key, "."):
				key = first[:strings.LastIndex(first, ".")] + key
			}
			if prefix, ok := strings.CutSuffix(key, "*"); ok {
				wildcards[prefix] = "kafka" + prefix[strings.Index(prefix, "."):]
				continue
			}
			keys = append(keys, key)
		}
	}
	for wild, like := range wildcards {
		for _, k := range sortedKeys() {
			if rest, ok := strings.CutPrefix(k, like); ok {
				keys = append(keys, wild+rest)
			}
		}
	}
	slices.Sort(keys)
	if got := sortedKeys(); !slices.Equal(keys, got) {
		t.Errorf("docs/configuration.md's table lists\n%q,\nthe configuration has\n%q", keys, got)
	}
}

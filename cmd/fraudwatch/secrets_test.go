package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// An address with a one-word userinfo, in each address key, is refused by
// check and by run, which print the keys and never the credential
// (docs/configuration.md).
func TestAddressCredentialsAreRefusedUnprinted(t *testing.T) {
	const secret = "tok3nSECRET"
	path := writeConfig(t, fmt.Sprintf(`kafka:
  brokers: ["%[1]s@127.0.0.1:9092"]
redis:
  addrs: ["%[1]s@127.0.0.1:6379"]
metrics:
  listen: "%[1]s@127.0.0.1:9464"
slack:
  token: xoxb-1
  signing_secret: s3cret
  interactions_listen: "%[1]s@127.0.0.1:9091"
rules_file: rules.yaml
`, secret), testRules)
	for _, cmd := range []string{"check", "run"} {
		t.Run(cmd, func(t *testing.T) {
			out, err := command(cmd, "--config", path).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("fraudwatch %s: %v, want exit 2\n%s", cmd, err, out)
			}
			if strings.Contains(string(out), secret) {
				t.Errorf("fraudwatch %s prints the secret:\n%s", cmd, out)
			}
			for _, key := range []string{"kafka.brokers[0]", "redis.addrs[0]", "metrics.listen", "slack.interactions_listen"} {
				if !strings.Contains(string(out), key+`: "[redacted]@127.0.0.1:`) {
					t.Errorf("fraudwatch %s does not refuse %s:\n%s", cmd, key, out)
				}
			}
		})
	}
}

func TestCheckNeverPrintsSecrets(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		code    int
		secrets []string
		// want is printed too (on stdout when code is 0, else on stderr).
		want []string
	}{
		{name: "secret settings", config: `rules_file: rules.yaml
slack:
  token: xoxb-very-secret-token
  channel: "#fraud"
redis:
  password: redis-secret-pw
`, secrets: []string{"xoxb-very-secret-token", "redis-secret-pw"}},
		{name: "a password inside a redis address", config: `rules_file: rules.yaml
redis:
  addrs: ["redis://:redis-url-secret@cache:6379"]
`, code: 2, secrets: []string{"redis-url-secret"}, want: []string{`"redis://:[redacted]@cache:6379"`}},
		{name: "a password inside a broker address", config: `rules_file: rules.yaml
kafka:
  brokers: ["fw:broker-url-secret@kafka:9092"]
`, code: 2, secrets: []string{"broker-url-secret"}, want: []string{`"fw:[redacted]@kafka:9092"`}},
		{name: "sasl plain without tls, with a warning", config: `rules_file: rules.yaml
kafka:
  sasl: {mechanism: plain, username: fw, password: sasl-secret-pw}
`, secrets: []string{"sasl-secret-pw"}, want: []string{"\nwarning: kafka.sasl.mechanism: plain without kafka.tls.enabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.config, testRules)
			var stdout, stderr bytes.Buffer
			if code := run([]string{"check", "--config", path}, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, secret := range tt.secrets {
				if strings.Contains(stdout.String()+stderr.String(), secret) {
					t.Fatalf("check printed a secret: %s%s", stdout.String(), stderr.String())
				}
			}
			out := stdout.String()
			if tt.code != 0 {
				out = stderr.String()
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("check printed no %q:\n%s", w, out)
				}
			}
		})
	}
}

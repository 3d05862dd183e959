package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretRendering(t *testing.T) {
	s := Secret("hunter2")
	tests := []struct {
		format string
		want   string
	}{
		{"%v", "[redacted]"},
		{"%+v", "[redacted]"},
		{"%#v", `"[redacted]"`},
		{"%s", "[redacted]"},
		{"%q", `"[redacted]"`},
		{"%12s|", "  [redacted]|"},
		{"%-12v|", "[redacted]  |"},
		{"%x", "%!x(config.Secret=[redacted])"},
		{"%X", "%!X(config.Secret=[redacted])"},
		{"%d", "%!d(config.Secret=[redacted])"},
	}
	for _, tt := range tests {
		if got := fmt.Sprintf(tt.format, s); got != tt.want {
			t.Errorf("Sprintf(%q) = %q, want %q", tt.format, got, tt.want)
		}
		if got := fmt.Sprintf(tt.format, Secret("")); strings.Contains(got, "redacted") {
			t.Errorf("Sprintf(%q) of an empty secret = %q, want no redaction marker", tt.format, got)
		}
	}
	if got := fmt.Sprintf("%v|%q|%#v", Secret(""), Secret(""), Secret("")); got != `|""|""` {
		t.Errorf("empty secret renders %q", got)
	}
	if s.String() != "[redacted]" || s.GoString() != `"[redacted]"` || s.LogValue().String() != "[redacted]" {
		t.Errorf("String %q GoString %q LogValue %q", s.String(), s.GoString(), s.LogValue())
	}
	if j, _ := json.Marshal(s); string(j) != `"[redacted]"` {
		t.Errorf("json %s", j)
	}
	if txt, _ := s.MarshalText(); string(txt) != "[redacted]" {
		t.Errorf("text %s", txt)
	}
	if j, _ := json.Marshal(Secret("")); string(j) != `""` {
		t.Errorf("empty json %s", j)
	}
	if s.Value() != "hunter2" {
		t.Errorf("Value() = %q", s.Value())
	}
}

// TestSecretsNeverLeak renders whole configs every way a caller might and
// looks for the secrets.
func TestSecretsNeverLeak(t *testing.T) {
	clearEnv(t)
	secrets := []string{"kafka-sasl-secret-7f3a", "redis-secret-91bc", "xoxb-slack-token-secret-5d2e", "hooks-secret-4c1d",
		"slack-signing-secret-77a1"}

	dir := t.TempDir()
	copyFile(t, "testdata/full.yaml", filepath.Join(dir, "full.yaml"))
	copyFile(t, "testdata/rules.yaml", filepath.Join(dir, "rules.yaml"))
	writePKI(t, dir)
	loaded, err := Load(filepath.Join(dir, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Kafka.SASL.Password.Value() != secrets[0] || loaded.Redis.Password.Value() != secrets[1] ||
		loaded.Slack.Token.Value() != secrets[2] || loaded.Slack.SigningSecret.Value() != secrets[4] {
		t.Fatal("testdata/full.yaml no longer holds the secrets this test looks for")
	}
	// Both Slack secrets at once, which only Validate refuses.
	both := *loaded
	both.Slack.WebhookURL = Secret("https://hooks.slack.com/services/" + secrets[3])

	renderings := map[string]func() string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		renderings[verb] = func() string { return fmt.Sprintf(verb, both) }
		renderings[verb+" pointer"] = func() string { return fmt.Sprintf(verb, &both) }
	}
	renderings["json"] = func() string {
		b, err := json.Marshal(both)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"slog json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"slog text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		renderings[name] = func() string {
			var b bytes.Buffer
			log := slog.New(h(&b))
			log.Info("config", "config", both, "config_ptr", &both, "slack", both.Slack,
				"token", both.Slack.Token, "password", both.Redis.Password)
			return b.String()
		}
	}
	renderings["summary"] = both.Summary
	renderings["validate"] = func() string {
		bad := both
		bad.Slack.WebhookURL = Secret("not a url " + secrets[3])
		bad.Slack.Token = Secret(secrets[2] + "\n")
		return bad.Validate().Error()
	}

	for name, render := range renderings {
		out := render()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s shows secret %q:\n%s", name, s, out)
			}
		}
		// Proof that the secrets were there to be hidden.
		if name != "summary" && !strings.Contains(out, "redacted") && !strings.Contains(out, "slack.webhook_url") {
			t.Errorf("%s shows no redaction marker:\n%s", name, out)
		}
	}
}

// TestDecodeErrorsHideSecrets: a mistyped secret is reported without its
// value.
func TestDecodeErrorsHideSecrets(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, "redis:\n  password: 918273645\nslack:\n  token: [xoxb-list-secret]\n")
	_, err := Load(path)
	wantMessages(t, err,
		path+": redis.password: expected a string, got an integer (quote it)",
		path+": slack.token: expected a string, got a list")
	for _, s := range []string{"918273645", "xoxb-list-secret"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error shows %q: %v", s, err)
		}
	}
}

func TestRedactAddress(t *testing.T) {
	tests := []struct{ in, want string }{
		{"broker:9092", "broker:9092"},
		{"[::1]:6379", "[::1]:6379"},
		{"user:pass@broker:9092", "user:[redacted]@broker:9092"},
		{"redis://:secret@host:6379", "redis://:[redacted]@host:6379"},
		{"rediss://default:s3cr3t@host:6380/0", "rediss://default:[redacted]@host:6380/0"},
		{"redis://token@host:6379", "redis://[redacted]@host:6379"},
		{"user:p@ss@host:1", "user:[redacted]@host:1"},              // the last @ ends the userinfo
		{"user:a://b@host:1", "user:[redacted]@host:1"},             // not a scheme: a password holding ://
		{"redis://:pass/word@host:1", "redis://:[redacted]@host:1"}, // a / inside the password
		{"host:6379?password=secret", "host:6379?[redacted]"},
		{"redis://u:p@host:1?password=secret", "redis://u:[redacted]@host:1?[redacted]"},
		{"@host:1", "@host:1"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := redactAddress(tt.in); got != tt.want {
			t.Errorf("redactAddress(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

package main

import (
	"bytes"
	"flag"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// Flags are parsed wherever they stand among the arguments, and "--" ends
// them, also when it follows a flag that takes no value; "--" as a flag's
// value is a value.
func TestInterleavedFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		rest []string
		s    string
		b    bool
	}{
		{[]string{"a", "--s", "v", "b", "--b"}, []string{"a", "b"}, "v", true},
		{[]string{"--s", "--", "a", "--b"}, []string{"a"}, "--", true},
		{[]string{"--s=--", "--", "a", "--b"}, []string{"a", "--b"}, "--", false},
		{[]string{"--", "-a", "--b"}, []string{"-a", "--b"}, "", false},
		{[]string{"--b", "--", "x", "--s", "v"}, []string{"x", "--s", "v"}, "", true},
		{[]string{"x", "--b", "--", "--s", "v"}, []string{"x", "--s", "v"}, "", true},
		{[]string{"-", "-s", "v"}, []string{"-"}, "v", false},
		{[]string{"--s", "-", "x"}, []string{"x"}, "-", false},
		{[]string{"x", "y", "--b=false", "z"}, []string{"x", "y", "z"}, "", false},
		{nil, nil, "", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		s := fs.String("s", "", "")
		b := fs.Bool("b", false, "")
		rest, err := interleaved(fs, tt.args)
		if err != nil || !slices.Equal(rest, tt.rest) || *s != tt.s || *b != tt.b {
			t.Errorf("%q: %q, -s %q, -b %v, %v; want %q, -s %q, -b %v", tt.args, rest, *s, *b, err, tt.rest, tt.s, tt.b)
		}
	}
}

// Every command parses the flags after a stray argument: their help, their
// errors, and nothing but the stray argument refused.
func TestEveryCommandTakesFlagsAfterAnArgument(t *testing.T) {
	good := writeConfig(t, "rules_file: rules.yaml\n", testRules)
	for _, tt := range []struct {
		cmd  []string
		flag []string // a flag of the command, with its value
	}{
		{[]string{"run"}, []string{"--log-level", "debug"}},
		{[]string{"demo"}, []string{"--duration", "1s"}},
		{[]string{"check"}, []string{"--diff", "old.yaml"}},
		{[]string{"backtest"}, []string{"--input", "events.jsonl"}},
		{[]string{"produce"}, []string{"--input", "events.jsonl"}},
		{[]string{"topics"}, []string{"--dry-run"}},
		{[]string{"silence", "add"}, []string{"--rule", "orders-per-customer"}},
		{[]string{"silence", "list"}, []string{"--history"}},
		{[]string{"silence", "expire"}, []string{"--author", "lee"}},
	} {
		name := strings.Join(tt.cmd, " ")
		stray := "stray"
		if name == "silence expire" {
			stray = "3f9c2a1b7d4e5f60 stray" // its id, then one too many
		}
		for _, c := range []struct {
			args []string
			code int
			want string // stderr, a regular expression
		}{
			{append(append([]string{"--config", good}, strings.Fields(stray)...), tt.flag...), exitUsage,
				"^fraudwatch " + name + ": unexpected arguments: stray\n$"},
			{append(strings.Fields(stray), "--config"), exitUsage, "^flag needs an argument: -config\n"},
			{append(strings.Fields(stray), "-h"), exitOK, "\n  -config string\n"},
			{append([]string{"--config", good, "--"}, tt.flag...), exitUsage,
				"^fraudwatch " + name + ": unexpected arguments: " + regexp.QuoteMeta(strings.Join(tt.flag, " ")) + "\n$"},
		} {
			if name == "silence expire" && slices.Contains(c.args, "--") {
				c.want = "^fraudwatch silence expire: unexpected arguments: " + tt.flag[1] + "\n$" // the first is its id
			}
			var stdout, stderr bytes.Buffer
			args := append(slices.Clone(tt.cmd), c.args...)
			if code := run(args, &stdout, &stderr); code != c.code || !regexp.MustCompile(c.want).MatchString(stderr.String()) {
				t.Errorf("%q: exit %d, stderr %q; want %d and %q", args, code, stderr.String(), c.code, c.want)
			}
		}
	}
}

// docs/alerts.md's form of silence expire: the id among the flags.
func TestSilenceExpireAsDocumented(t *testing.T) {
	cfg := writeConfig(t, testkit.Process{RedisAddrs: redistest.Addrs(t), Cluster: redistest.Cluster(), Prefix: redistest.Prefix(t),
		Rules: "rules.yaml"}.YAML(), testRules)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"silence", "add", "--config", cfg, "--rule", "orders-per-customer", "--for", "1h", "--reason", "load test"},
		&stdout, &stderr); code != 0 {
		t.Fatalf("add: %d %q", code, stderr.String())
	}
	id := strings.TrimSuffix(strings.Fields(stdout.String())[1], ":")
	stdout.Reset()
	if code := run([]string{"silence", "expire", "--config", cfg, id, "--author", "lee"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "expired") {
		t.Fatalf("silence expire --config F %s --author lee: %d %q %q", id, code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"silence", "list", "--history", "--config", cfg}, &stdout, &stderr); code != 0 ||
		!regexp.MustCompile(`expired +lee +`+id).MatchString(stdout.String()) {
		t.Errorf("list --history: %d %q, want it expired by lee", code, stdout.String())
	}
}

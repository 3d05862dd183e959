package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
	"github.com/fraudwatch/fraudwatch/lua"
	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// The silence commands, as an operator types them, against a real Redis.
func TestSilenceCommands(t *testing.T) {
	prefix := redistest.Prefix(t)
	cfg := writeConfig(t, testkit.Process{RedisAddrs: redistest.Addrs(t), Cluster: redistest.Cluster(), Prefix: prefix,
		Rules: "rules.yaml"}.YAML(), testRules)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"silence"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := run("add", "--config", cfg, "--rule", "orders-per-customer", "--match", "customer_id=c-1",
		"--for", "2h", "--reason", "known reseller", "--author", "kim")
	if code != 0 || !strings.Contains(out, "rule orders-per-customer for customer_id=c-1 until") {
		t.Fatalf("add: %d %q %q", code, out, errOut)
	}
	id := strings.TrimSuffix(strings.Fields(out)[1], ":")
	if code, out, _ := run("list", "--config", cfg); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "kim") {
		t.Errorf("list: %d %q", code, out)
	}
	if code, out, _ := run("expire", id, "--config", cfg, "--author", "park"); code != 0 || !strings.Contains(out, "expired") {
		t.Errorf("expire: %d %q", code, out)
	}
	// The history says who ended it.
	if code, out, _ := run("list", "--config", cfg, "--history"); code != 0 || !regexp.MustCompile(`expired +park +`+id).MatchString(out) {
		t.Errorf("list --history: %d %q", code, out)
	}
	// Without --author, the author is $USER.
	t.Setenv("USER", "lee")
	if code, out, errOut := run("add", "--config", cfg, "--rule", "orders-per-customer", "--match", "customer_id=c-2",
		"--for", "1h", "--reason", "a test order"); code != 0 {
		t.Fatalf("add without --author: %d %q %q", code, out, errOut)
	}
	if _, out, _ := run("list", "--config", cfg); !strings.Contains(out, "lee") {
		t.Errorf("list %q does not name $USER as the author", out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "add, list or expire"},
		{[]string{"add", "--config", cfg, "--for", "1h", "--reason", "x"}, "--rule is required"},
		{[]string{"add", "--config", cfg, "--rule", "orders-per-customer", "--match", "customer_id", "--for", "1h", "--reason", "x"}, "FIELD=VALUE"},
		{[]string{"add", "--config", cfg, "--rule", "orders-per-customer", "--match", "ip=1", "--for", "1h", "--reason", "x"}, "does not group by ip"},
		{[]string{"add", "--config", cfg, "--rule", "orders-per-customer", "--for", "1h"}, "--reason is required"},
		{[]string{"add", "--config", cfg, "--rule", "orders-per-customer", "--for", "1ns", "--reason", "x"}, "--for must be at least 1s and at most 8760h0m0s, got 1ns"},
		{[]string{"expire", "--config", cfg}, "give its ID"},
		{[]string{"expire", id, "--config", cfg}, "no silence " + id},
	} {
		if code, _, errOut := run(tt.args...); code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("silence %v: exit %d, %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// A group that holds 100 silences refuses a 101st, which says so, names
// neither the group's key nor its value, and is not listed.
func TestSilenceAddRefusedLeavesNoTrace(t *testing.T) {
	prefix := redistest.Prefix(t)
	cfg := writeConfig(t, testkit.Process{RedisAddrs: redistest.Addrs(t), Cluster: redistest.Cluster(), Prefix: prefix,
		Rules: "rules.yaml"}.YAML(), testRules)
	keys, err := lua.NewKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t)
	full := keys.Silences(keys.Group([]string{"c-full"}), "orders-per-customer")
	for i := range 100 {
		rdb.HSet(t.Context(), full, fmt.Sprint("s", i), time.Now().Add(time.Hour).UnixMilli())
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"silence", "add", "--config", cfg, "--rule", "orders-per-customer", "--match", "customer_id=c-full",
		"--for", "1h", "--reason", "one too many"}, &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "this group of rule orders-per-customer already holds 100 silences") ||
		strings.Contains(stderr.String(), "c-full") || strings.Contains(stderr.String(), prefix) {
		t.Errorf("the 101st silence: exit %d, %q", code, stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"silence", "list", "--config", cfg}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "no silences in force") {
		t.Errorf("list after the refusal: %d %q", code, stdout.String())
	}
}

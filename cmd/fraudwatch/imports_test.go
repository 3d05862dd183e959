package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/fraudwatch/fraudwatch/"

// Imports run one way (CONTRIBUTING.md): each package below cmd uses
// only the packages listed here, and nothing outside cmd imports cmd. A
// new package needs a line here, which is where its place is decided.
func TestImportsRunOneWay(t *testing.T) {
	allowed := map[string][]string{
		"event":              {},
		"lua":                {"internal/redisonce"},
		"consumer":           {"event"},
		"rules":              {"alert", "event", "lua"},
		"alert":              {},
		"alert/dispatch":     {"alert", "consumer", "lua"},
		"alert/silence":      {"alert", "internal/redisonce", "lua"},
		"alert/life":         {"alert", "lua"},
		"alert/outcome":      {"alert", "alert/life", "lua"},
		"alert/slack":        {"alert", "internal/redisonce"},
		"alert/webhook":      {"alert"},
		"alert/pagerduty":    {"alert"},
		"config":             {"alert", "alert/pagerduty", "alert/webhook", "event", "lua", "rules"},
		"lua/redistest":      {},
		"lua/model":          {"lua"},
		"lua/seedbench":      {"lua"},
		"consumer/kafkatest": {},
		"internal/testkit":   {"alert"},
		"internal/standin":   {},
		"internal/redisonce": {},
		"scripts/kafkaready": {},
		"scripts":            {},
		"bench":              {"internal/standin", "internal/testkit", "lua", "lua/redistest", "lua/seedbench"},
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		seen++
		var own []string
		for _, imp := range fields[1:] {
			if p, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, p)
			}
		}
		if pkg == "cmd" || strings.HasPrefix(pkg, "cmd/") {
			continue // cmd uses everything
		}
		want, known := allowed[pkg]
		if !known {
			t.Errorf("package %s is new: give it its place in the imports' order (CONTRIBUTING.md, and this test)", pkg)
			continue
		}
		for _, imp := range own {
			if !slices.Contains(want, imp) {
				t.Errorf("%s imports %s, against the one way imports run", pkg, imp)
			}
		}
	}
	if seen < len(allowed) {
		t.Fatalf("go list named %d of the module's packages, want at least %d:\n%s", seen, len(allowed), out)
	}
}

// The rule engine and the configuration build on the alert vocabulary, not
// on its delivery (CONTRIBUTING.md): neither Kafka, Slack nor the
// dispatcher is among what they compile against, directly or not.
func TestRulesDoNotBuildOnDelivery(t *testing.T) {
	forbidden := []string{"github.com/segmentio/kafka-go", "github.com/slack-go/slack",
		module + "alert/dispatch", module + "alert/slack", module + "consumer"}
	for _, pkg := range []string{"rules", "config"} {
		out, err := exec.Command("go", "list", "-deps", "../../"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, module+pkg) {
			t.Fatalf("go list -deps %s does not name %s itself:\n%s", pkg, pkg, out)
		}
		for _, f := range forbidden {
			if i := slices.IndexFunc(deps, func(d string) bool { return d == f || strings.HasPrefix(d, f+"/") }); i >= 0 {
				t.Errorf("%s compiles against %s", pkg, deps[i])
			}
		}
	}
}

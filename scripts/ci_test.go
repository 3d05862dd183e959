package scripts

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// README gives one command for the whole suite, and CI runs exactly that
// command (.ci/run): the first command of README's block that runs
// scripts/test.sh must be a line of .ci/run as it is.
func TestCIRunsTheReadmeTestCommand(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var command string
	fenced := false
	for line := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced && strings.HasPrefix(line, "./scripts/test.sh") {
			command, _, _ = strings.Cut(line, "#")
			command = strings.TrimSpace(command)
			break
		}
	}
	if command == "" {
		t.Fatal("README gives no command that runs ./scripts/test.sh")
	}
	f, err := os.Open("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(lines, command) {
		t.Errorf(".ci/run does not run README's test command %q", command)
	}
}

// README says which make targets CI runs after the test command (the
// paragraph that starts "CI runs exactly this command"): each is a line
// of .ci/run, so that a server or a Kafka README says is tested in CI is.
func TestCIRunsTheTargetsReadmeNames(t *testing.T) {
	_, para, found := strings.Cut(readFile(t, "../README.md"), "CI runs exactly this command")
	if !found {
		t.Fatal(`README has no "CI runs exactly this command"`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	targets := regexp.MustCompile("`make ([a-z0-9-]+)").FindAllStringSubmatch(para, -1)
	if len(targets) < 4 {
		t.Fatalf("README names %d make targets CI runs, want at least 4: is the pattern still right?\n%s", len(targets), para)
	}
	run := readFile(t, "../.ci/run")
	for _, m := range targets {
		if !regexp.MustCompile(`(?m)^make ` + m[1] + `( |$)`).MatchString(run) {
			t.Errorf("README says CI runs make %s; .ci/run does not", m[1])
		}
	}
}

// The tests .ci/run's later runs leave out (FRAUDWATCH_TEST_SKIP) are
// named by name alone, for every package of a run: each must be a test of
// the binary's package or its app's, and of no other, whose test would go
// too.
func TestCISkipsOnlyTheBinarysTests(t *testing.T) {
	names := map[string]bool{}
	for line := range strings.SplitSeq(readFile(t, "../.ci/run"), "\n") {
		if strings.HasPrefix(line, "no_server") || strings.HasPrefix(line, "export FRAUDWATCH_TEST_SKIP=") {
			for _, name := range regexp.MustCompile(`Test\w+`).FindAllString(line, -1) {
				names[name] = true
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf(".ci/run skips %d tests: is the pattern still right?", len(names))
	}
	defined := map[string][]string{} // a test's name: the directories that define it
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // .git
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(`).FindAllStringSubmatch(readFile(t, path), -1) {
			defined[m[1]] = append(defined[m[1]], filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range names {
		if dirs := defined[name]; len(dirs) != 1 || dirs[0] != "../cmd/fraudwatch" && dirs[0] != "../cmd/fraudwatch/app" {
			t.Errorf(".ci/run skips %s, a test of %v: want one of ../cmd/fraudwatch or ../cmd/fraudwatch/app alone", name, dirs)
		}
	}
}

package scripts

import (
	"bufio"
	"os"
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

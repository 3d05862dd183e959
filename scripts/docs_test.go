package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// pathInDocs is a repository path the docs name in backticks: a folder and
// a file of one of the kinds the repository holds.
var pathInDocs = regexp.MustCompile("`((?:\\.?[a-z0-9_-]+/)+[a-zA-Z0-9_.-]+\\.(?:go|lua|sh|yaml|yml|md|json|java|js|xml|txt|jsonl))`")

// The manual's pages name the files that hold what they describe (the path
// of one event, the deploy kit, the scripts): each named file exists, so
// that moving code moves its mentions too.
func TestDocsNameFilesThatExist(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../CONTRIBUTING.md")
	named := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pathInDocs.FindAllStringSubmatch(string(text), -1) {
			named++
			if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
				t.Errorf("%s names %s, which does not exist", filepath.Base(page), m[1])
			}
		}
	}
	if named < 20 {
		t.Fatalf("the docs name %d files, want at least 20: is the pattern still right?", named)
	}
}

package event

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Fields are the members the decoder reads, each once, and the fields
// docs/events.md's table lists, in its order: config warns of any other
// field a rule names, so a field added to the schema without its name
// here would be warned of wrongly.
func TestFieldsAreTheSchema(t *testing.T) {
	if len(Fields) != numFields {
		t.Errorf("Fields has %d names, the decoder reads %d members", len(Fields), numFields)
	}
	seen := map[int]bool{}
	for _, f := range Fields {
		i := fieldIndex([]byte(f))
		if i < 0 || seen[i] {
			t.Errorf("field %q is not a member the decoder reads, or is listed twice", f)
		}
		seen[i] = true
	}
	doc, err := os.ReadFile("../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| field | type | rule |\n|---|---|---|\n")
	table, _, _ = strings.Cut(table, "\n\n")
	if !ok {
		t.Fatal("docs/events.md has no table of fields")
	}
	var want []string
	for row := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 2 {
			t.Fatalf("docs/events.md: row %q is not a table row", row)
		}
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[1], -1) {
			want = append(want, m[1])
		}
	}
	if !slices.Equal(Fields, want) {
		t.Errorf("event.Fields %q,\ndocs/events.md lists %q", Fields, want)
	}
}

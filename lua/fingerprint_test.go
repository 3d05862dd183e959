package lua

import (
	"strings"
	"testing"
)

// A script's fingerprint is of its code: an edit of its comments, blank
// lines or indentation keeps it; an edit of its code, even inside a
// string or of a single character, changes it.
func TestFingerprintIsOfTheCode(t *testing.T) {
	text, _ := Text(IncrAndCheckName)
	const line = "local MAX_WINDOWS, MAX_CHANGES = 64, 4096\n"
	if !strings.Contains(text, line) {
		t.Fatalf("incr_and_check has no line %q to edit", line)
	}
	same := []struct{ name, text string }{
		{"a comment reworded", strings.Replace(text, "-- incr_and_check: count", "-- incr_and_check counts", 1)},
		{"a comment added at a line's end", strings.Replace(text, line, "local MAX_WINDOWS, MAX_CHANGES = 64, 4096 -- saturation\n", 1)},
		{"a comment line and blank lines added", strings.Replace(text, line, "\n-- 2^62\n\n"+line+"\n\n", 1)},
		{"a comment block added", strings.Replace(text, line, "--[[ 2^62:\nsaturation ]]"+line, 1)},
		{"a long comment block added", strings.Replace(text, line, "--[==[ 2^62 ]] ]==]\n"+line, 1)},
		{"indented again", strings.Replace(text, line, "    "+strings.TrimSuffix(line, "\n")+"\t \n", 1)},
		{"its comments gone", stripComments(text)},
	}
	changed := []struct{ name, text string }{
		{"a name changed", strings.Replace(text, line, "local MAX_WINDOWS, MAX_CHANGE = 64, 4096\n", 1)},
		{"a line removed", strings.Replace(text, line, "", 1)},
		{"a string's text changed", strings.Replace(text, "'c:' .. src", "'d:' .. src", 1)},
		{"'--' inside a string", strings.Replace(text, "'c:' .. src", "'c--' .. src", 1)},
		{"a line joined to the next", strings.Replace(text, line, "local MAX_WINDOWS, MAX_CHANGES = 64, 4096 ", 1)},
		{"a long string's text changed", strings.Replace(text, line, "local MAX_WINDOWS = [[a -- b]]\n", 1)},
	}
	want, err := fingerprint(text)
	if err != nil {
		t.Fatal(err)
	}
	if byName, err := Fingerprint(IncrAndCheckName); err != nil || byName != want {
		t.Fatalf("Fingerprint(%s) = %q, %v; want %q", IncrAndCheckName, byName, err, want)
	}
	for _, c := range same {
		if c.text == text {
			t.Fatalf("%s: the edit did not apply", c.name)
		}
		if got, err := fingerprint(c.text); err != nil || got != want {
			t.Errorf("%s: fingerprint %q, %v; want the script's, %q", c.name, got, err, want)
		}
	}
	for _, c := range changed {
		if c.text == text {
			t.Fatalf("%s: the edit did not apply", c.name)
		}
		if got, err := fingerprint(c.text); err != nil || got == want {
			t.Errorf("%s: fingerprint %q, %v; want another than the script's", c.name, got, err)
		}
	}
}

// stripComments drops every line that is a comment alone, as a reader
// would see them: the scripts write no "--" inside a string.
func stripComments(text string) string {
	var kept []string
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// Every script has a fingerprint and a SHA, and text Lua would refuse
// (a string or a comment block left open) has none.
func TestFingerprintOfEveryScript(t *testing.T) {
	for _, sc := range all {
		if _, err := Fingerprint(sc.name); err != nil {
			t.Error(err)
		}
		if sha, ok := SHA(sc.name); !ok || sha != sc.script.Hash() {
			t.Errorf("SHA(%s) = %q, %v; want %q", sc.name, sha, ok, sc.script.Hash())
		}
	}
	if _, err := Fingerprint("no_such_script"); err == nil {
		t.Error("Fingerprint of no script answered")
	}
	if _, ok := SHA("no_such_script"); ok {
		t.Error("SHA of no script answered")
	}
	for _, text := range []string{"local s = 'open\nreturn s", "local s = \"open", "--[[ open", "local s = [==[ open ]]"} {
		if got, err := code(text); err == nil {
			t.Errorf("code(%q) = %q, want an error", text, got)
		}
	}
}

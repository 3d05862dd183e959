package scripts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CONTRIBUTING.md (Tests): pyclient.sh makes a virtual environment with
// confluent-kafka pinned by version and hash (pip refuses any other file)
// once, and hands out its python from the cache; one without its stamp is
// made anew, and a failed install leaves none. python3 is a stub here,
// whose venv's pip logs what it is asked.
func TestPyclientCaches(t *testing.T) {
	bin, calls, cache := t.TempDir(), filepath.Join(t.TempDir(), "calls"), t.TempDir()
	python3 := `#!/usr/bin/env bash
[ "$1" = -c ] && exit 0
[ "$1" = -m ] && [ "$2" = venv ] || exit 1
mkdir -p "$3/bin"
printf '#!/usr/bin/env bash\necho "pip $*" >>"$STUB_CALLS"\ncat "${@: -1}" >>"$STUB_CALLS"\nexit ${STUB_PIP_EXIT:-0}\n' >"$3/bin/pip"
printf '#!/usr/bin/env bash\nexit 0\n' >"$3/bin/python"
chmod +x "$3/bin/pip" "$3/bin/python"
echo "venv $3" >>"$STUB_CALLS"
`
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(python3), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_PYCLIENT_CACHE=" + cache}
	dir := filepath.Join(cache, "2.6.1")
	stamp := filepath.Join(dir, "stamp")
	venvs := func() int { b, _ := os.ReadFile(calls); return strings.Count(string(b), "venv ") }
	for _, step := range []struct {
		name   string
		before func()
		env    string
		code   int
		venvs  int
	}{
		{name: "the first run makes it", venvs: 1},
		{name: "the cache", venvs: 1},
		{name: "one without its stamp is made anew", before: func() { os.Remove(stamp) }, venvs: 2},
		{name: "a failed install leaves no stamp", before: func() { os.Remove(stamp) }, env: "STUB_PIP_EXIT=1", code: 1, venvs: 3},
		{name: "and is made again", venvs: 4},
	} {
		if step.before != nil {
			step.before()
		}
		stdout, stderr, code := runScript(t, append(env, step.env), "pyclient.sh")
		if code != step.code || venvs() != step.venvs {
			t.Fatalf("%s: exit %d, %d venvs; want %d, %d\n%s", step.name, code, venvs(), step.code, step.venvs, stderr)
		}
		_, err := os.Stat(stamp)
		if code == 0 && (stdout != filepath.Join(dir, "bin", "python")+"\n" || err != nil) {
			t.Fatalf("%s: printed %q, stamp %v", step.name, stdout, err)
		}
		if code != 0 && err == nil {
			t.Fatalf("%s: a failed install left its stamp", step.name)
		}
	}
	log, _ := os.ReadFile(calls)
	for _, want := range []string{"--require-hashes", "--no-deps", "--only-binary :all:",
		"confluent-kafka==2.6.1 --hash=sha256:15af5ae70c9376aba62462f20dbc846364a41f6ae4071baac36a3adb44ec29bb"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("pip was not asked %q:\n%s", want, log)
		}
	}
}

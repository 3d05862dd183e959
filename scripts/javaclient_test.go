package scripts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CONTRIBUTING.md (Tests): javaclient.sh builds testdata/clients/java once,
// into a cache named by the project's files, and hands out its launcher; one
// without its stamp is built anew, and a failed build leaves none. mvn is a
// stub here, which logs what it is asked and writes the jar where
// -Dproduce.out says.
func TestJavaclientCaches(t *testing.T) {
	bin, calls, cache := t.TempDir(), filepath.Join(t.TempDir(), "calls"), t.TempDir()
	mvn := `#!/usr/bin/env bash
echo "mvn $*" >>"$STUB_CALLS"
[ "${STUB_MVN_EXIT:-0}" = 0 ] || exit "$STUB_MVN_EXIT"
for a in "$@"; do
  case "$a" in -Dproduce.out=*) out=${a#-Dproduce.out=} ;; esac
done
mkdir -p "$out" && touch "$out/fraudwatch-test-produce.jar"
`
	if err := os.WriteFile(filepath.Join(bin, "mvn"), []byte(mvn), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_JAVACLIENT_CACHE=" + cache}
	builds := func() int { b, _ := os.ReadFile(calls); return strings.Count(string(b), "mvn ") }
	launcher := ""
	for _, step := range []struct {
		name   string
		before func()
		env    string
		code   int
		builds int
	}{
		{name: "the first run builds it", builds: 1},
		{name: "the cache", builds: 1},
		{name: "one without its stamp is built anew", before: func() { os.Remove(filepath.Join(filepath.Dir(launcher), "stamp")) }, builds: 2},
		{name: "a failed build leaves no stamp", before: func() { os.Remove(filepath.Join(filepath.Dir(launcher), "stamp")) }, env: "STUB_MVN_EXIT=1", code: 1, builds: 3},
		{name: "and is built again", builds: 4},
	} {
		if step.before != nil {
			step.before()
		}
		stdout, stderr, code := runScript(t, append(env, step.env), "javaclient.sh")
		if code != step.code || builds() != step.builds {
			t.Fatalf("%s: exit %d, %d builds; want %d, %d\n%s", step.name, code, builds(), step.code, step.builds, stderr)
		}
		if code != 0 {
			if _, err := os.Stat(filepath.Join(filepath.Dir(launcher), "stamp")); err == nil {
				t.Fatalf("%s: a failed build left its stamp", step.name)
			}
			continue
		}
		got := strings.TrimSuffix(stdout, "\n")
		if filepath.Dir(filepath.Dir(got)) != cache || filepath.Base(got) != "produce" || (launcher != "" && got != launcher) {
			t.Fatalf("%s: printed %q (before: %q), want CACHE/HASH/produce", step.name, stdout, launcher)
		}
		launcher = got
		script, err := os.ReadFile(launcher)
		if err != nil || !strings.Contains(string(script), "java -jar "+filepath.Join(filepath.Dir(launcher), "build", "fraudwatch-test-produce.jar")) {
			t.Fatalf("%s: the launcher says %q, %v", step.name, script, err)
		}
	}
	log, _ := os.ReadFile(calls)
	if !strings.Contains(string(log), "testdata/clients/java/pom.xml package") {
		t.Errorf("mvn was not asked to package the project:\n%s", log)
	}
}

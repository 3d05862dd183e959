package scripts

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fetchStep is one step of a test of a script's download cache: what is
// done to the cache first, the fetch's environment, and what must follow.
type fetchStep struct {
	name    string
	before  func(t *testing.T)
	env     []string
	code    int
	fetches int // downloads so far
	stderr  string
	cached  bool // whether a complete cache is there after
}

// fetchCache is the script under test: how to fetch, count downloads and
// tell a complete cache, where the result is (what fetch prints), and
// where a temporary copy must not be left.
type fetchCache struct {
	script   string
	args     []string
	env      []string
	fetches  func(t *testing.T) int
	dir      string
	complete func() bool
	leftover string // a glob
}

// runFetchSteps runs the steps in order, each on the cache the one before
// left.
func runFetchSteps(t *testing.T, c fetchCache, steps []fetchStep) {
	t.Helper()
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.before != nil {
				st.before(t)
			}
			stdout, stderr, code := runScript(t, append(slices.Clone(c.env), st.env...), c.script, c.args...)
			if code != st.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, st.code, stderr)
			}
			if n := c.fetches(t); n != st.fetches {
				t.Errorf("%d downloads in all, want %d", n, st.fetches)
			}
			if !strings.Contains(stderr, st.stderr) {
				t.Errorf("stderr %q does not say %q", stderr, st.stderr)
			}
			if st.code == 0 && strings.TrimSpace(stdout) != c.dir {
				t.Errorf("stdout %q, want the cache's directory %s", stdout, c.dir)
			}
			if got := c.complete(); got != st.cached {
				t.Errorf("a complete cache: %v, want %v", got, st.cached)
			}
			if left, _ := filepath.Glob(c.leftover); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// plain is fraudwatch built as users build it, without the race detector,
// once a test run: the tests of how fast the whole pipeline is (a flood
// of alerts) run it, since the detector costs the process several times
// its CPU, which a loaded machine does not have. What it checks of
// concurrency, the dispatcher's own tests check under -race.
var plain struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// plainCommand runs fraudwatch, built without the race detector, with args.
func plainCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	plain.once.Do(func() {
		if plain.dir, plain.err = os.MkdirTemp("", "fraudwatch-plain-"); plain.err != nil {
			return
		}
		plain.path = filepath.Join(plain.dir, "fraudwatch")
		out, err := exec.Command("go", "build", "-o", plain.path, ".").CombinedOutput()
		if err != nil {
			plain.err = &buildError{err: err, out: out}
		}
	})
	if plain.err != nil {
		t.Fatalf("build fraudwatch without the race detector: %v", plain.err)
	}
	return exec.Command(plain.path, args...)
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// removePlain removes the plain build, once the tests are done.
func removePlain() {
	if plain.dir != "" {
		_ = os.RemoveAll(plain.dir)
	}
}

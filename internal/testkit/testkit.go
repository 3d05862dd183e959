// Package testkit holds the helpers the tests of several packages share,
// one copy of each: waiting on a condition, a log buffer that one
// goroutine writes while a test reads it, the configuration of a
// fraudwatch process, and a sample alert. For tests and the bench, never
// the service.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond until it holds, or fails the test when timeout
// passes first; what names the condition in the failure.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer safe for one writer (a logger, a process's
// output) and a reader at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package testkit

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// A condition that comes true ends the wait; one that never does fails
// the test, not hangs it.
func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Second, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("polled %d times, want 3", n)
	}
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(ft, 50*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if !ft.failed {
		t.Error("a condition that never held did not fail the test")
	}
}

type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	runtime.Goexit()
}

// Writes from one goroutine and reads from another are safe (-race).
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			b.Write([]byte("x"))
		}
	})
	for range 100 {
		_ = b.String()
	}
	wg.Wait()
	if got := len(b.String()); got != 100 {
		t.Errorf("%d bytes, want 100", got)
	}
}

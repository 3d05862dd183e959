package redistest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// NewServer, the bench's way to a private server: it keeps its files in
// the directory given, answers, and is gone once stopped.
func TestNewServer(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable(t, err)
	}
	dir := t.TempDir()
	s, err := NewServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	rdb := Connect(t, s.Addr)
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("ping %s: %v", s.Addr, err)
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "redis-*.log")); len(logs) != 1 {
		t.Errorf("%s holds logs %v, want the server's one", dir, logs)
	}
	s.Stop()
	if err := rdb.Ping(t.Context()).Err(); err == nil {
		t.Errorf("%s still answers after Stop", s.Addr)
	}
}

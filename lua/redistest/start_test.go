package redistest

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A port taken between its pick and redis-server's bind costs a try, not
// the start: the next port is used.
func TestStartTriesAnotherPort(t *testing.T) {
	if _, err := exec.LookPath(serverProgram()); err != nil {
		unavailable(t, err)
	}
	taken := takenPort(t)
	picks := 0
	pick := func() (int, error) {
		picks++
		if picks == 1 {
			return taken, nil
		}
		return freeClusterPort()
	}
	s, err := startWith(t.TempDir(), pick, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if _, port, _ := net.SplitHostPort(s.Addr); port == strconv.Itoa(taken) || picks != 2 {
		t.Errorf("started on %s after %d picks, want the second pick, not the taken port %d", s.Addr, picks, taken)
	}
	if err := Connect(t, s.Addr).Ping(t.Context()).Err(); err != nil {
		t.Errorf("ping %s: %v", s.Addr, err)
	}
}

// A server that cannot start says why, from its log.
func TestStartSaysWhyItFailed(t *testing.T) {
	if _, err := exec.LookPath(serverProgram()); err != nil {
		unavailable(t, err)
	}
	port := takenPort(t)
	_, err := startWith(t.TempDir(), func() (int, error) { return port, nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("start: %v, want the log's line on the port in use", err)
	}
}

// takenPort listens on a port until t ends, and hangs up on whatever
// connects, as a port taken by a connection refuses: a start must not
// wait on a ping there.
func takenPort(t *testing.T) int {
	t.Helper()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	go func() {
		for {
			c, err := taken.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return taken.Addr().(*net.TCPAddr).Port
}

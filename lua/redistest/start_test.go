package redistest

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
)

// A port taken between its pick and redis-server's bind costs a try, not
// the start: the next port is used.
func TestStartTriesAnotherPort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable(t, err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// Whatever connects is hung up on, as a port taken by a connection
	// refuses: the start must not wait on a ping.
	go func() {
		for {
			c, err := taken.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	picks := 0
	pick := func() (int, error) {
		picks++
		if picks == 1 {
			return takenPort, nil
		}
		return freeClusterPort()
	}
	s, err := startWith(t.TempDir(), pick, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if _, port, _ := net.SplitHostPort(s.Addr); port == strconv.Itoa(takenPort) || picks != 2 {
		t.Errorf("started on %s after %d picks, want the second pick, not the taken port %d", s.Addr, picks, takenPort)
	}
	if err := Connect(t, s.Addr).Ping(t.Context()).Err(); err != nil {
		t.Errorf("ping %s: %v", s.Addr, err)
	}
}

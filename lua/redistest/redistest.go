// Package redistest gives tests a real redis-server.
//
// Tests share the server named by FRAUDWATCH_TEST_REDIS_ADDR (scripts/test.sh
// starts one). Without it, the first test in a test binary starts a private
// redis-server from PATH; without one there, tests skip, except under CI=true
// where a missing Redis fails the run rather than passing it unseen.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvAddr names the environment variable holding a shared test Redis.
const EnvAddr = "FRAUDWATCH_TEST_REDIS_ADDR"

var (
	sharedOnce sync.Once
	sharedAddr string
	sharedErr  error
)

// Addr returns the address of the shared test Redis.
func Addr(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() {
		if addr := os.Getenv(EnvAddr); addr != "" {
			sharedAddr = addr
			return
		}
		// Lives as long as the test binary: Pdeathsig stops it with us.
		var s *Server
		s, sharedErr = start(os.TempDir())
		if sharedErr == nil {
			sharedAddr = s.Addr
		}
	})
	if sharedErr != nil {
		unavailable(t, sharedErr)
	}
	return sharedAddr
}

// EnvCluster names the environment variable holding the seed addresses of
// a shared test Redis Cluster (comma-separated; scripts/test.sh starts one
// for make test-cluster). When it is set, Client, Addrs and Prefix serve
// the cluster instead of the single Redis.
const EnvCluster = "FRAUDWATCH_TEST_REDIS_CLUSTER"

// Cluster reports whether tests run against the shared Redis Cluster.
func Cluster() bool { return os.Getenv(EnvCluster) != "" }

// Addrs returns the addresses a fraudwatch configuration of the tests
// names (redis.addrs): the cluster's seeds, or the single Redis.
func Addrs(t testing.TB) []string {
	t.Helper()
	if Cluster() {
		return strings.Split(os.Getenv(EnvCluster), ",")
	}
	return []string{Addr(t)}
}

// Client returns a client of the shared test Redis, or Cluster, closed
// when t ends. Tests must keep to keys under their own Prefix: other
// packages' tests use the same server at the same time.
func Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	var rdb redis.UniversalClient
	if Cluster() {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: Addrs(t), MaxRetries: -1})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: Addr(t), MaxRetries: -1})
	}
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: ping %v: %v", Addrs(t), err)
	}
	return rdb
}

// Keys lists the keys matching pattern on every master: KEYS on a cluster
// client asks one node only.
func Keys(t testing.TB, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	var mu sync.Mutex
	var keys []string
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		ks, err := node.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// Connect returns a client of the Redis at addr (a private Server), closed
// when t ends. It does not check that the server answers.
func Connect(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Prefix returns a key prefix no other test uses.
func Prefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, t.Name())
	return "test:" + name + ":" + hex.EncodeToString(b[:])
}

// Server is a private redis-server that a test may stop and restart.
type Server struct {
	Addr   string
	dir    string
	args   []string // more of redis-server's settings
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
}

// Start runs a private redis-server on a free loopback port, stopped when t
// ends. Use it for tests that restart or break Redis.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start(t.TempDir())
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// NewServer starts a private redis-server on a free loopback port, with
// its files in dir, which must exist: for the bench, which has no test.
// The caller stops it.
func NewServer(dir string) (*Server, error) { return start(dir) }

// Stop kills the server. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port, with an
// empty data set (nothing is persisted).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // the port may linger for a moment
	}
	t.Fatalf("redistest: restart %s: %v", s.Addr, err)
}

func start(dir string) (*Server, error) { return startWith(dir, freePort, nil) }

// startWith starts a redis-server with args on a port pick finds free,
// trying another port should the first be taken before redis-server binds
// it.
func startWith(dir string, pick func() (int, error), args []string) (*Server, error) {
	if _, err := exec.LookPath(serverProgram()); err != nil {
		return nil, fmt.Errorf("%s not found (%s) and %s not set", serverProgram(), err, EnvAddr)
	}
	var err error
	for range 5 {
		var port int
		if port, err = pick(); err != nil {
			continue
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, args: args}
		if err = s.launch(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func (s *Server) launch() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(serverProgram(), append([]string{
		"--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis-"+port+".log")}, s.args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", serverProgram(), err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("redistest: redis-server on %s exited: %v%s", s.Addr, err, logTail(s.dir, port))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redistest: redis-server on %s did not answer: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail is the last lines of a server's log, to say why it stopped.
func logTail(dir, port string) string {
	data, err := os.ReadFile(filepath.Join(dir, "redis-"+port+".log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return "; its log ends:\n" + strings.Join(lines[max(0, len(lines)-3):], "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// clusterBus is how far above its port a cluster node listens to the
// others (Redis's default).
const clusterBus = 10000

// freeClusterPort finds a free port whose cluster bus port is free too.
func freeClusterPort() (int, error) {
	var err error
	for range 20 {
		var port int
		if port, err = freePort(); err != nil {
			continue
		}
		if port+clusterBus > 65535 {
			err = fmt.Errorf("port %d: its bus port is past 65535", port)
			continue
		}
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+clusterBus))); err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, err
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("redistest: no Redis for this test: %v", err)
	}
	t.Skipf("redistest: no Redis for this test (%v); scripts/test.sh provides one", err)
}

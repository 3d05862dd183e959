package redistest

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Lossy stands between go-redis and Redis: every connection of its
// Client goes through it, and once armed, the first command it sees
// named command (lower case; "eval" is EVAL and EVALSHA) whose bytes hold
// marker (an id of the test's own) has its reply lost. It lets the
// reply's first bytes come (so the command surely ran), then drops them
// and the connection: as a timeout or a broken connection loses one.
type Lossy struct {
	marker, command []byte
	armed           atomic.Bool
	sent            atomic.Int32 // commands named command holding marker written to Redis
}

// NewLossy returns a Lossy for the commands named command holding marker.
func NewLossy(command, marker string) *Lossy {
	return &Lossy{marker: []byte(marker), command: []byte("\r\n" + command)}
}

// Arm loses the next reply to a command of l's, and counts from 0.
func (l *Lossy) Arm() {
	l.sent.Store(0)
	l.armed.Store(true)
}

// Sent is how many commands of l's were written to Redis since Arm.
func (l *Lossy) Sent() int { return int(l.sent.Load()) }

// Client is a client whose every connection goes through l, with the
// options fraudwatch gives go-redis (MaxRetries: -1): a Redis Cluster's
// client when the tests run on one.
func (l *Lossy) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	var rdb redis.UniversalClient
	if Cluster() {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: Addrs(t), MaxRetries: -1, Dialer: l.dial})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: Addr(t), MaxRetries: -1, Dialer: l.dial})
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func (l *Lossy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: c, l: l}, nil
}

type lossyConn struct {
	net.Conn
	l    *Lossy
	lose bool
}

func (c *lossyConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.l.marker) && bytes.Contains(bytes.ToLower(p), c.l.command) {
		c.l.sent.Add(1)
		c.lose = c.lose || c.l.armed.CompareAndSwap(true, false)
	}
	return c.Conn.Write(p)
}

func (c *lossyConn) Read(p []byte) (int, error) {
	if !c.lose {
		return c.Conn.Read(p)
	}
	_, err := c.Conn.Read(p) // the reply came: the command ran
	_ = c.Conn.Close()
	if err == nil {
		err = io.EOF
	}
	return 0, err
}

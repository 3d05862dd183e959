package lua

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// lossy stands between go-redis and Redis: every connection goes through
// it, and the first script call it sees naming marker (an id of the
// test's own) has its reply lost. It lets the reply's first bytes come
// (so the script surely ran), then drops them and the connection: a reply
// lost as a timeout or a broken connection loses it.
type lossy struct {
	marker []byte
	armed  atomic.Bool
	sent   atomic.Int32 // script calls naming marker written to Redis
}

func (l *lossy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: c, l: l}, nil
}

type lossyConn struct {
	net.Conn
	l    *lossy
	lose bool
}

func (c *lossyConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.l.marker) && bytes.Contains(bytes.ToLower(p), []byte("\r\neval")) {
		c.l.sent.Add(1)
		c.lose = c.lose || c.l.armed.CompareAndSwap(true, false)
	}
	return c.Conn.Write(p)
}

func (c *lossyConn) Read(p []byte) (int, error) {
	if !c.lose {
		return c.Conn.Read(p)
	}
	_, err := c.Conn.Read(p) // the reply came: the script ran
	_ = c.Conn.Close()
	if err == nil {
		err = io.EOF
	}
	return 0, err
}

// lossyScripts are Scripts whose every connection goes through l, with the
// options fraudwatch gives go-redis (MaxRetries: -1): a Redis Cluster's
// client when the tests run on one.
func lossyScripts(t *testing.T, l *lossy) *Scripts {
	t.Helper()
	var rdb redis.UniversalClient
	if redistest.Cluster() {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Addrs(t), MaxRetries: -1, Dialer: l.dial})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: redistest.Addr(t), MaxRetries: -1, Dialer: l.dial})
	}
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(Config{}, rdb, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// A script that answers a second run otherwise than its first (sentOnce)
// is sent once: its reply lost, the call fails, where go-redis's
// ClusterClient resent it, despite MaxRetries: -1, and the resend answered
// "done already", so that the change it made went uncounted. Each case's
// call runs once in Redis all the same.
func TestALostReplyIsNotResent(t *testing.T) {
	open := func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) error {
		_, _, err := s.OpenOutcomeAlert(ctx, k, OutcomeAlert{ID: id, Rule: "r", Ref: []byte(`{}`), Orders: []string{"o-" + id}}, testBounds)
		return err
	}
	for _, tc := range []struct {
		name  string
		setup func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) error // before the reply is lost
		call  func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) error
		ran   func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) (bool, error)
	}{
		{name: "outcome_open", call: open, ran: alertNoted},
		{
			name: "outcome_open pipelined",
			call: func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) error {
				_, err := s.OpenOutcomeAlerts(ctx, k, []OutcomeAlert{{ID: id, Rule: "r", Ref: []byte(`{}`), Orders: []string{"o-" + id}}}, testBounds)
				return err
			},
			ran: alertNoted,
		},
		{
			name: "outcome_record",
			call: func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) error {
				_, err := s.RecordOutcome(ctx, k, OrderOutcome{OrderID: id, Label: "fraud", Source: "s", OccurredAt: at(1), Via: "topic"}, testBounds)
				return err
			},
			ran: func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) (bool, error) {
				_, ok, err := s.StoredOutcomeOf(ctx, k, id)
				return ok, err
			},
		},
		{
			name:  "outcome_label",
			setup: open,
			call: func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) error {
				_, err := s.LabelOutcomeAlert(ctx, k, id, "fraud", "cli:t", time.Time{})
				return err
			},
			ran: func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) (bool, error) {
				a, _, err := s.StoredAlertOf(ctx, k, id)
				return a.Label == "fraud", err
			},
		},
		{
			name: "alert_park",
			call: func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) error {
				_, err := s.Park(ctx, k.Alert(id)+":parked", id, []byte(`{}`), 10, time.Hour)
				return err
			},
			ran: func(ctx context.Context, s *Scripts, k OutcomeKeys, id string) (bool, error) {
				p, err := s.Parked(ctx, k.Alert(id)+":parked")
				return p[id] != "", err
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			k := outcomeKeys(t, redistest.Prefix(t))
			id := "once-" + tc.name
			l := &lossy{marker: []byte(id)}
			s := lossyScripts(t, l)
			if tc.setup != nil {
				if err := tc.setup(ctx, s, k, id); err != nil {
					t.Fatal(err)
				}
				l.sent.Store(0)
			}
			l.armed.Store(true)
			err := tc.call(ctx, s, k, id)
			if _, reply := errors.AsType[redis.Error](err); err == nil || reply {
				t.Errorf("the call answered %v; want the lost reply's error", err)
			}
			if n := l.sent.Load(); n != 1 {
				t.Errorf("the script was sent %d times; want once", n)
			}
			if ran, err := tc.ran(ctx, s, k, id); err != nil || !ran {
				t.Errorf("the script did not run: %v, %v", ran, err)
			}
		})
	}
}

func alertNoted(ctx context.Context, s *Scripts, k OutcomeKeys, id string) (bool, error) {
	_, ok, err := s.StoredAlertOf(ctx, k, id)
	return ok, err
}

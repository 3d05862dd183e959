package lua

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/lua/redistest"
)

// lossyScripts are Scripts whose every connection goes through l.
func lossyScripts(t *testing.T, l *redistest.Lossy) *Scripts {
	t.Helper()
	s, err := New(Config{}, l.Client(t), prometheus.NewRegistry())
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
			l := redistest.NewLossy("eval", id)
			s := lossyScripts(t, l)
			if tc.setup != nil {
				if err := tc.setup(ctx, s, k, id); err != nil {
					t.Fatal(err)
				}
			}
			l.Arm()
			err := tc.call(ctx, s, k, id)
			if _, reply := errors.AsType[redis.Error](err); err == nil || reply {
				t.Errorf("the call answered %v; want the lost reply's error", err)
			}
			if n := l.Sent(); n != 1 {
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

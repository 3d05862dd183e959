package consumer

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fraudwatch/fraudwatch/internal/testkit"
)

func TestJoinFailuresLevels(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		failures []time.Duration // after t0
		want     []slog.Level
	}{
		{"a coordinator loading for a few seconds is INFO", []time.Duration{0, time.Second, 2 * time.Second}, []slog.Level{slog.LevelInfo, slog.LevelInfo, slog.LevelInfo}},
		{"failing for warnAfter is a WARN", []time.Duration{0, 29 * time.Second, 30 * time.Second}, []slog.Level{slog.LevelInfo, slog.LevelInfo, slog.LevelWarn}},
		{"then at most a WARN a minute", []time.Duration{0, 30 * time.Second, 31 * time.Second, 89 * time.Second, 90 * time.Second, 91 * time.Second},
			[]slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelInfo, slog.LevelInfo, slog.LevelWarn, slog.LevelInfo}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := joinFailures{warnAfter: 30 * time.Second}
			for i, d := range tt.failures {
				if got := j.failed(t0.Add(d)); got != tt.want[i] {
					t.Errorf("failure %d at +%v: %v, want %v", i+1, d, got, tt.want[i])
				}
			}
		})
	}
	t.Run("a join ends the streak", func(t *testing.T) {
		j := joinFailures{warnAfter: 30 * time.Second}
		j.failed(t0)
		j.failed(t0.Add(40 * time.Second))
		if n, lasted, warned := j.joined(t0.Add(41 * time.Second)); n != 2 || lasted != 41*time.Second || !warned {
			t.Errorf("joined: %d failures over %v, warned %v; want 2 over 41s, warned", n, lasted, warned)
		}
		if got := j.failed(t0.Add(50 * time.Second)); got != slog.LevelInfo {
			t.Errorf("a new streak's first failure: %v, want INFO", got)
		}
		if j.warnAfter != 30*time.Second {
			t.Errorf("warnAfter %v after a join, want it kept", j.warnAfter)
		}
	})
}

// refuseJoins makes the fake coordinator answer the group's first n
// JoinGroup requests with COORDINATOR_NOT_AVAILABLE, as a broker whose
// offsets topic is still loading does; it returns how many it refused.
func refuseJoins(e *env, n int64) *atomic.Int64 {
	var refused atomic.Int64
	fake := e.cluster.Fake()
	fake.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Load() >= n {
			return nil, nil, false
		}
		fake.KeepControl()
		refused.Add(1)
		resp := req.(*kmsg.JoinGroupRequest).ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = 15 // COORDINATOR_NOT_AVAILABLE
		return resp, nil, true
	})
	return &refused
}

// levels are the levels of the logged lines whose message starts with msg.
func levels(t *testing.T, logs *testkit.Buffer, msg string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, msg) {
			out = append(out, rec.Level)
		}
	}
	return out
}

// A coordinator that refuses joins for a moment (a broker just started:
// the first run on a new broker logged four WARNs) is INFO; one that
// refuses them past JoinWarnAfter is a WARN, and the join that ends it
// says so.
func TestFailedJoinsWarnOnlyWhenTheyLast(t *testing.T) {
	tests := []struct {
		name      string
		warnAfter time.Duration
		wantWarn  bool
	}{
		{"a moment", time.Minute, false},
		{"past JoinWarnAfter", time.Nanosecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fakeEnv(t, 1)
			refused := refuseJoins(e, 3)
			cfg := e.config()
			cfg.JoinWarnAfter = tt.warnAfter
			logs, c := runLoggingConsumer(t, cfg)
			waitFor(t, 30*time.Second, "the assignment", c.Ready)
			if refused.Load() != 3 {
				t.Fatalf("%d joins refused, want 3", refused.Load())
			}
			failed := levels(t, logs, "joining consumer group failed")
			if len(failed) != 3 {
				t.Fatalf("failed joins logged %v, want 3 lines", failed)
			}
			warns := 0
			for _, l := range append(failed, levels(t, logs, "kafka group")...) {
				if l == "WARN" || l == "ERROR" {
					warns++
				}
			}
			again := levels(t, logs, "consumer group joined again")
			if tt.wantWarn && (warns != 1 || len(again) != 1) {
				t.Errorf("%d WARNs and %v 'joined again', want 1 WARN (the first failure past JoinWarnAfter; then one a minute) and 1 INFO", warns, again)
			}
			if !tt.wantWarn && (warns != 0 || len(again) != 0) {
				t.Errorf("%d WARNs and %v 'joined again', want none", warns, again)
			}
		})
	}
}

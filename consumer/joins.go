package consumer

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
)

// joinFailures decides how loud a failed join of the consumer group is. A
// coordinator that is loading or moving (a new broker, a broker's restart,
// a rebalance) refuses joins for a second or two, which nobody needs to
// act on: those failures are INFO. A group still not joined after
// warnAfter is, and is a WARN then and at most once a minute after.
type joinFailures struct {
	warnAfter time.Duration
	since     time.Time // the streak's first failure; zero while joined
	n         int
	warned    time.Time // the streak's last WARN; zero if none
}

// joinWarnEvery bounds a streak's WARNs.
const joinWarnEvery = time.Minute

// failed records a failure at now and returns the level to log it at.
func (j *joinFailures) failed(now time.Time) slog.Level {
	if j.n == 0 {
		j.since = now
	}
	j.n++
	if now.Sub(j.since) < j.warnAfter || (!j.warned.IsZero() && now.Sub(j.warned) < joinWarnEvery) {
		return slog.LevelInfo
	}
	j.warned = now
	return slog.LevelWarn
}

// joined ends the streak; it returns its failures and length, and whether
// it was long enough to WARN (then its end is worth saying too).
func (j *joinFailures) joined(now time.Time) (n int, lasted time.Duration, warned bool) {
	n, lasted, warned = j.n, now.Sub(j.since), !j.warned.IsZero()
	*j = joinFailures{warnAfter: j.warnAfter}
	return n, lasted, warned
}

// groupConfig is kafka-go's configuration of the membership.
func (c *Group) groupConfig() kafka.ConsumerGroupConfig {
	start := kafka.LastOffset
	if c.cfg.StartEarliest {
		start = kafka.FirstOffset
	}
	return kafka.ConsumerGroupConfig{
		ID:                c.cfg.GroupID,
		Brokers:           c.cfg.Brokers,
		Dialer:            c.dialer,
		Topics:            c.cfg.Topics,
		HeartbeatInterval: c.cfg.HeartbeatInterval,
		SessionTimeout:    c.cfg.SessionTimeout,
		RebalanceTimeout:  c.cfg.RebalanceTimeout,
		// Rejoin quickly after a failed join; the coordinator throttles.
		JoinGroupBackoff: time.Second,
		StartOffset:      start,
		Logger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.log.Debug("kafka group: "+fmt.Sprintf(msg, args...), "group", c.cfg.GroupID)
		}),
		// What kafka-go's group logs as errors (a coordinator loading or
		// moving, a failed join or heartbeat) ends a generation or fails
		// a join, which Run says at the level the failure deserves.
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.log.Info("kafka group: "+fmt.Sprintf(msg, args...), "group", c.cfg.GroupID)
		}),
	}
}

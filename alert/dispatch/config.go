package dispatch

import (
	"errors"
	"time"

	"github.com/fraudwatch/fraudwatch/lua"
)

// DispatcherConfig tunes delivery. Zero values take the defaults.
type DispatcherConfig struct {
	// MaxAttempts bounds the attempts of one message, 429s included.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential wait between failed
	// attempts that carry no Retry-After.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxRetryAfter caps a server's Retry-After.
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds one delivery attempt.
	AttemptTimeout time.Duration
	// InFlightGrace is how long a post under way may still take once the
	// caller's context ends (default 5 s): cut at once, one the receiver
	// took would read as failed and be sent again by whoever comes next.
	InFlightGrace time.Duration
	// KeyPrefix starts the Redis keys the dispatcher builds for the alerts
	// it reads (redis.key_prefix; default "fw").
	KeyPrefix string
	// Buckets is how many hash tags the engine spreads the groups'
	// counting keys over (redis.buckets; default lua.Buckets): the
	// dispatcher reads a crossing's marks among them.
	Buckets int
	// ParkedRetry is how often parked alerts are tried again (default
	// 30 s): those whose channel the notifier refused.
	ParkedRetry time.Duration
	// MaxParked bounds the alerts parked at once, by all replicas together
	// (default 1,000, about 1 KB each, which every replica reads each
	// ParkedRetry): past it, an alert whose channel is refused is not
	// parked but stays on its partition, retried.
	MaxParked int
	// ChannelBudget and OverallBudget bound the messages the receiver
	// gets, per destination (default 1 a second, up to 3 at once: Slack's
	// own limit) and in all (default 5 a second, up to 15), shared by
	// every replica: alerts, digests and parked retries alike. Past them,
	// alerts wait in Redis: a notifier that sends digests (Digester) gets
	// them as one digest per rule, of which DigestSize (default 10) are
	// listed; any other gets them one by one, as the budget allows (a
	// webhook, PagerDuty: set its budget within the receiver's own limit).
	ChannelBudget lua.Budget
	OverallBudget lua.Budget
	DigestSize    int
	// MaxWaiting bounds the alerts waiting in Redis for their
	// destination's budget, by all replicas together (default 20,000:
	// a minute of 150 alerts a second fits twice; each but the first of a
	// rule's digest kept compact, without evidence, about 0.5 KB): past
	// it, an alert past its budget is not kept but stays on its
	// partition, retried, as at MaxParked.
	MaxWaiting int
	// WaitingDrain is how often the waiting alerts are sent, as their
	// budgets allow (default 250 ms).
	WaitingDrain time.Duration
	// MaxOpen bounds the index of open alerts that `fraudwatch alert
	// list` and the status page read (default 10,000, about 100 bytes
	// each): past it, the oldest leave the index (not their life).
	MaxOpen int
	// UnknownRuleGrace is how long a sealed alert (one fraudwatch
	// published) of a rule the dispatcher does not know is retried before
	// it is dropped (default a minute), from when it was published or this
	// process first read it, whichever is sooner. Replicas reload a changed
	// rules file within a second of each other, so an alert of a rule just
	// added may reach one that has not yet. Nothing else waits: a message
	// no seal vouches for is dropped at once. A rule a reload removes is
	// delivered as long, under its last settings.
	UnknownRuleGrace time.Duration
	// SkipHistory makes the receiver deliver only the alerts published
	// since it first ran, in any replica (since.go): set for a receiver
	// whose alerts group is new, so that adding one to a running
	// deployment does not send it the alerts topic's week of history.
	SkipHistory bool
}

func (c *DispatcherConfig) setDefaults() {
	defaults := DispatcherConfig{
		MaxAttempts: 5, MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second,
		MaxRetryAfter: 5 * time.Minute, AttemptTimeout: 15 * time.Second, InFlightGrace: 5 * time.Second, KeyPrefix: "fw",
		ParkedRetry: 30 * time.Second, MaxParked: 1000, DigestSize: 10, UnknownRuleGrace: time.Minute,
		ChannelBudget: lua.Budget{Rate: 1, Burst: 3}, OverallBudget: lua.Budget{Rate: 5, Burst: 15},
		MaxWaiting: 20000, WaitingDrain: 250 * time.Millisecond, MaxOpen: 10000,
	}
	setDefault(&c.MaxOpen, defaults.MaxOpen)
	setDefault(&c.MaxAttempts, defaults.MaxAttempts)
	setDefault(&c.MinBackoff, defaults.MinBackoff)
	setDefault(&c.MaxBackoff, defaults.MaxBackoff)
	setDefault(&c.MaxRetryAfter, defaults.MaxRetryAfter)
	setDefault(&c.AttemptTimeout, defaults.AttemptTimeout)
	setDefault(&c.InFlightGrace, defaults.InFlightGrace)
	setDefault(&c.KeyPrefix, defaults.KeyPrefix)
	setDefault(&c.Buckets, lua.Buckets)
	setDefault(&c.ParkedRetry, defaults.ParkedRetry)
	setDefault(&c.MaxParked, defaults.MaxParked)
	setDefault(&c.MaxWaiting, defaults.MaxWaiting)
	setDefault(&c.WaitingDrain, defaults.WaitingDrain)
	setDefault(&c.DigestSize, defaults.DigestSize)
	setDefault(&c.UnknownRuleGrace, defaults.UnknownRuleGrace)
	setDefault(&c.ChannelBudget, defaults.ChannelBudget)
	setDefault(&c.OverallBudget, defaults.OverallBudget)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate reports settings that cannot work.
func (c *DispatcherConfig) Validate() error {
	switch {
	case c.MaxAttempts < 1:
		return errors.New("alert: max attempts must be at least 1")
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return errors.New("alert: backoff must satisfy 0 < min <= max")
	case c.MaxRetryAfter <= 0 || c.AttemptTimeout <= 0 || c.InFlightGrace <= 0:
		return errors.New("alert: max retry-after, attempt timeout and in-flight grace must be positive")
	case c.MaxParked < 1 || c.MaxParked > 1000000 || c.MaxWaiting < 1 || c.MaxWaiting > 1000000 || c.MaxOpen < 1 || c.MaxOpen > 1000000:
		return errors.New("alert: max parked, max waiting and max open alerts must be 1 to 1,000,000")
	case c.ParkedRetry <= 0 || c.WaitingDrain <= 0 || c.UnknownRuleGrace < 0:
		return errors.New("alert: the parked retry and waiting drain intervals must be positive, the unknown-rule grace not negative")
	}
	return nil
}

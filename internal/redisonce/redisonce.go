// Package redisonce sends a Redis command at most once.
//
// A command whose second run answers otherwise than its first (SET NX, a
// script that reports a change once) must not be resent after a lost
// reply (a timeout, a broken connection): the resend answers "done
// already" and hides that the first run made the change. go-redis's
// MaxRetries: -1 stops a single server's client from resending; a
// ClusterClient resends a command after an EOF or a timeout up to
// MaxRedirects times whatever MaxRetries says, unless the command's
// NoRetry() is true (v9.23.0: ClusterClient.process for one command;
// cmdsContainNoRetry for a node's commands of a pipeline, none of which
// are resent then). It still follows MOVED and ASK, which ran nothing.
// Sent once, a lost reply is the call's error.
package redisonce

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cmd is a command that go-redis sends at most once.
type Cmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to resend the command.
func (Cmd) NoRetry() bool { return true }

// Bool is a command of a true-or-false reply that go-redis sends at most
// once.
type Bool struct{ *redis.BoolCmd }

// NoRetry tells go-redis not to resend the command.
func (Bool) NoRetry() bool { return true }

// Processor is what SetNX needs of a go-redis client.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// SetNX sets key to value for ttl (a whole number of milliseconds, at
// least one) unless it exists, as go-redis's SetNX does, and reports
// whether it did; it is sent once.
func SetNX(ctx context.Context, rdb Processor, key string, value any, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, fmt.Errorf("set %s once: a TTL of %v; want 1ms or more", key, ttl)
	}
	cmd := redis.NewBoolCmd(ctx, "set", key, value, "px", ttl.Milliseconds(), "nx")
	_ = rdb.Process(ctx, Bool{cmd}) // the error is cmd's
	return cmd.Result()
}

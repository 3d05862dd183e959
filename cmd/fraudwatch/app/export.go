package app

import (
	"github.com/redis/go-redis/v9"

	"github.com/fraudwatch/fraudwatch/config"
)

// NewRedis connects to the configured Redis as `fraudwatch run` does, for
// the commands that work on its state (fraudwatch silence).
func NewRedis(c config.Redis) (redis.UniversalClient, error) { return newRedis(c) }

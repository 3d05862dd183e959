package redistest

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// EnvServer and EnvCLI name the environment variables that point the
// servers tests start (Start, StartCluster, NewCluster) at other programs
// than redis-server and redis-cli on PATH: make test-valkey sets them to
// valkey-server and valkey-cli (scripts/valkey.sh), make test-redis8 the
// server to Redis 8's redis-server (scripts/redis8.sh).
const (
	EnvServer = "FRAUDWATCH_TEST_REDIS_SERVER"
	EnvCLI    = "FRAUDWATCH_TEST_REDIS_CLI"
)

// serverProgram is the server tests start: EnvServer, else redis-server.
func serverProgram() string { return programOr(EnvServer, "redis-server") }

// cliProgram is what makes and reshards clusters: EnvCLI, else redis-cli.
func cliProgram() string { return programOr(EnvCLI, "redis-cli") }

func programOr(env, def string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return def
}

// Version names the server rdb talks to and its version from INFO server,
// as "Redis 7.0.15", "Redis 8.2.3" or "Valkey 8.1.8": Valkey reports a
// redis_version too (7.2.4, the Redis it is compatible with), which is not
// its own.
func Version(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("redistest: info server: %w", err)
	}
	return versionOf(info)
}

func versionOf(info string) (string, error) {
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	switch {
	case fields["valkey_version"] != "":
		return "Valkey " + fields["valkey_version"], nil
	case fields["redis_version"] != "":
		return "Redis " + fields["redis_version"], nil
	}
	return "", fmt.Errorf("redistest: INFO server names no version")
}

package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every test here needs Redis: check it once and say what is missing,
	// rather than fail each test with a connection error. Failing (not
	// skipping) keeps CI from passing without these tests.
	if err := checkRedis(); err != nil {
		fmt.Fprint(os.Stderr, redisHelp(err))
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// checkRedis pings the test server.
func checkRedis() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr()})
	defer rdb.Close()
	return rdb.Ping(ctx).Err()
}

// redisHelp says what the tests need and how to provide it.
func redisHelp(err error) string {
	return fmt.Sprintf(`
redisstore tests need Redis 6.2 or later, and could not use it:

    %v

They connect to $%s, or by default to 127.0.0.1:6379 (no password). To
start one on Debian or Ubuntu:

    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no

or set %s to the address of another server. These tests fail, rather
than skip, without it. (The chaos test starts servers of its own with
redis-server, on ports it picks.)

`, err, addrEnv, addrEnv)
}

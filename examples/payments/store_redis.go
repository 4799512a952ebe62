package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
)

// defaultRedisAddr is the Redis server the demo uses unless
// EXACTLYONCE_REDIS_ADDR or -redis says otherwise.
const defaultRedisAddr = "127.0.0.1:6379"

// envRedisAddr returns EXACTLYONCE_REDIS_ADDR, or defaultRedisAddr.
func envRedisAddr() string {
	if addr := os.Getenv("EXACTLYONCE_REDIS_ADDR"); addr != "" {
		return addr
	}
	return defaultRedisAddr
}

// openRedis gives every instance a client of its own on cfg.RedisAddr and a
// store on a key prefix of the run's, whose keys are deleted afterwards.
func openRedis(ctx context.Context, cfg config) (storeOpener, func(), error) {
	admin := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})
	if err := admin.Ping(ctx).Err(); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("connect to Redis at %s: %w", cfg.RedisAddr, err)
	}
	prefix := fmt.Sprintf("payments_demo_%d", time.Now().UnixNano())
	var (
		mu      sync.Mutex
		clients []*redis.Client
	)
	drop := func() {
		mu.Lock()
		for _, c := range clients {
			c.Close()
		}
		clients = nil
		mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := admin.Scan(dctx, 0, "{"+prefix+":*", 1000).Iterator()
		for iter.Next(dctx) {
			admin.Del(dctx, iter.Val())
		}
		admin.Close()
	}
	open := func(context.Context) (idempotency.Store, error) {
		c := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})
		store, err := redisstore.New(c, redisstore.WithPrefix(prefix))
		if err != nil {
			c.Close()
			return nil, err
		}
		mu.Lock()
		clients = append(clients, c)
		mu.Unlock()
		return store, nil
	}
	return open, drop, nil
}

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/redis/go-redis/v9"
)

func init() { openers["redis"] = openRedis }

// redisBackend is redisstore with the ledger in hashes under the prefix.
// Redis has no transaction with the handler's data: the effect is a step
// whose downstream keeps the first body it is given per downstream key, as
// a downstream service that honours keys does, and counts its calls.
type redisBackend struct {
	rdb    *redis.Client
	prefix string
	store  *redisstore.Store
}

func openRedis(ctx context.Context, addr, prefix string, _, _ bool) (backend, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	store, err := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &redisBackend{rdb: rdb, prefix: prefix, store: store}, nil
}

func (b *redisBackend) Store() idempotency.Store { return b.store }

func (b *redisBackend) Close() { _ = b.rdb.Close() }

// Migrate does nothing: a Redis store has no schema.
func (b *redisBackend) Migrate(context.Context) error { return nil }

func (b *redisBackend) Schema(context.Context) (string, error) { return "", nil }

func (b *redisBackend) effects() string { return b.prefix + ":upgrade:effects" }
func (b *redisBackend) calls() string   { return b.prefix + ":upgrade:calls" }

func (b *redisBackend) Call(ctx context.Context, key, step, _ string) error {
	return b.rdb.HIncrBy(ctx, b.calls(), key+"\x00"+step, 1).Err()
}

// effectLua keeps the first body of a downstream key (the record's key) and
// counts every call.
var effectLua = redis.NewScript(`
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], ARGV[1] .. '\0effect', 1)
return redis.call('HGET', KEYS[1], ARGV[1])
`)

func (b *redisBackend) Effect(ctx context.Context, key, body string) (string, error) {
	e := idempotency.FromContext(ctx)
	if e == nil {
		return "", fmt.Errorf("no execution for %s", key)
	}
	out, err := e.Step(ctx, "effect", func(ctx context.Context, _ string) ([]byte, error) {
		s, err := effectLua.Run(ctx, b.rdb, []string{b.effects(), b.calls()}, key, body).Text()
		return []byte(s), err
	})
	return string(out), err
}

func (b *redisBackend) Relay(context.Context) (int, error) { return 0, nil }

func (b *redisBackend) Ledger(ctx context.Context) (Ledger, error) {
	l := Ledger{Effects: map[string][]string{}, Calls: map[string]map[string]int{}}
	effects, err := b.rdb.HGetAll(ctx, b.effects()).Result()
	if err != nil {
		return l, err
	}
	for k, v := range effects {
		l.Effects[k] = []string{v}
	}
	calls, err := b.rdb.HGetAll(ctx, b.calls()).Result()
	if err != nil {
		return l, err
	}
	for kv, n := range calls {
		k, step, _ := strings.Cut(kv, "\x00")
		if l.Calls[k] == nil {
			l.Calls[k] = map[string]int{}
		}
		var c int
		_, _ = fmt.Sscan(n, &c)
		l.Calls[k][step] += c
	}
	return l, nil
}

// Drop deletes every key of the prefix: the store's ("{prefix:shard}...")
// and the ledger's ("prefix:upgrade:...").
func (b *redisBackend) Drop(ctx context.Context) error {
	for _, pattern := range []string{`\{` + b.prefix + `:*`, b.prefix + ":upgrade:*"} {
		iter := b.rdb.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			if err := b.rdb.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Package redisstore is the Redis store for package idempotency, built on
// go-redis v9. It lives in a module of its own so that the client never
// reaches users of the root module.
package redisstore

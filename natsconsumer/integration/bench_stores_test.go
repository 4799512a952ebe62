package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/redisstore"
)

// benchStore is one durable store of BenchmarkConsumerThroughput: the
// store (which batches), the same store without its batches (ours as it
// was before them), and the one-row write of the plain consumer that
// commits one row per message on the store's database.
type benchStore struct {
	name      string
	store     idempotency.BatchStore
	unbatched idempotency.Store
	writeOne  func(context.Context) error
}

// unbatchedTx is a TxStore that hides the store's batches.
type unbatchedTx struct{ idempotency.TxStore }

// unbatched is a Store that hides the store's batches.
type unbatched struct{ idempotency.Store }

func randomName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// postgresBench is pgstore on a schema of its own, with a table for the
// plain consumer's rows.
func postgresBench(b *testing.B) benchStore {
	store, pool, schema := newOutbox(b)
	table := pgx.Identifier{schema, "handled"}.Sanitize()
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+table+" (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())"); err != nil {
		b.Fatal(err)
	}
	return benchStore{name: "pgstore", store: store, unbatched: unbatchedTx{store},
		writeOne: func(ctx context.Context) error {
			_, err := pool.Exec(ctx, "INSERT INTO "+table+" DEFAULT VALUES")
			return err
		}}
}

// mysqlBench is mysqlstore on tables of their own (EXACTLYONCE_MYSQL_DSN,
// default the machine's MariaDB), with a table for the plain consumer's rows.
func mysqlBench(b *testing.B) benchStore {
	dsn := os.Getenv("EXACTLYONCE_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	prefix := "natsbench_" + randomName() + "_"
	store, err := mysqlstore.Open(cfg, mysqlstore.WithTablePrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	db := store.DB()
	if err := db.PingContext(ctx); err != nil {
		b.Fatalf("the benchmark needs MySQL at %s (EXACTLYONCE_MYSQL_DSN): %v", dsn, err)
	}
	if err := mysqlstore.Migrate(ctx, db, prefix); err != nil {
		b.Fatal(err)
	}
	table := "`" + prefix + "handled`"
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id BIGINT AUTO_INCREMENT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, t := range []string{"idempotency_keys", "idempotency_generations", "handled"} {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+prefix+t+"`")
		}
	})
	return benchStore{name: "mysqlstore", store: store, unbatched: unbatchedTx{store},
		writeOne: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "INSERT INTO "+table+" () VALUES ()")
			return err
		}}
}

// redisBench is redisstore under a key prefix of its own
// (EXACTLYONCE_REDIS_ADDR, default the machine's Redis); the plain
// consumer's write is one SET per message.
func redisBench(b *testing.B) benchStore {
	addr := os.Getenv("EXACTLYONCE_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2 * benchInFlight})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		b.Fatalf("the benchmark needs Redis at %s (EXACTLYONCE_REDIS_ADDR): %v", addr, err)
	}
	prefix := "natsbench_" + randomName()
	store, err := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, pattern := range []string{"{" + prefix + ":*", prefix + ":handled:*"} {
			iter := rdb.Scan(context.Background(), 0, pattern, 1000).Iterator()
			for iter.Next(context.Background()) {
				_ = rdb.Del(context.Background(), iter.Val()).Err()
			}
		}
	})
	return benchStore{name: "redisstore", store: store, unbatched: unbatched{store},
		writeOne: func(ctx context.Context) error {
			return rdb.Set(ctx, prefix+":handled:"+randomName(), "1", 0).Err()
		}}
}

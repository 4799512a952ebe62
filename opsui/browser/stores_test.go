package browser_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/idempotency/redisstore"
)

// The services every store test uses (see .ci/run).
const (
	postgresDSN = "postgres://postgres@127.0.0.1:5432/test"
	mysqlDSN    = "root@tcp(127.0.0.1:3306)/test"
	redisAddr   = "127.0.0.1:6379"
)

// storeCase opens a fresh store and returns it with the means to move its
// clock forward.
type storeCase struct {
	name string
	open func(t *testing.T) (idempotency.Store, func(time.Duration))
}

var storeCases = []storeCase{
	{"memory", func(t *testing.T) (idempotency.Store, func(time.Duration)) {
		mock := clock.NewMock()
		mock.Set(time.Now())
		return idempotency.NewMemoryStore(mock), mock.Add
	}},
	{"postgres", openPostgres},
	{"mysql", openMySQL},
	{"redis", openRedis},
}

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func openPostgres(t *testing.T) (idempotency.Store, func(time.Duration)) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, postgresDSN)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("PostgreSQL is not reachable at %s (start it, see .ci/run): %v", postgresDSN, err)
	}
	t.Cleanup(pool.Close)
	schema := randomName("opsui_")
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	shift := new(pgstore.TimeShift)
	s, err := pgstore.New(pool, pgstore.WithSchema(schema), pgstore.WithTimeShift(shift))
	if err != nil {
		t.Fatal(err)
	}
	return s, shift.Advance
}

func openMySQL(t *testing.T) (idempotency.Store, func(time.Duration)) {
	cfg, err := mysql.ParseDSN(mysqlDSN)
	if err != nil {
		t.Fatal(err)
	}
	prefix := randomName("opsui_") + "_"
	shift := new(mysqlstore.TimeShift)
	s, err := mysqlstore.Open(cfg, mysqlstore.WithTablePrefix(prefix), mysqlstore.WithTimeShift(shift))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.DB().PingContext(ctx); err != nil {
		t.Fatalf("MySQL is not reachable at %s (start it, see .ci/run): %v", mysqlDSN, err)
	}
	if err := mysqlstore.Migrate(ctx, s.DB(), prefix); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		for _, table := range []string{"idempotency_keys", "idempotency_generations"} {
			if _, err := s.DB().ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+prefix+table+"`"); err != nil {
				t.Errorf("drop %s%s: %v", prefix, table, err)
			}
		}
	})
	return s, shift.Advance
}

func openRedis(t *testing.T) (idempotency.Store, func(time.Duration)) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis is not reachable at %s (start it, see .ci/run): %v", redisAddr, err)
	}
	prefix := randomName("opsui_")
	t.Cleanup(func() {
		iter := rdb.Scan(context.Background(), 0, "{"+prefix+":*", 1000).Iterator()
		for iter.Next(context.Background()) {
			rdb.Del(context.Background(), iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("delete %s: %v", prefix, err)
		}
	})
	shift := new(redisstore.TimeShift)
	s, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithTimeShift(shift))
	if err != nil {
		t.Fatal(err)
	}
	return s, shift.Advance
}

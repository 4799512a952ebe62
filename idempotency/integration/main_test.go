package integration_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every test here needs a database: check each once and say what is
	// missing, rather than fail each test with a connection error. Failing
	// (not skipping) keeps CI from passing without these tests.
	for _, c := range []struct {
		name, env, addr string
		check           func(context.Context) error
	}{
		{"PostgreSQL", pgDSNEnv, pgDSN(), checkPostgres},
		{"MariaDB or MySQL", mysqlDSNEnv, mysqlDSN(), checkMySQL},
		{"Redis", redisAddrEnv, redisAddr(), checkRedis},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := c.check(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "idempotency/integration: the tests need %s at %s ($%s), and could not use it: %v\n"+
				"(the tests of the store's own module say how to start it)\n", c.name, c.addr, c.env, err)
			os.Exit(1)
		}
	}
	goleak.VerifyTestMain(m)
}

func checkPostgres(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, pgDSN())
	if err != nil {
		return err
	}
	return conn.Close(context.Background())
}

func checkMySQL(ctx context.Context) error {
	cfg, err := mysql.ParseDSN(mysqlDSN())
	if err != nil {
		return err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	return db.PingContext(ctx)
}

func checkRedis(ctx context.Context) error {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	return rdb.Ping(ctx).Err()
}

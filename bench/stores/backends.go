package stores

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Servers names the databases of the backends.
type Servers struct {
	PostgresDSN, RedisAddr, MySQLDSN string
}

// DefaultServers are the machine's servers, or those the environment
// names (EXACTLYONCE_PG_DSN, EXACTLYONCE_REDIS_ADDR, EXACTLYONCE_MYSQL_DSN).
func DefaultServers() Servers {
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	return Servers{
		PostgresDSN: env("EXACTLYONCE_PG_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		RedisAddr:   env("EXACTLYONCE_REDIS_ADDR", "127.0.0.1:6379"),
		MySQLDSN:    env("EXACTLYONCE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test"),
	}
}

// Backends are the four stores: memory, PostgreSQL, Redis, MySQL.
func Backends(sv Servers) []Backend {
	return []Backend{
		{Name: "memory", Open: openMemory},
		{Name: "PostgreSQL", Open: sv.openPostgres, How: "pgbench running the store's claim and complete statements"},
		{Name: "Redis", Open: sv.openRedis, How: "the store's Claim and Complete (one script each) called in a loop, go-redis"},
		{Name: "MySQL", Open: sv.openMySQL, How: "the store's Claim and Complete (their statements) called in a loop, database/sql"},
	}
}

func openMemory(context.Context, int) (Opened, error) {
	return Opened{Store: idempotency.NewMemoryStore(nil), Close: func() {}}, nil
}

// runName is a name for this run's schema, key prefix or tables.
func runName() string { return "bench_" + strconv.FormatInt(time.Now().UnixNano(), 36) }

func (sv Servers) openPostgres(ctx context.Context, clients int) (Opened, error) {
	cfg, err := pgxpool.ParseConfig(sv.PostgresDSN)
	if err != nil {
		return Opened{}, err
	}
	cfg.MaxConns = int32(clients)
	rt := new(RoundTrips)
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rt.Conn(c), nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return Opened{}, err
	}
	schema := runName()
	drop := func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		pool.Close()
	}
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		drop()
		return Opened{}, fmt.Errorf("PostgreSQL at %s: %w", sv.PostgresDSN, err)
	}
	s, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		drop()
		return Opened{}, err
	}
	script, err := sv.pgbenchScript(ctx, schema)
	if err != nil {
		drop()
		return Opened{}, err
	}
	limit := func(ctx context.Context, clients int, d time.Duration) (float64, error) {
		return sv.pgbench(ctx, script, clients, d)
	}
	return Opened{Store: s, RT: rt, Close: drop, Limit: limit}, nil
}

func (sv Servers) openRedis(ctx context.Context, clients int) (Opened, error) {
	rt := new(RoundTrips)
	rdb := redis.NewClient(&redis.Options{Addr: sv.RedisAddr, PoolSize: clients,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return rt.Conn(c), nil
		}})
	prefix := runName()
	drop := func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		_ = rdb.Close()
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		drop()
		return Opened{}, fmt.Errorf("Redis at %s: %w", sv.RedisAddr, err)
	}
	s, err := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	if err != nil {
		drop()
		return Opened{}, err
	}
	return Opened{Store: s, RT: rt, Close: drop, Limit: directLimit(s)}, nil
}

func (sv Servers) openMySQL(ctx context.Context, clients int) (Opened, error) {
	cfg, err := mysql.ParseDSN(sv.MySQLDSN)
	if err != nil {
		return Opened{}, err
	}
	rt := new(RoundTrips)
	network := "bench" + strconv.FormatInt(time.Now().UnixNano(), 36)
	addr, nw := cfg.Addr, cfg.Net
	mysql.RegisterDialContext(network, func(ctx context.Context, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, nw, addr)
		if err != nil {
			return nil, err
		}
		return rt.Conn(c), nil
	})
	cfg.Net = network
	prefix := runName() + "_"
	s, err := mysqlstore.Open(cfg, mysqlstore.WithTablePrefix(prefix))
	if err != nil {
		return Opened{}, err
	}
	s.DB().SetMaxOpenConns(clients)
	s.DB().SetMaxIdleConns(clients)
	drop := func() {
		for _, table := range []string{"idempotency_keys", "idempotency_generations"} {
			_, _ = s.DB().ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+prefix+table+"`")
		}
		_ = s.Close()
	}
	if err := mysqlstore.Migrate(ctx, s.DB(), prefix); err != nil {
		drop()
		return Opened{}, fmt.Errorf("MySQL at %s: %w", sv.MySQLDSN, err)
	}
	return Opened{Store: s, RT: rt, Close: drop, Limit: directLimit(s)}, nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
)

// defaultMySQLDSN is the MySQL or MariaDB server the demo uses unless
// EXACTLYONCE_MYSQL_DSN or -mysql says otherwise.
const defaultMySQLDSN = "root@tcp(127.0.0.1:3306)/test"

// envMySQLDSN returns EXACTLYONCE_MYSQL_DSN, or defaultMySQLDSN.
func envMySQLDSN() string {
	if dsn := os.Getenv("EXACTLYONCE_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return defaultMySQLDSN
}

// openMySQL makes the store's tables with a prefix of the run's on
// cfg.MySQLDSN (dropped afterwards) and gives every instance a store with a
// pool of its own on them.
func openMySQL(ctx context.Context, cfg config) (storeOpener, func(), error) {
	dsn, err := mysql.ParseDSN(cfg.MySQLDSN)
	if err != nil {
		return nil, nil, fmt.Errorf("-mysql: %w", err)
	}
	admin, err := mysqlstore.Open(dsn)
	if err != nil {
		return nil, nil, err
	}
	prefix := "payments_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_"
	var (
		mu     sync.Mutex
		stores []*mysqlstore.Store
	)
	drop := func() {
		mu.Lock()
		for _, s := range stores {
			s.Close()
		}
		stores = nil
		mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, table := range []string{"idempotency_keys", "idempotency_generations"} {
			admin.DB().ExecContext(dctx, "DROP TABLE IF EXISTS `"+prefix+table+"`")
		}
		admin.Close()
	}
	if err := mysqlstore.Migrate(ctx, admin.DB(), prefix); err != nil {
		drop()
		return nil, nil, fmt.Errorf("connect to MySQL and make the tables %s*: %w", prefix, err)
	}
	open := func(context.Context) (idempotency.Store, error) {
		store, err := mysqlstore.Open(dsn, mysqlstore.WithTablePrefix(prefix))
		if err != nil {
			return nil, err
		}
		mu.Lock()
		stores = append(stores, store)
		mu.Unlock()
		return store, nil
	}
	return open, drop, nil
}

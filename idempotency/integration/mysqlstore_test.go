package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/exactlyonce/retry/idempotency/storetest/linearize"
)

// mysqlDSNEnv names the environment variable holding the MariaDB or MySQL
// test database's DSN.
const mysqlDSNEnv = "EXACTLYONCE_MYSQL_DSN"

func mysqlDSN() string {
	if s := os.Getenv(mysqlDSNEnv); s != "" {
		return s
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// Concurrent calls on one mysqlstore, with owners paused past their leases
// and the clock moved, make a linearizable history.
func TestMySQLStoreLinearizable(t *testing.T) {
	t.Parallel()
	linearize.Run(t, func(t *testing.T) storetest.Harness {
		s, shift := newMySQLStore(t)
		return storetest.Harness{Store: s, Advance: shift.Advance}
	})
}

// newMySQLStore builds a mysqlstore on fresh tables with a random prefix,
// dropped at cleanup, with a time shift of its own.
func newMySQLStore(t testing.TB) (*mysqlstore.Store, *mysqlstore.TimeShift) {
	t.Helper()
	cfg, err := mysql.ParseDSN(mysqlDSN())
	require.NoError(t, err)
	admin, err := mysqlstore.Open(cfg.Clone())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	var b [5]byte
	_, _ = rand.Read(b[:])
	prefix := "t" + hex.EncodeToString(b[:]) + "_"
	ctx := context.Background()
	require.NoError(t, mysqlstore.Migrate(ctx, admin.DB(), prefix))
	t.Cleanup(func() {
		for _, table := range []string{"idempotency_keys", "idempotency_generations"} {
			if _, err := admin.DB().ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+prefix+table+"`"); err != nil {
				t.Errorf("drop %s%s: %v", prefix, table, err)
			}
		}
	})
	shift := new(mysqlstore.TimeShift)
	s, err := mysqlstore.Open(cfg.Clone(), mysqlstore.WithTablePrefix(prefix), mysqlstore.WithTimeShift(shift))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, shift
}

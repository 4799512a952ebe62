package mysqlstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// dsnEnv names the environment variable holding the test database's DSN.
const dsnEnv = "EXACTLYONCE_MYSQL_DSN"

func dsn() string {
	if s := os.Getenv(dsnEnv); s != "" {
		return s
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

func testConfig(t testing.TB) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn())
	require.NoError(t, err)
	return cfg
}

// newPrefix migrates fresh tables with a random prefix, dropped at cleanup,
// plus a local_writes table standing for a handler's own data.
func newPrefix(t testing.TB, s *mysqlstore.Store) string {
	t.Helper()
	prefix := "t" + randomHex(10) + "_"
	ctx := context.Background()
	require.NoError(t, mysqlstore.Migrate(ctx, s.DB(), prefix))
	_, err := s.DB().ExecContext(ctx, "CREATE TABLE `"+prefix+"local_writes` (name VARCHAR(200) PRIMARY KEY, n INT NOT NULL DEFAULT 1)")
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, table := range []string{"idempotency_keys", "idempotency_generations", "local_writes"} {
			if _, err := s.DB().ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+prefix+table+"`"); err != nil {
				t.Errorf("drop %s%s: %v", prefix, table, err)
			}
		}
	})
	return prefix
}

// newStore builds a Store on fresh tables with a time shift of its own, and
// returns its table prefix.
func newStore(t testing.TB) (*mysqlstore.Store, string, *mysqlstore.TimeShift) {
	t.Helper()
	admin, err := mysqlstore.Open(testConfig(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	prefix := newPrefix(t, admin)
	shift := new(mysqlstore.TimeShift)
	s, err := mysqlstore.Open(testConfig(t), mysqlstore.WithTablePrefix(prefix), mysqlstore.WithTimeShift(shift))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, prefix, shift
}

// localWrite inserts name into local_writes through the transaction in ctx.
func localWrite(ctx context.Context, prefix, name string) error {
	tx, ok := mysqlstore.TxFrom(ctx)
	if !ok {
		return errNoTx
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES (?)", name)
	return err
}

// written reports whether a committed local write named name exists.
func written(t testing.TB, s *mysqlstore.Store, prefix, name string) bool {
	t.Helper()
	var n int
	require.NoError(t, s.DB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM `"+prefix+"local_writes` WHERE name = ?", name).Scan(&n))
	return n > 0
}

var errNoTx = errors.New("no transaction in the context")

// randomHex returns n random hexadecimal digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func claimReq(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{Caller: "alice", Key: key, Fingerprint: "fp", Lease: 60e9, TTL: 3600e9}
}

func mustClaim(t testing.TB, s idempotency.Store, req idempotency.ClaimRequest, want idempotency.ClaimOutcome) idempotency.Record {
	t.Helper()
	c, err := s.Claim(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, want, c.Outcome)
	return c.Record
}

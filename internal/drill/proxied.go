package drill

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/internal/tcpproxy"
)

// ProxiedStore returns a pgstore on schema (migrated) of the PostgreSQL
// server at dsn whose connections go through a proxy of the test's own,
// which the test resets and refuses at will; both are closed at the end of
// the test.
func ProxiedStore(t testing.TB, dsn, schema string) (*tcpproxy.Proxy, *pgstore.Store) {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("drill: %v", err)
	}
	proxy, err := tcpproxy.New(net.JoinHostPort(pc.ConnConfig.Host, strconv.Itoa(int(pc.ConnConfig.Port))))
	if err != nil {
		t.Fatalf("drill: %v", err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	host, port, err := net.SplitHostPort(proxy.Addr())
	if err != nil {
		t.Fatalf("drill: %v", err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatalf("drill: %v", err)
	}
	pc.ConnConfig.Host, pc.ConnConfig.Port = host, uint16(p)
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	pc.MaxConns = 16
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatalf("drill: %v", err)
	}
	t.Cleanup(pool.Close)
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatalf("drill: a store through %s: %v", proxy.Addr(), err)
	}
	return proxy, store
}

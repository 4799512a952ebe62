package drill

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/internal/tcpproxy"
)

// Effects is a table of effects, one row per handled message, written by
// EffectHandler in the execution's transaction.
type Effects struct {
	pool  *pgxpool.Pool
	table string
}

// NewEffects creates the effects table in schema, through pool (a direct
// connection: not the proxied store's).
func NewEffects(t testing.TB, pool *pgxpool.Pool, schema string) *Effects {
	t.Helper()
	e := &Effects{pool: pool, table: pgx.Identifier{schema, "effects"}.Sanitize()}
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+e.table+" (key text NOT NULL)"); err != nil {
		t.Fatalf("drill: %v", err)
	}
	return e
}

// Handler writes the message's effect in the execution's transaction
// (pgstore.TxFrom).
func (e *Effects) Handler(ctx context.Context, m *consumer.Message) error {
	tx, _ := pgstore.TxFrom(ctx)
	_, err := tx.Exec(ctx, "INSERT INTO "+e.table+" (key) VALUES ($1)", m.Key)
	return err
}

// Count returns the effects written and the keys that have one.
func (e *Effects) Count(t testing.TB) (all, distinct int) {
	t.Helper()
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT key) FROM "+e.table).Scan(&all, &distinct); err != nil {
		t.Fatalf("drill: %v", err)
	}
	return all, distinct
}

// ResetStoreTwice is the store reset drill's fault: once n*3/10 effects
// are written it resets every connection through proxy and refuses new
// ones for refused, and once n*65/100 are it resets them again. It returns
// how many connections it reset; it fails the test when the effects stop
// coming for a minute.
func (e *Effects) ResetStoreTwice(t testing.TB, proxy *tcpproxy.Proxy, n int, refused time.Duration) int {
	t.Helper()
	e.await(t, n*3/10)
	proxy.Refuse(true)
	cut := proxy.Cut()
	outage := time.NewTimer(refused)
	<-outage.C // the outage's length, not a wait for something to happen
	proxy.Refuse(false)
	e.await(t, n*65/100)
	return cut + proxy.Cut()
}

// await waits for n effects, for a minute at most.
func (e *Effects) await(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range tick.C { // polling, bounded by deadline
		if all, _ := e.Count(t); all >= n {
			return
		}
		if time.Now().After(deadline) {
			all, _ := e.Count(t)
			t.Fatalf("drill: %d effects of the %d awaited within a minute", all, n)
		}
	}
}

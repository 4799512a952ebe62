package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// indexLookups makes the planner find the records of a batch statement by
// their primary key, whatever the table's statistics say, for the rest of
// the transaction. The batch statements join the requests (an unnest of
// arrays) with the records. Planned while the table is new or small, the
// join becomes a scan of the whole table (a hash join or a nested loop
// over a sequential scan), and a connection keeps that plan for its
// prepared statement until the table is next analyzed: on a store that
// grows from empty, every batch then reads every record. An index lookup
// per request is the right plan at any size, and with these settings the
// only one left: the statements give no other index a condition it could
// scan by (see batchQueries). That plan is made once per connection and
// kept (a generic plan): left to choose, the server plans these
// statements again at every execution, since a plan for the batch's own
// arrays looks cheaper, and planning them costs more than running them.
const indexLookups = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true)`

// queryAndCommit runs the statements before (those that begin the
// transaction, if conn is not in one yet), then sql with args looking
// records up by their key (indexLookups), reads its rows with read, and
// commits, in one round trip. A transaction left open by a failure is
// rolled back.
func queryAndCommit(ctx context.Context, conn *pgxpool.Conn, before []string, sql string, args []any, read func(pgx.Rows) error) error {
	q := &pgx.Batch{}
	for _, s := range before {
		q.Queue(s)
	}
	q.Queue(indexLookups)
	q.Queue(sql, args...)
	q.Queue("COMMIT")
	br := conn.SendBatch(ctx, q)
	var err error
	for range len(before) + 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = read(rows)
			rows.Close()
			err = errors.Join(err, rows.Err())
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	err = errors.Join(err, br.Close())
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

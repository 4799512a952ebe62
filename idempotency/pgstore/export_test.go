package pgstore

import "github.com/jackc/pgx/v5"

// IndexLookups is indexLookups, for the plan tests.
const IndexLookups = indexLookups

// BatchStatements returns the batch claim and complete statements of the
// store on schema.
func BatchStatements(schema string) (claim, complete string) {
	bq := buildBatchQueries(pgx.Identifier{schema}.Sanitize())
	return bq.claim, bq.complete
}

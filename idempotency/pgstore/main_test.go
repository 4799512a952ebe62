package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	// Every test here needs the database: check it once and say what is
	// missing, rather than fail each test with a connection error. Failing
	// (not skipping) keeps CI from passing without these tests.
	if err := checkDatabase(); err != nil {
		fmt.Fprint(os.Stderr, databaseHelp(err))
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// minServerVersion is the oldest PostgreSQL the store supports (13, for
// gen_random_uuid), as server_version_num.
const minServerVersion = 130000

// checkDatabase connects to the test database and checks its version.
func checkDatabase() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return err
	}
	if version < minServerVersion {
		return fmt.Errorf("the server is version %d; 13 or later is needed", version)
	}
	return nil
}

// databaseHelp says what the tests need and how to provide it.
func databaseHelp(err error) string {
	return fmt.Sprintf(`
pgstore tests need PostgreSQL 13 or later, and could not use it:

    %v

They connect to $%s, or by default to
    postgres://postgres@127.0.0.1:5432/test?sslmode=disable
that is, a server on 127.0.0.1:5432 that lets user postgres in with trust
authentication, with a database named "test". To start one on Debian or
Ubuntu (pg_lsclusters lists the installed versions):

    pg_ctlcluster <version> main start
    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE test'

or set %s to the URL of another server. These tests fail, rather
than skip, without it.

`, err, dsnEnv, dsnEnv)
}
